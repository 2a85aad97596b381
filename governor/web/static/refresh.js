// Reload the dashboard every few seconds, keeping the scroll position; wait while hidden.
(() => {
  const seconds = Number(document.body.dataset.refresh || 5);
  if (location.search) history.replaceState(null, "", location.pathname + location.hash);
  const tick = () => {
    if (document.visibilityState === "visible") location.reload();
    else setTimeout(tick, seconds * 1000);
  };
  setTimeout(tick, seconds * 1000);
})();
