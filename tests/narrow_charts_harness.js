// Runs ui/narrow_charts.js against one stub chart (no browser): prints the relayout it asks for.
// argv: script path, then a JSON object {width, window, keys, rows, plot: [w, h], title, subtitle, label}
const fs = require("fs");
const [script, given] = [process.argv[2], JSON.parse(process.argv[3])];
const cats = n => Array.from({ length: n }, (_, i) => `${i}: t${i}`);
const keys = cats(given.keys), rows = cats(given.rows);
const updates = [];
const chart = {
  clientWidth: given.width,
  data: [{ type: "heatmap" }],
  layout: {
    title: { text: "layer 3, head 1", subtitle: { text: given.subtitle_text } },
    margin: { t: 153 }, height: 486,
    xaxis: { categoryarray: keys, tickvals: keys, ticktext: keys, tickfont: { size: 12 }, tickangle: -60, side: "top" },
    yaxis: { categoryarray: rows, tickvals: rows, ticktext: rows, tickfont: { size: 12 } },
  },
  _fullLayout: { _size: { w: given.plot[0], h: given.plot[1] } },
  querySelectorAll: () => [{ getBBox: () => ({ width: given.label || 0 }) }],  // the widest tick label drawn
  querySelector: s => ({ ".gtitle": { getBBox: () => ({ width: given.title }) },
                         ".gtitle-subtitle": { getBBox: () => ({ width: given.subtitle }) } })[s] || null,
};
global.window = { innerWidth: given.window, addEventListener() {},
                  Plotly: { relayout: (c, u) => updates.push(u), restyle() {} } };
global.document = { querySelectorAll: () => [chart], body: {} };
global.MutationObserver = class { observe() {} };
eval(fs.readFileSync(script, "utf8"));
console.log(JSON.stringify(updates));
