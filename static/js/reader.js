/* The blob reader's small helpers. Everything here only makes quicker what already works
   without it: line numbers are links to #L<n> (the browser scrolls, :target highlights),
   pages are links, the JSON tree is <details>.

   - Lines: a click on a line number highlights that line, shift-click a range
     (#L<a>-L<b>, as GitHub does); "Select these lines" then opens lines:<a>-<b>.
     Ids carry the reader's prefix (data-prefix) where several readers share a page.
   - A wrap toggle for long lines, remembered in this browser (localStorage).
   - Expand all / Collapse all for the JSON tree.

   Controls that need this script are rendered `hidden` and shown from here. No inline
   script or style anywhere (the Content-Security-Policy forbids them): classes only. */
(function () {
  "use strict";

  var WRAP_KEY = "blobviewer.wrap";
  var HASH = /^#(.*?)L(\d+)(?:-L(\d+))?$/;

  function readerOf(element) {
    return element && element.closest ? element.closest("section.reader") : null;
  }

  function readerByPrefix(prefix) {
    var all = document.querySelectorAll("section.reader");
    for (var i = 0; i < all.length; i++) {
      if ((all[i].getAttribute("data-prefix") || "") === prefix) return all[i];
    }
    return null;
  }

  /* --- wrap ------------------------------------------------------------------------ */

  function wrapOn() {
    try {
      return window.localStorage.getItem(WRAP_KEY) === "1";
    } catch (error) {
      return false; // storage refused (private mode): unwrapped, as without the script
    }
  }

  function applyWrap() {
    var on = wrapOn();
    document.documentElement.classList.toggle("wrap-lines", on);
    var buttons = document.querySelectorAll("button.wrap-toggle");
    for (var i = 0; i < buttons.length; i++) {
      buttons[i].setAttribute("aria-pressed", on ? "true" : "false");
    }
  }

  function toggleWrap() {
    try {
      window.localStorage.setItem(WRAP_KEY, wrapOn() ? "0" : "1");
    } catch (error) {
      document.documentElement.classList.toggle("wrap-lines");
      return;
    }
    applyWrap();
  }

  /* --- lines ----------------------------------------------------------------------- */

  function rowOf(reader, number) {
    return document.getElementById((reader.getAttribute("data-prefix") || "") + "L" + number);
  }

  function clearHighlight(reader) {
    var lit = reader.querySelectorAll("pre.lines .r.hl");
    for (var i = 0; i < lit.length; i++) lit[i].classList.remove("hl");
  }

  function selectLinesUrl(reader, first, last) {
    var pre = reader.querySelector("pre.lines");
    var base = pre ? pre.getAttribute("data-base") || "" : "";
    var lines = "lines:" + first + "-" + last;
    var query = new URLSearchParams({ selector: base ? base + " | " + lines : lines });
    return reader.getAttribute("data-url") + "?" + query.toString();
  }

  function highlight(reader, first, last, scroll) {
    if (last < first) {
      var swap = first;
      first = last;
      last = swap;
    }
    clearHighlight(reader);
    var pre = reader.querySelector("pre.lines");
    if (!pre) return;
    pre.classList.add("js-lines"); // from now on the script, not :target, highlights
    var start = null;
    for (var n = first; n <= last; n++) {
      var row = rowOf(reader, n);
      if (!row) continue;
      row.classList.add("hl");
      if (!start) start = row;
    }
    reader.setAttribute("data-anchor", String(first));
    var bar = reader.querySelector(".line-selection");
    if (bar && start) {
      bar.querySelector(".what").textContent =
        first === last ? "Line " + first + " selected." : "Lines " + first + "–" + last + " selected.";
      bar.querySelector("a.select-lines").setAttribute("href", selectLinesUrl(reader, first, last));
      bar.hidden = false;
    }
    if (scroll && start) start.scrollIntoView({ block: "start" }); // scroll-margin: context above
  }

  function fromHash(scroll) {
    var match = HASH.exec(window.location.hash);
    if (!match) return;
    var reader = readerByPrefix(decodeURIComponent(match[1]));
    if (!reader || !reader.querySelector("pre.lines")) return;
    var first = Number(match[2]);
    highlight(reader, first, match[3] ? Number(match[3]) : first, scroll);
  }

  function onLineClick(event, link) {
    var reader = readerOf(link);
    var number = Number(link.textContent);
    if (!reader || !number) return;
    event.preventDefault();
    var anchor = Number(reader.getAttribute("data-anchor"));
    var prefix = reader.getAttribute("data-prefix") || "";
    var first = number;
    var last = number;
    if (event.shiftKey && anchor) {
      first = Math.min(anchor, number);
      last = Math.max(anchor, number);
    }
    var hash = "#" + prefix + "L" + first + (last !== first ? "-L" + last : "");
    // Replace, not push: htmx keeps its own entries in the history for page changes.
    window.history.replaceState(window.history.state, "", hash);
    highlight(reader, first, last, false);
    if (event.shiftKey) reader.setAttribute("data-anchor", String(anchor || number));
    else reader.setAttribute("data-anchor", String(number));
  }

  function onSelectLines(event, link) {
    var reader = readerOf(link);
    if (!reader || !reader.classList.contains("in-place") || !window.htmx) return;
    // In place on a timeline: load the lines into this reader, as its own links do.
    event.preventDefault();
    // From the link, so the reader's hx-sync applies: a later click replaces this one.
    window.htmx.ajax("GET", link.getAttribute("href"), {
      source: link,
      target: "#" + reader.id,
      swap: "outerHTML",
    });
  }

  /* --- setting up (on load and after every htmx swap) ------------------------------ */

  function reveal(root) {
    var hidden = root.querySelectorAll(
      "section.reader button.tool[hidden], section.reader .keys-hint[hidden]"
    );
    for (var i = 0; i < hidden.length; i++) hidden[i].hidden = false;
  }

  function setUp(root) {
    reveal(root || document);
    applyWrap();
  }

  document.addEventListener("click", function (event) {
    var target = event.target;
    if (!target || !target.closest) return;
    var line = target.closest("section.reader pre.lines a.ln");
    if (line) return onLineClick(event, line);
    var select = target.closest("section.reader a.select-lines");
    if (select) return onSelectLines(event, select);
    if (target.closest("button.wrap-toggle")) return toggleWrap();
    var treeButton = target.closest("section.reader button[data-tree]");
    if (treeButton) {
      var open = treeButton.getAttribute("data-tree") === "open";
      var nodes = readerOf(treeButton).querySelectorAll(".json-tree details");
      for (var i = 0; i < nodes.length; i++) nodes[i].open = open;
    }
  });
  document.addEventListener("htmx:afterSettle", function (event) {
    setUp(event.target);
    fromHash(false);
  });
  window.addEventListener("hashchange", function () {
    fromHash(true);
  });
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", function () {
      setUp(document);
      fromHash(true);
    });
  } else {
    setUp(document);
    fromHash(true);
  }
})();
