// The session list: while it shows a session that grew in the last minute (marked live)
// and the tab is visible, the list is fetched again every REFRESH_MS, so its counts follow
// the run; once none is live, it stops. No inline script: the CSP forbids it.
"use strict";

(() => {
  const REFRESH_MS = 5000;
  let timer = null;

  const refresh = () => {
    timer = null;
    if (!window.htmx || document.visibilityState !== "visible") return;
    if (!document.querySelector("#list .live-dot")) return;
    if (document.activeElement?.closest("#session-filters")) return schedule(); // typing
    const here = window.location.pathname + window.location.search;
    window.htmx.ajax("GET", here, { target: "#list", swap: "outerHTML" }).finally(schedule);
  };

  const schedule = () => {
    if (timer === null && document.querySelector("#list .live-dot")) timer = setTimeout(refresh, REFRESH_MS);
  };

  document.addEventListener("visibilitychange", schedule);
  document.addEventListener("htmx:afterSettle", schedule);
  schedule();
})();
