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

// Live follow: while the tab is visible, ask every POLL_MS whether the session grew past
// what the page shows (`/sessions/<id>/live`: 204 when it did not). New steps show a bar
// ("3 new steps · show them") at the foot of the screen; "show" (or Follow, at once) loads
// the last page into the timeline and scrolls to the newest step. Nothing moves before.
(() => {
  const POLL_MS = 2000;
  const live = document.getElementById("live");
  const news = document.getElementById("live-news");
  if (!live || !news || !window.fetch) return;
  live.hidden = false;
  const follow = live.querySelector("input.follow");
  let shown = { items: Number(live.dataset.items), steps: Number(live.dataset.steps) };
  let timer = null;

  const lastPage = () => {
    const url = new URL(window.location.href);
    url.searchParams.set("page", "last");
    url.hash = "";
    return url.pathname + url.search;
  };

  const showNew = (counts) => {
    news.hidden = true;
    news.replaceChildren();
    shown = counts;
    if (!window.htmx) return window.location.assign(lastPage());
    return window.htmx
      .ajax("GET", lastPage(), { target: "#timeline-body", swap: "outerHTML" })
      .then(() => {
        const steps = document.querySelectorAll("#timeline section.step, #timeline article");
        steps[steps.length - 1]?.scrollIntoView({ block: "end" });
      });
  };

  const poll = async () => {
    timer = null;
    if (document.visibilityState !== "visible") return; // goes on when the tab is seen
    try {
      const response = await fetch(`${live.dataset.url}?items=${shown.items}&steps=${shown.steps}`, {
        credentials: "same-origin",
      });
      if (response.status === 200) {
        const holder = document.createElement("div");
        holder.innerHTML = await response.text(); // the server's escaped fragment
        const bar = holder.querySelector(".live-bar");
        const counts = { items: Number(bar.dataset.items), steps: Number(bar.dataset.steps) };
        if (follow.checked) {
          await showNew(counts);
        } else {
          bar.querySelector("a.show-new").href = lastPage();
          bar.dataset.items = String(counts.items);
          news.replaceChildren(bar);
          news.hidden = false;
        }
      }
    } catch (error) {
      // offline or restarting: ask again later
    }
    schedule();
  };

  const schedule = () => {
    if (timer === null && document.visibilityState === "visible") timer = setTimeout(poll, POLL_MS);
  };

  news.addEventListener("click", (event) => {
    const link = event.target.closest("a.show-new");
    if (!link) return;
    event.preventDefault();
    const bar = link.closest(".live-bar");
    showNew({ items: Number(bar.dataset.items), steps: Number(bar.dataset.steps) });
  });
  follow.addEventListener("change", () => {
    const bar = news.querySelector(".live-bar");
    if (follow.checked && bar) showNew({ items: Number(bar.dataset.items), steps: Number(bar.dataset.steps) });
  });
  document.addEventListener("visibilitychange", schedule);
  schedule();
})();
