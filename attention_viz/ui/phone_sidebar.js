// On a phone the sidebar covers most of the page: once a choice is made in it (a view, an image
// format), it closes, so the figure the choice opened is what the user sees. Streamlit's own collapse
// button does it (ui/private_api.py names its test id). Installed once per window.
(() => {
  if (window.__attentionVizPhoneSidebar) return;
  window.__attentionVizPhoneSidebar = true;
  const PHONE = 640;  // px of window, as ui/narrow_charts.js
  document.addEventListener("click", event => {
    if (window.innerWidth >= PHONE) return;
    if (!event.target.closest("[data-testid='stSidebar'] [data-testid='stRadio'] label")) return;
    setTimeout(() => {
      const collapse = document.querySelector("[data-testid='stSidebarCollapseButton'] button");
      if (collapse) collapse.click();
    }, 300);  // after the radio has taken the click (and sent the choice)
  }, true);
})();
