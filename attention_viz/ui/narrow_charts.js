// Token heatmaps label every token the width drawn holds: the labels of each token axis sized (12 px
// down to 7) and the key labels turned upright where -60° leaves them too close, as
// figures/text_width.py's fitted_ticks does for a full-width figure; only past 7 px every k-th token
// (hover still names every cell). A title or subtitle wider than its chart wraps onto more lines. On a phone
// also a thin colour bar with small numbers and no title (the subtitle and hover name the quantity)
// and no row-axis title, so the matrix gets the width. Installed once per window, re-applied as charts
// come and go and the window changes size.
(() => {
  if (window.__attentionVizNarrowCharts) return;
  window.__attentionVizNarrowCharts = true;
  const LARGEST = 12, SMALLEST = 7, LINE_BOX = 1.34, TURNED = -60, UPRIGHT = -90;
  const SUBTITLE_LINE = 18;  // px: one line of 11 px subtitle (figures/export.py SUBTITLE_ROOM)
  const TITLE_LINE = 20;  // px: one line of a 14 px title
  const PHONE = 640;   // px of window: below it the colour bar and the row title give the matrix their room
  // (every k-th, font size) for n labels along room px, turned by angle (90: level labels on a y axis)
  const fitted = (n, room, angle) => {
    const pitch = room / Math.max(n, 1) * Math.sin(Math.abs(angle) * Math.PI / 180);
    const size = Math.min(LARGEST, Math.floor((pitch - 1) / LINE_BOX));
    if (size >= SMALLEST) return [1, size];
    const fit = Math.max(1, Math.floor(room / ((LINE_BOX * SMALLEST + 1) / Math.sin(Math.abs(angle) * Math.PI / 180))));
    return [Math.ceil(n / fit), SMALLEST];
  };
  // how far a label `width` px long, of `size` px, turned by `angle`, reaches away from its axis
  const reach = (width, size, angle) => {
    const turn = Math.abs(angle) * Math.PI / 180;
    return width * Math.sin(turn) + 1.3 * size * Math.cos(turn);
  };
  const ticks = (axis, every) => {
    const keep = (_, i) => i % every === 0;
    const values = axis.categoryarray.filter(keep);
    return { vals: values, text: values.map(v => String(v).replace(/^\d+: /, "")) };
  };
  const tokenAxes = (chart, update) => {
    const size = chart._fullLayout && chart._fullLayout._size;
    if (!size) return;
    const x = chart.layout.xaxis, y = chart.layout.yaxis;
    if (x && Array.isArray(x.categoryarray) && Array.isArray(x.tickvals)) {
      let angle = TURNED, [every, font] = fitted(x.categoryarray.length, size.w, TURNED);
      if (font < LARGEST) { angle = UPRIGHT; [every, font] = fitted(x.categoryarray.length, size.w, UPRIGHT); }
      const t = ticks(x, every), was = (x.tickfont || {}).size || LARGEST;
      if (t.vals.length !== x.tickvals.length || was !== font || x.tickangle !== angle) {
        Object.assign(update, { "xaxis.tickvals": t.vals, "xaxis.ticktext": t.text, "xaxis.tickfont.size": font,
                                "xaxis.tickangle": angle });
        // turned upright, long labels reach further from the plot: the margin makes that room itself, so
        // Plotly draws once instead of measuring and pushing it (figures/text_width.py)
        const widest = Math.max(0, ...[...chart.querySelectorAll(".xtick > text")].map(e => e.getBBox().width));
        const grown = reach(widest * font / was, font, angle) - reach(widest, was, x.tickangle || 0);
        const side = x.side === "top" ? "t" : "b";
        if (grown > 0) {
          update[`margin.${side}`] = (update[`margin.${side}`] || (chart.layout.margin || {})[side] || 0) + Math.ceil(grown) + 2;
          if (chart.layout.height) update.height = (update.height || chart.layout.height) + Math.ceil(grown) + 2;
        }
      }
    }
    if (y && Array.isArray(y.categoryarray) && Array.isArray(y.tickvals) && y.categoryarray.length > 1) {
      const [every, font] = fitted(y.categoryarray.length, size.h, 90);
      const t = ticks(y, every);
      if (t.vals.length !== y.tickvals.length || (y.tickfont || {}).size !== font) {
        Object.assign(update, { "yaxis.tickvals": t.vals, "yaxis.ticktext": t.text, "yaxis.tickfont.size": font });
      }
    }
  };
  // The title and the subtitle in lines no wider than the chart (the title also clear of the toolbar at
  // its top right, which a touch screen keeps shown), each at a word's end; the margin above grows with them.
  // Plotly's line break, spelled without "<": Streamlit's sanitizer (DOMPurify) drops a whole script whose
  // text holds "<" before a letter or "/", as it drops markup hidden in text
  const BREAK = "\u003cbr>";
  const TOOLBAR = 110;  // px: Plotly's mode bar and Streamlit's element toolbar
  const wrapped = (element, text, room) => {
    if (!element || !text || text.includes(BREAK)) return null;
    const width = element.getBBox().width;
    if (!room || width <= room) return null;
    const perLine = Math.max(10, Math.floor(text.length * room / width));
    const lines = [];
    for (const word of text.split(" ")) {
      const last = lines.length - 1;
      if (last >= 0 && (lines[last] + " " + word).length <= perLine) lines[last] += " " + word;
      else lines.push(word);
    }
    return lines.length > 1 ? lines : null;
  };
  const wrapTitles = (chart, update) => {
    const title = chart.layout.title || {}, room = chart.clientWidth - 16;
    let more = 0;
    const main = wrapped(chart.querySelector(".gtitle"), typeof title === "string" ? title : title.text, room - TOOLBAR);
    if (main && typeof title !== "string") {
      update["title.text"] = main.join(BREAK);
      // a title centred in the margin (Plotly's y "auto") grows both ways: twice its new lines keep it as
      // clear of the plot as before (one pinned to the top edge grows down only)
      const centred = title.y === undefined || title.y === "auto";
      more += (main.length - 1) * TITLE_LINE * (centred ? 2 : 1);
    }
    const sub = wrapped(chart.querySelector(".gtitle-subtitle"), title.subtitle && title.subtitle.text, room);
    if (sub) {
      update["title.subtitle.text"] = sub.join(BREAK);
      more += (sub.length - 1) * SUBTITLE_LINE;
    }
    if (!more) return;
    update["margin.t"] = ((chart.layout.margin || {}).t || 0) + more;
    if (chart.layout.height) update.height = chart.layout.height + more;
  };
  const adapt = chart => {
    const width = chart.clientWidth;
    if (!width || !window.Plotly || !chart.data || !chart.layout) return;
    const done = `${width}×${window.innerWidth}`;
    if (chart.__attentionVizFitted === chart.data && chart.__attentionVizFittedAt === done) return;
    chart.__attentionVizFitted = chart.data;  // this figure is done; a new one from the server is adapted again
    chart.__attentionVizFittedAt = done;
    const heatmaps = chart.data.map((trace, i) => [trace, i]).filter(([t]) => t.type === "heatmap");
    const phone = heatmaps.length === 1 && window.innerWidth < PHONE && heatmaps[0][0].showscale !== false;
    if (phone && chart.__attentionVizPhone !== chart.data) {
      chart.__attentionVizPhone = chart.data;
      // the matrix first takes the room, then its labels and titles are fitted to the width it has then
      Promise.all([
        window.Plotly.restyle(chart, { "colorbar.thickness": 8, "colorbar.title.text": "", "colorbar.tickfont.size": 9,
                                       "colorbar.xpad": 4 }, [heatmaps[0][1]]),
        window.Plotly.relayout(chart, { "margin.r": 8, "yaxis.title.text": "" }),
      ]).then(() => { chart.__attentionVizFittedAt = null; adapt(chart); });
      return;
    }
    const update = {};
    wrapTitles(chart, update);
    if (heatmaps.length === 1) tokenAxes(chart, update);  // one matrix of tokens (grids of many heads label none)
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
