// The session timeline: close a view opened in place (a blob's first page, or the output
// an inspect call got) by putting its empty slot back. No inline script: the CSP forbids it.
"use strict";

document.addEventListener("click", (event) => {
  const button = event.target.closest("button.close-in-place");
  if (!button) return;
  const view = button.closest(".in-place-box")?.querySelector(".in-place");
  if (!view) return;
  const slot = document.createElement("div");
  slot.className = "blob-slot";
  slot.id = view.id;
  view.replaceWith(slot);
  button.closest(".step, article")?.querySelector("a, button")?.focus({ preventScroll: true });
});
