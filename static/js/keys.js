/* Keyboard shortcuts for every page (the list: `?`, or the dialog in base.html).

   - "/" focuses the box of the page: the selector of the reader on screen, the find box
     of a session page, or the search of the session list; Esc leaves a box.
   - "[" and "]" follow the reader's previous and next page links; after a selector runs,
     focus goes to the content it swapped in, so they page at once.
   - On a session page, "j" and "k" move to the next and previous step, "e" to the next
     failed step (from the step in view; the step is focused and scrolled to).
   - "?" opens the list of shortcuts.

   No shortcut fires while typing in a field, or with Ctrl, Alt or Meta held. No inline
   script or style: the Content-Security-Policy forbids them. */
(function () {
  "use strict";

  function typing(target) {
    if (!target || !target.closest) return false;
    return Boolean(target.closest("input, textarea, select, [contenteditable]:not([contenteditable=false])"));
  }

  function visible(element) {
    return Boolean(element && element.getClientRects().length);
  }

  /* --- the box of the page ----------------------------------------------------------- */

  function pageBox() {
    var candidates = [
      document.getElementById("blob-view-selector"),
      document.getElementById("find-q"),
      document.querySelector("section.reader.in-place input[name=selector]"),
      document.getElementById("id_q"),
    ];
    for (var i = 0; i < candidates.length; i++) {
      if (visible(candidates[i])) return candidates[i];
    }
    return null;
  }

  function focusBox() {
    var box = pageBox();
    if (!box) return false;
    box.focus();
    if (box.select) box.select();
    return true;
  }

  /* A reader's content, made focusable (once) so that keys go to it, not to the box. */
  function focusContent(reader) {
    var content = reader.querySelector("pre.content, .json-tree, p.empty, p.error") || reader;
    if (!content.hasAttribute("tabindex")) content.setAttribute("tabindex", "-1");
    content.focus({ preventScroll: true });
  }

  /* --- a reader's pages ------------------------------------------------------------- */

  /* The reader the keys go to: the focused one, the blob page's, or the only one. */
  function currentReader() {
    var active = document.activeElement;
    var focused = active && active.closest ? active.closest("section.reader") : null;
    if (focused) return focused;
    var main = document.getElementById("blob-view");
    if (main) return main;
    var all = document.querySelectorAll("section.reader");
    return all.length === 1 ? all[0] : null;
  }

  function page(forward) {
    var reader = currentReader();
    if (!reader) return false;
    var rels = forward ? ["next"] : ["prev", "first"];
    for (var i = 0; i < rels.length; i++) {
      var link = reader.querySelector('nav.pager a[data-key="' + rels[i] + '"]');
      if (link) {
        link.click();
        return true;
      }
    }
    return false;
  }

  /* --- steps ------------------------------------------------------------------------- */

  function steps(selector) {
    return Array.prototype.slice.call(document.querySelectorAll(selector));
  }

  /* The index of the step at the top of the screen (the first one not above it). */
  function stepInView(all) {
    var focused = document.activeElement && document.activeElement.closest
      ? document.activeElement.closest("section.step")
      : null;
    if (focused && all.indexOf(focused) >= 0) return all.indexOf(focused);
    for (var i = 0; i < all.length; i++) {
      if (all[i].getBoundingClientRect().bottom > 8) return i;
    }
    return all.length - 1;
  }

  function goToStep(step) {
    if (!step.hasAttribute("tabindex")) step.setAttribute("tabindex", "-1");
    step.scrollIntoView({ block: "start" });
    step.focus({ preventScroll: true });
    if (step.id) window.history.replaceState(window.history.state, "", "#" + step.id);
  }

  function moveStep(by, errorsOnly) {
    var all = steps("section.step");
    if (!all.length) return false;
    var here = stepInView(all);
    var focused = document.activeElement === all[here];
    var start = by > 0 ? (focused ? here + 1 : here) : here - 1;
    if (by > 0 && !focused && !errorsOnly && all[here].getBoundingClientRect().top < 8) {
      start = here + 1; // the step at the top is already in view: go on to the next one
    }
    for (var i = start; i >= 0 && i < all.length; i += by) {
      if (!errorsOnly || all[i].classList.contains("is-error")) {
        goToStep(all[i]);
        return true;
      }
    }
    return false;
  }

  /* --- the list of shortcuts --------------------------------------------------------- */

  function openHelp() {
    var dialog = document.getElementById("shortcuts");
    if (!dialog || dialog.open) return false;
    dialog.showModal();
    return true;
  }

  /* --- keys -------------------------------------------------------------------------- */

  function onKey(event) {
    if (event.ctrlKey || event.metaKey || event.altKey || event.defaultPrevented) return;
    if (typing(event.target)) {
      if (event.key === "Escape") {
        event.target.blur();
        var reader = event.target.closest ? event.target.closest("section.reader") : null;
        if (reader) focusContent(reader);
      }
      return;
    }
    var done = false;
    if (event.key === "/") done = focusBox();
    else if (event.key === "[" || event.key === "]") done = page(event.key === "]");
    else if (event.key === "?") done = openHelp();
    else if (event.key === "j") done = moveStep(1, false);
    else if (event.key === "k") done = moveStep(-1, false);
    else if (event.key === "e") done = moveStep(1, true);
    if (done) event.preventDefault();
  }

  document.addEventListener("keydown", onKey);

  // A selector run from its box: its answer takes the focus, so "[" / "]" page at once.
  document.addEventListener("htmx:afterSettle", function (event) {
    var source = event.detail && event.detail.requestConfig && event.detail.requestConfig.elt;
    if (!source || !source.matches || !source.matches("form.selector")) return;
    var reader = document.getElementById(event.detail.target && event.detail.target.id);
    if (reader && reader.matches("section.reader")) focusContent(reader);
  });

  document.addEventListener("click", function (event) {
    var close = event.target.closest ? event.target.closest("#shortcuts button.close") : null;
    if (close) document.getElementById("shortcuts").close();
  });
})();
