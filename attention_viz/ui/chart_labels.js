// Every chart on the page gets a role and a label a screen reader can say: its title and the
// subtitle that names the model, the sentence and the settings (ui/export.py writes both). Plotly
// draws its charts as SVG with neither. Installed once per window; charts come and go with every run,
// so a MutationObserver relabels them, at most every 200 ms.
(() => {
  if (window.__attentionVizChartLabels) return;
  window.__attentionVizChartLabels = true;
  const words = (root, selector) => [...root.querySelectorAll(selector)].map(e => e.textContent.trim()).filter(Boolean).join(" ");
  const label = (chart, title, subtitle) => {
    const text = [title, subtitle].filter(Boolean).join(" — ") || "attention-viz chart";
    if (chart.getAttribute("aria-label") !== text) chart.setAttribute("aria-label", text);
    if (chart.getAttribute("role") !== "figure") chart.setAttribute("role", "figure");
  };
  const labelAll = () => {
    for (const chart of document.querySelectorAll(".js-plotly-plot")) {
      label(chart, words(chart, ".gtitle"), words(chart, ".gtitle-subtitle"));
    }
    for (const chart of document.querySelectorAll(".avlc")) {  // our levels element (ui/level_canvas.js)
      label(chart, words(chart, ".avlc-title"), words(chart, ".avlc-subtitle"));
    }
  };
  let pending = null;
  new MutationObserver(() => {
    if (pending === null) pending = setTimeout(() => { pending = null; labelAll(); }, 200);
  }).observe(document.body, { childList: true, subtree: true, characterData: true });
  labelAll();
})();
