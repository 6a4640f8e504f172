// Copy buttons: <button class="copy" data-copy="ID"> copies the value of the input #ID and
// says "Copied" in the status beside it (role=status, aria-live), for a moment.
// The buttons show only when this script runs (html.can-copy); without it the input is
// still there to select and copy by hand. One listener on the document, so buttons that
// htmx swaps in later work too.
(function () {
  "use strict";
  document.documentElement.classList.add("can-copy");
  var SHOWN_MS = 2500;

  function say(button, text) {
    var status = document.getElementById(button.getAttribute("aria-describedby") || "");
    if (!status) return;
    status.textContent = text;
    status.classList.add("shown");
    clearTimeout(button.copyTimer);
    button.copyTimer = setTimeout(function () {
      status.classList.remove("shown");
      status.textContent = "";
    }, SHOWN_MS);
  }

  // Where the Clipboard API is not offered (a page over plain HTTP from another host).
  function copyBySelection(input) {
    input.focus();
    input.select();
    try {
      return document.execCommand("copy");
    } catch (error) {
      return false;
    }
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest("button.copy[data-copy]");
    if (!button) return;
    var input = document.getElementById(button.getAttribute("data-copy"));
    if (!input) return;
    var fallback = function () {
      say(button, copyBySelection(input) ? "Copied" : "Press Ctrl+C to copy");
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(input.value).then(function () {
        say(button, "Copied");
      }, fallback);
    } else {
      fallback();
    }
  });

  // A click into a link's field selects all of it, ready to copy by hand.
  document.addEventListener("focusin", function (event) {
    if (event.target.matches && event.target.matches("input.share-url")) {
      event.target.select();
    }
  });
})();
