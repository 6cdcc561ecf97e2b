// Narrow heatmaps: token labels thinned to what the width holds (hover still names every cell); on a
// phone also a thin colour bar with small numbers and no title (the subtitle and hover name the
// quantity) and no row-axis title, so the matrix gets the width. Wide charts are left as drawn.
// Installed once per window, re-applied as charts come and go.
(() => {
  if (window.__attentionVizNarrowCharts) return;
  window.__attentionVizNarrowCharts = true;
  const NARROW = 520;  // px: below this a colour bar beside the matrix leaves the matrix too little
  const LABEL = 24;    // px between tick labels along an axis: slanted labels closer than this touch
  const thinned = (axis, length) => {
    if (!axis || !Array.isArray(axis.tickvals)) return null;
    const every = Math.ceil(axis.tickvals.length * LABEL / Math.max(length, 1));
    if (every <= 1) return null;
    const keep = (_, i) => i % every === 0;
    return { vals: axis.tickvals.filter(keep), text: (axis.ticktext || axis.tickvals).filter(keep) };
  };
  const PHONE = 640;   // px of window: below it the colour bar and the row title give the matrix their room
  const adapt = chart => {
    const width = chart.clientWidth;
    if (!width || width >= NARROW || !window.Plotly || !chart.data || chart.__attentionVizNarrow === chart.data) return;
    const phone = window.innerWidth < PHONE;
    const traces = chart.data.map((trace, i) => [trace, i]).filter(([t]) => t.type === "heatmap" && t.showscale !== false);
    if (!traces.length) return;
    chart.__attentionVizNarrow = chart.data;  // this figure is done; a new one from the server is adapted again
    const size = chart._fullLayout && chart._fullLayout._size;
    // on a wide page a narrow chart (one of a side-by-side pair) keeps its margins and colour bar:
    // only its labels are thinned
    const update = phone ? { "margin.r": 8, "yaxis.title.text": "" } : {};
    const x = thinned(chart.layout.xaxis, size ? size.w : width), y = thinned(chart.layout.yaxis, size ? size.h : width);
    if (x) Object.assign(update, { "xaxis.tickvals": x.vals, "xaxis.ticktext": x.text });
    if (y) Object.assign(update, { "yaxis.tickvals": y.vals, "yaxis.ticktext": y.text });
    if (phone) {
      window.Plotly.restyle(chart, { "colorbar.thickness": 8, "colorbar.title.text": "", "colorbar.tickfont.size": 9,
                                     "colorbar.xpad": 4 }, traces.map(([, i]) => i));
    }
    if (Object.keys(update).length) window.Plotly.relayout(chart, update);
  };
  let pending = null;
  const adaptAll = () => document.querySelectorAll(".js-plotly-plot").forEach(adapt);
  new MutationObserver(() => {
    if (pending === null) pending = setTimeout(() => { pending = null; adaptAll(); }, 250);
  }).observe(document.body, { childList: true, subtree: true });
  window.addEventListener("resize", adaptAll);
  adaptAll();
})();
