// Refresh the page's content every few seconds without leaving it: fetch the page, swap in its
// new content, keep the scroll position. While the server does not answer, keep what is shown
// under a "stale since" banner and keep trying; a session that has ended goes to sign-in.
// Waits while the tab is hidden or an operator is writing a note.
(() => {
  const seconds = Number(document.body.dataset.refresh || 5);
  if (location.search) history.replaceState(null, "", location.pathname + location.hash);
  let asOf = document.body.dataset.asOf;
  const pad = (n) => String(n).padStart(2, "0");
  const hhmmss = (iso) => {
    const at = new Date(iso);
    return `${pad(at.getUTCHours())}:${pad(at.getUTCMinutes())}:${pad(at.getUTCSeconds())} UTC`;
  };
  const busy = () =>
    document.querySelector("details.confirm[open]") ||
    ["INPUT", "TEXTAREA", "SELECT"].includes(document.activeElement?.tagName);
  const showStale = (why) => {
    const banner = document.getElementById("stale");
    if (!banner) return;
    banner.textContent =
      `Stale since ${hhmmss(asOf)}: ${why}. What you see is as of then; ` +
      `trying again every ${seconds} s.`;
    banner.hidden = false;
  };
  const swap = (html) => {
    const next = new DOMParser().parseFromString(html, "text/html");
    const main = next.querySelector("main");
    if (!main) return false;
    for (const part of ["main", ".top"]) {
      const fresh = next.querySelector(part);
      if (fresh) document.querySelector(part)?.replaceWith(fresh);
    }
    asOf = next.body.dataset.asOf || asOf;
    document.title = next.title;
    return true;
  };
  const tick = async () => {
    if (document.visibilityState === "visible" && !busy()) {
      try {
        const response = await fetch(location.pathname, { cache: "no-store" });
        if (response.redirected && new URL(response.url).pathname === "/login") {
          location.assign(response.url);
          return;
        }
        if (!response.ok) showStale(`the server answered ${response.status}`);
        else if (!swap(await response.text())) showStale("the server's answer was not the page");
      } catch {
        showStale("the server is not answering");
      }
    }
    setTimeout(tick, seconds * 1000);
  };
  setTimeout(tick, seconds * 1000);
})();
