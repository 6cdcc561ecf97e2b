// The heads page's first paint (figures/offline.py inlines this before offline.js): one heatmap drawn
// on a canvas while plotly.js has not run yet, in the plot area, colours and values Plotly then uses.
// Token labels are drawn with fillText: user text never becomes markup.
"use strict";
const AttentionPreview = (function () {
  const FONT = '"Open Sans", verdana, arial, sans-serif'; // Plotly's default family
  const TEXT = "#2a3f5f"; // the plotly_white template's font colour
  const measurer = document.createElement("canvas").getContext("2d");

  function textWidth(texts, size) {
    measurer.font = size + "px " + FONT;
    let widest = 0;
    for (const text of texts) widest = Math.max(widest, measurer.measureText(text).width);
    return widest;
  }

  function rgb(colour) {
    return colour.match(/[\d.]+/g).slice(0, 3).map(Number);
  }

  // z → [r, g, b] as plotly.js's heatmap computes it: linear in each channel between the colour
  // scale's stops placed at zmin + stop × (zmax − zmin), clamped at both ends.
  function colourScale(colorscale, zmin, zmax) {
    const stops = colorscale.map(([at]) => zmin + at * (zmax - zmin));
    const colours = colorscale.map(([, colour]) => rgb(colour));
    const last = stops.length - 1;
    return function (v) {
      if (!(v > stops[0])) return colours[0];
      if (v >= stops[last]) return colours[last];
      let i = 1;
      while (v > stops[i]) i++;
      const t = (v - stops[i - 1]) / (stops[i] - stops[i - 1]), a = colours[i - 1], b = colours[i];
      return [a[0] * (1 - t) + b[0] * t, a[1] * (1 - t) + b[1] * t, a[2] * (1 - t) + b[2] * t];
    };
  }

  // One pixel per cell, written as Plotly writes its heatmap image (a Uint8ClampedArray rounds).
  function cells(z, colour) {
    const rows = z.length, columns = rows ? z[0].length : 0;
    const image = new ImageData(Math.max(columns, 1), Math.max(rows, 1));
    for (let q = 0; q < rows; q++) {
      for (let k = 0; k < columns; k++) {
        const c = colour(z[q][k]), at = (q * columns + k) * 4;
        image.data[at] = c[0];
        image.data[at + 1] = c[1];
        image.data[at + 2] = c[2];
        image.data[at + 3] = 255;
      }
    }
    return image;
  }

  // spec: {width, height, margin: {l, t, r, b}, z, zmin, zmax, colorscale, title, tickSize,
  //        ticks: {x: [[position, text]...], y: [...]}, xTitle, yTitle}
  function draw(canvas, spec) {
    const ratio = window.devicePixelRatio || 1;
    const { width, height, margin } = spec;
    const plot = { l: margin.l, t: margin.t, w: Math.max(1, width - margin.l - margin.r), // a narrow frame
      h: Math.max(1, height - margin.t - margin.b) };
    canvas.width = Math.round(width * ratio);
    canvas.height = Math.round(height * ratio);
    canvas.style.width = width + "px";
    canvas.style.height = height + "px";
    const ctx = canvas.getContext("2d");
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.clearRect(0, 0, width, height);

    const colour = colourScale(spec.colorscale, spec.zmin, spec.zmax);
    const source = document.createElement("canvas");
    const image = cells(spec.z, colour);
    source.width = image.width;
    source.height = image.height;
    source.getContext("2d").putImageData(image, 0, 0);
    canvas.cells = image; // what was drawn, one pixel per cell (tests read it)
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(source, plot.l, plot.t, plot.w, plot.h);
    canvas.dataset.plot = [plot.l, plot.t, plot.w, plot.h].join(","); // the plot area, in CSS pixels

    const nq = spec.z.length, nk = nq ? spec.z[0].length : 0;
    const keyWidth = textWidth(spec.ticks.x.map(([, text]) => text), spec.tickSize);
    const queryWidth = textWidth(spec.ticks.y.map(([, text]) => text), spec.tickSize);
    ctx.fillStyle = TEXT;
    ctx.font = spec.tickSize + "px " + FONT;
    ctx.textBaseline = "middle";
    ctx.textAlign = "right";
    for (const [q, text] of spec.ticks.y) ctx.fillText(text, plot.l - 2, plot.t + (q + 0.5) * plot.h / nq);
    ctx.textAlign = "left";
    for (const [k, text] of spec.ticks.x) { // key labels read upwards at 60°, as the Plotly axis has them
      ctx.save();
      ctx.translate(plot.l + (k + 0.5) * plot.w / nk, plot.t - 7);
      ctx.rotate(-Math.PI / 3);
      ctx.fillText(text, 0, 0);
      ctx.restore();
    }
    ctx.font = "14px " + FONT;
    ctx.textAlign = "center";
    ctx.textBaseline = "bottom";
    const keyRise = keyWidth * Math.sin(Math.PI / 3) + spec.tickSize / 2;
    ctx.fillText(spec.xTitle, plot.l + plot.w / 2, plot.t - keyRise - 22);
    ctx.save();
    ctx.translate(plot.l - queryWidth - 16, plot.t + plot.h / 2);
    ctx.rotate(-Math.PI / 2);
    ctx.fillText(spec.yTitle, 0, 0);
    ctx.restore();
    ctx.font = "17px " + FONT;
    ctx.textAlign = "left";
    ctx.textBaseline = "top";
    ctx.fillText(spec.title, width * 0.01, height * 0.01);

    // the colour bar where Plotly puts it (10 px right of the plot; its title above), without ticks
    const bar = { l: plot.l + plot.w + 10, t: plot.t + 31, w: 30, h: plot.h - 41 };
    if (bar.h > 0) {
      const gradient = ctx.createLinearGradient(0, bar.t + bar.h, 0, bar.t);
      for (const [at, c] of spec.colorscale) gradient.addColorStop(at, c);
      ctx.fillStyle = gradient;
      ctx.fillRect(bar.l, bar.t, bar.w, bar.h);
      ctx.fillStyle = TEXT;
      ctx.font = "14px " + FONT;
      ctx.textBaseline = "bottom";
      ctx.fillText(spec.barTitle, bar.l, bar.t - 4);
    }
  }

  return { FONT: FONT, textWidth: textWidth, colourScale: colourScale, draw: draw };
})();
