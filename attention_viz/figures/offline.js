// The heads view of attention-viz (figures/offline.py writes the data and inlines this file after
// offline_preview.js, both inside one function of `prefix`, the start of every element id it reads).
// Reads the JSON in #attention-data, inflates one layer's 8-bit codes when it is first shown and draws
// one heatmap. First paint: the canvas preview of the opening head; then plotly.js — in a standalone
// page its inert text (#plotly-js) is executed (seconds of main-thread time in a fresh browser, which is
// why it waits); in a notebook output (a prefix) the copy the notebook's page holds, awaited
// (figures/notebook.py) — and the interactive Plotly heatmap takes the canvas's place, in the same plot
// area. The controls stay disabled until then: while plotly.js executes the page could not answer them.
// User text (model name, token labels) only ever reaches the page through textContent, fillText or
// Plotly's escaped labels, never through innerHTML.
"use strict";
(function () {
  const byId = (name) => document.getElementById(prefix + name);
  // what a test or benchmark reads: a notebook output marks its own element, a standalone page its body
  const root = prefix ? byId("heads") : document.body;
  const payload = JSON.parse(byId("attention-data").textContent);
  const chart = byId("chart");
  const pick = {
    attention: byId("attention"),
    layer: byId("layer"),
    head: byId("head"),
  };
  const readout = byId("readout");
  const preview = byId("preview");
  const stage = byId("stage");
  const status = byId("status");
  const reductionNote = byId("reduction-note");
  const layers = new Map(); // "attention:layer" → Promise of {codes: Uint8Array, scales: Float32Array}
  let shown = null; // {attention, layer, head, z} of the heatmap on screen
  let cell = null; // [query, key] last under the cursor
  let drawing = Promise.resolve();
  let interactive = false; // plotly.js executed and the first Plotly heatmap drawn

  function bytesOf(base64) {
    if (Uint8Array.fromBase64) return Uint8Array.fromBase64(base64);
    const text = atob(base64);
    const bytes = new Uint8Array(text.length);
    for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
    return bytes;
  }

  async function inflate(bytes) {
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate"));
    return new Uint8Array(await new Response(stream).arrayBuffer());
  }

  function layerData(a, layer) {
    const id = a + ":" + layer;
    if (!layers.has(id)) {
      const blob = payload.attentions[a].data[layer];
      const scaleBytes = bytesOf(blob.scales);
      layers.set(id, inflate(bytesOf(blob.codes)).then((codes) => ({
        codes: codes,
        scales: new Float32Array(scaleBytes.buffer, scaleBytes.byteOffset, scaleBytes.byteLength / 4),
      })));
    }
    return layers.get(id);
  }

  // One head, or the mean / max over heads, as rows of float64: weight = code × scale / 255.
  function matrix(att, data, head) {
    const nq = att.queries.length, nk = att.keys.length, size = nq * nk;
    const heads = head === "mean" || head === "max" ? [...Array(att.heads).keys()] : [Number(head)];
    const rows = [];
    for (let q = 0; q < nq; q++) {
      const row = new Float64Array(nk);
      for (const h of heads) {
        const scale = data.scales[h * nq + q];
        const offset = h * size + q * nk;
        for (let k = 0; k < nk; k++) {
          const w = data.codes[offset + k] * scale / 255;
          if (head === "max") row[k] = Math.max(row[k], w);
          else row[k] += w;
        }
      }
      if (head === "mean") for (let k = 0; k < nk; k++) row[k] /= heads.length;
      rows.push(row);
    }
    return rows;
  }

  function peak(rows) {
    let top = 0;
    for (const row of rows) for (const w of row) if (w > top) top = w;
    return top > 0 ? top : 1;
  }

  function headName(head) {
    return head === "mean" || head === "max" ? head + " of heads" : "head " + head;
  }

  function fill(select, values, label) {
    select.replaceChildren(...values.map((value) => {
      const option = document.createElement("option");
      option.value = String(value);
      option.textContent = label(value);
      return option;
    }));
  }

  // Fill the layer and head lists of attention `att`, keeping the layer and head where they exist.
  function choose(att, layer, head) {
    const a = payload.attentions[att];
    fill(pick.layer, [...Array(a.layers).keys()], String);
    fill(pick.head, [...Array(a.heads).keys(), "mean", "max"], String);
    pick.attention.value = String(att);
    pick.layer.value = String(Math.min(Number(layer) || 0, a.layers - 1));
    pick.head.value = head === "mean" || head === "max" || Number(head) < a.heads ? String(head) : "0";
  }

  // Fixed margins (Plotly's own margin growth turned off) from the measured tick labels, so the
  // canvas preview and the Plotly heatmap share one plot area: no jump when one replaces the other.
  function frame(att) {
    const ticks = att.figure.ticks, size = att.figure.layout.xaxis.tickfont.size;
    const keyWidth = AttentionPreview.textWidth(ticks.x.map(([, text]) => text), size);
    const queryWidth = AttentionPreview.textWidth(ticks.y.map(([, text]) => text), size);
    const keyRise = keyWidth * Math.sin(Math.PI / 3) + size / 2; // labels turned 60°
    return {
      width: Math.round(chart.getBoundingClientRect().width),
      height: att.figure.layout.height,
      margin: {
        l: Math.ceil(10 + 20 + 12 + queryWidth + 4), // edge, axis title, gap, labels, pad
        t: Math.ceil(36 + 20 + 12 + keyRise + 4), // figure title, axis title, gap, labels, pad
        r: Math.ceil(Math.max(110, keyWidth / 2 + size)), // colour bar; the last key labels lean right
        b: 10,
      },
    };
  }

  function title(att, layer, head) {
    return att.name + ": layer " + layer + ", " + headName(head);
  }

  function paintPreview(a, layer, head, z) {
    const att = payload.attentions[a], place = frame(att);
    stage.style.minHeight = place.height + "px";
    AttentionPreview.draw(preview, Object.assign(place, {
      z: z, zmin: att.figure.trace.zmin, zmax: peak(z), colorscale: att.figure.trace.colorscale,
      title: title(att, layer, head), tickSize: att.figure.layout.xaxis.tickfont.size, ticks: att.figure.ticks,
      xTitle: att.figure.layout.xaxis.title.text, yTitle: att.figure.layout.yaxis.title.text,
      barTitle: att.figure.trace.colorbar.title.text,
    }));
    preview.hidden = false;
    preview.dataset.drawn = [att.key, layer, head].join(":");
  }

  async function draw() {
    const a = Number(pick.attention.value);
    const layer = Number(pick.layer.value);
    const head = pick.head.value;
    const att = payload.attentions[a];
    const z = matrix(att, await layerData(a, layer), head);
    reductionNote.textContent = head === "max"
      ? "Max over heads: each cell is its strongest head, so rows no longer sum to 1." : "";
    if (shown && shown.attention === a) {
      await Plotly.update(chart, { z: [z], zmax: [peak(z)] }, { "title.text": title(att, layer, head) });
    } else {
      const trace = Object.assign({}, att.figure.trace, { z: z, zmax: peak(z) });
      trace.colorbar = Object.assign({}, trace.colorbar, { x: 1, xanchor: "left", xpad: 10 });
      const layout = JSON.parse(JSON.stringify(att.figure.layout));
      layout.title.text = title(att, layer, head);
      layout.margin = Object.assign(frame(att).margin, { autoexpand: false });
      layout.xaxis.automargin = false;
      layout.yaxis.automargin = false;
      await Plotly.react(chart, [trace], layout, { displaylogo: false, responsive: true });
    }
    shown = { attention: a, layer: layer, head: head, z: z };
    if (!interactive) handOver();
    describe();
    root.dataset.drawn = [att.key, layer, head].join(":");
  }

  // The first Plotly heatmap is on screen: it replaces the canvas, and the controls come alive.
  function handOver() {
    interactive = true;
    preview.hidden = true;
    stage.style.minHeight = "";
    status.hidden = true;
    for (const select of Object.values(pick)) select.disabled = false;
    chart.on("plotly_hover", hovered);
  }

  function frames(n) {
    return new Promise((done) => {
      const next = (left) => (left ? requestAnimationFrame(() => next(left - 1)) : done());
      next(n);
    });
  }

  // plotly.js: a notebook output waits for the notebook page's copy (it may come in a later output); a
  // standalone page keeps it as inert text so that parsing the page does not run it, executed now.
  async function loadPlotly() {
    if (prefix) {
      if (!window.Plotly) await new Promise((ready) => window.addEventListener(PLOTLY_READY, ready, { once: true }));
      return;
    }
    if (document.readyState === "loading") { // the text comes after this script
      await new Promise((parsed) => document.addEventListener("DOMContentLoaded", parsed, { once: true }));
    }
    const source = byId("plotly-js");
    const script = document.createElement("script");
    script.textContent = source.textContent;
    source.remove(); // 4.8 MB of text the page no longer needs
    document.head.appendChild(script); // runs synchronously
  }

  // Draws run one after another, so a fast series of choices never interleaves two redraws.
  function redraw() {
    drawing = drawing.then(draw, draw);
    root.attentionViz.drawn = drawing;
    return drawing;
  }

  // The readout names the cell under the cursor; it follows a head switch made while hovering.
  function describe() {
    if (!shown || !cell) return;
    const att = payload.attentions[shown.attention];
    const [q, k] = cell;
    if (q >= att.queries.length || k >= att.keys.length) return;
    readout.textContent = "query " + q + " \u201c" + att.queries[q] + "\u201d \u2192 key " + k + " \u201c" +
      att.keys[k] + "\u201d: " + shown.z[q][k].toFixed(6);
  }

  function hovered(event) {
    const point = event.points && event.points[0];
    if (!point || !point.pointIndex) return;
    cell = point.pointIndex;
    describe();
  }

  function step(select, delta) {
    const next = select.selectedIndex + delta;
    if (next < 0 || next >= select.options.length) return;
    select.selectedIndex = next;
    redraw();
  }

  byId("heading").textContent = payload.model;
  fill(pick.attention, payload.attentions.map((_, i) => i), (i) => payload.attentions[i].name);
  byId("attention-label").hidden = payload.attentions.length < 2;
  choose(payload.start.attention, payload.start.layer, payload.start.head);
  pick.attention.addEventListener("change", () => {
    choose(Number(pick.attention.value), pick.layer.value, pick.head.value);
    redraw();
  });
  pick.layer.addEventListener("change", redraw);
  pick.head.addEventListener("change", redraw);
  root.addEventListener("keydown", (event) => {
    if (!interactive || event.target instanceof HTMLSelectElement) return; // a select handles its own arrows
    const moves = { ArrowLeft: [pick.head, -1], ArrowRight: [pick.head, 1], ArrowUp: [pick.layer, -1],
      ArrowDown: [pick.layer, 1] };
    if (!(event.key in moves)) return;
    event.preventDefault();
    step(...moves[event.key]);
  });
  root.attentionViz = { payload: payload, redraw: redraw, shown: () => shown };

  // Preview painted (two frames later it is on screen), then plotly.js, then the interactive heatmap;
  // each step leaves a performance mark (benchmarks/offline.py reads them).
  async function open() {
    const a = Number(pick.attention.value), layer = Number(pick.layer.value), head = pick.head.value;
    paintPreview(a, layer, head, matrix(payload.attentions[a], await layerData(a, layer), head));
    await frames(2);
    performance.mark("attention-viz:preview");
    root.dataset.preview = preview.dataset.drawn;
    await new Promise((next) => setTimeout(next)); // let observers of the mark run before the long task
    await loadPlotly();
    if (typeof Plotly === "undefined") { // its error went to the console; the preview stays
      status.textContent = "the interactive view failed to load; this is a still picture of the first head";
      return;
    }
    performance.mark("attention-viz:plotly");
    await redraw();
    await frames(2);
    performance.mark("attention-viz:interactive");
  }
  open();
})();
