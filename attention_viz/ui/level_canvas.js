// The levels heatmap (ui/level_canvas.py): one head's uint8 levels drawn onto a canvas, with the
// token axes, title and colour bar in SVG around it; hover names the cell, a dragged box zooms in
// (the page computes that region afresh), the save button writes PNG at 3× or SVG.
// The bytes are figures/level_canvas.py's. Every text from the page is set as textContent.

const SVG_NS = "http://www.w3.org/2000/svg";
const ANGLE = 60; // token labels along the top turned as the Plotly heatmaps' (tickangle −60)
const PNG_SCALE = 3;
const MAX_SIDE = 760; // px: the plot's largest side, about the Plotly heatmaps'
const BAR = 14; // px: the colour bar's width
const GAP = 18; // px between the plot and the colour bar
const figures = new WeakMap(); // parent element → its figure (built once, redrawn per payload)

function read(bytes) {
  const n = new DataView(bytes.buffer, bytes.byteOffset, 4).getUint32(0, true);
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(4, 4 + n)));
  return { header, palette: bytes.slice(4 + n, 4 + n + 1024), levels: bytes.subarray(4 + n + 1024) };
}

function paint(canvas, palette, levels, width, height) {
  canvas.width = width;
  canvas.height = height;
  const image = new ImageData(width, height);
  const pixels = new Uint32Array(image.data.buffer);
  const colours = new Uint32Array(palette.buffer); // RGBA bytes read as one uint32 each, as ImageData stores them
  for (let i = 0; i < levels.length; i++) pixels[i] = colours[levels[i]];
  canvas.getContext("2d").putImageData(image, 0, 0);
}

function element(tag, cls, parent) {
  const node = tag.startsWith("svg:") ? document.createElementNS(SVG_NS, tag.slice(4)) : document.createElement(tag);
  if (cls) node.setAttribute("class", cls);
  if (parent) parent.appendChild(node);
  return node;
}

function text(parent, cls, content, x, y, attributes = {}) {
  const node = element("svg:text", cls, parent);
  node.textContent = content;
  node.setAttribute("x", x);
  node.setAttribute("y", y);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
  return node;
}

function build(parent) {
  const root = element("div", "avlc", parent);
  const tools = element("div", "avlc-tools", root);
  const hint = element("span", "avlc-hint", tools);
  const save = element("button", "avlc-save", tools);
  save.type = "button";
  const stage = element("div", "avlc-stage", root);
  const axes = element("svg:svg", "avlc-axes", stage);
  const cells = element("canvas", "avlc-cells", stage);
  const scale = element("canvas", "avlc-scale", stage);
  const box = element("div", "avlc-box", stage);
  const cursor = element("div", "avlc-cursor", stage);
  const hover = element("div", "avlc-hover", stage);
  hover.setAttribute("role", "tooltip");
  cells.tabIndex = 0; // the arrow keys walk the cells (step)
  const figure = { root, hint, save, stage, axes, cells, scale, box, cursor, hover, shown: null };
  wire(figure);
  return figure;
}

function measure(font) {
  const context = document.createElement("canvas").getContext("2d");
  context.font = font;
  return (words) => context.measureText(words).width;
}

// Where everything goes, in CSS pixels, from the container's width and the longest labels.
function layout(header, width, family) {
  const size = header.tick_size;
  const tickWidth = measure(`${size}px ${family}`);
  const turned = header.query_names !== null; // token labels: turned; positions: level
  const sin = Math.sin((ANGLE * Math.PI) / 180), cos = Math.cos((ANGLE * Math.PI) / 180);
  const xWidths = header.x_ticks.map(([, label]) => tickWidth(label));
  const xRoom = turned ? Math.max(0, ...xWidths) * sin + size : size + 4;
  const yRoom = Math.max(0, ...header.y_ticks.map(([, label]) => tickWidth(label)));
  const barWidth = measure(`12px ${family}`);
  const barRoom = GAP + BAR + 6 + Math.max(0, ...header.bar_ticks.map(([, label]) => barWidth(label))) + 28;
  const titleRoom = header.subtitle ? 46 : 28;
  const left = 26 + yRoom + 8;
  const top = titleRoom + 22 + xRoom + 6;
  const [rows, cols] = header.shape;
  const side = Math.max(200, Math.min(MAX_SIDE, width - left - barRoom));
  const plotWidth = side;
  const plotHeight = Math.max(120, Math.min(900, (side * rows) / cols));
  // turned labels reach right of their tick: the last ones may pass the colour bar
  const reach = turned ? Math.max(0, ...header.x_ticks.map(([at], i) => (at * plotWidth) / cols + xWidths[i] * cos)) : 0;
  return {
    size, turned, left, top, plotWidth, plotHeight, titleRoom,
    width: Math.ceil(Math.max(left + plotWidth + barRoom, left + reach + 6)),
    height: Math.ceil(top + plotHeight + 14),
  };
}

function drawAxes(figure, header, at, family) {
  const svg = figure.axes;
  svg.replaceChildren();
  svg.setAttribute("width", at.width);
  svg.setAttribute("height", at.height);
  svg.setAttribute("viewBox", `0 0 ${at.width} ${at.height}`);
  svg.setAttribute("font-family", family);
  text(svg, "avlc-title", header.title, 0, 18, { "font-size": 16 });
  if (header.subtitle) text(svg, "avlc-subtitle", header.subtitle, 0, 36, { "font-size": 11, fill: "#666" });
  const [rows, cols] = header.shape;
  const { left, top, plotWidth, plotHeight, size } = at;
  text(svg, "avlc-axis-title", header.x_title, left + plotWidth / 2, at.titleRoom + 14,
       { "font-size": 14, "text-anchor": "middle" });
  text(svg, "avlc-axis-title", header.y_title, 14, top + plotHeight / 2,
       { "font-size": 14, "text-anchor": "middle", transform: `rotate(-90 14 ${top + plotHeight / 2})` });
  for (const [where, label] of header.x_ticks) {
    const x = left + (where * plotWidth) / cols;
    const attributes = at.turned
      ? { "font-size": size, transform: `rotate(${-ANGLE} ${x} ${top - 5})` }
      : { "font-size": size, "text-anchor": "middle" };
    text(svg, "avlc-xtick", label, x, top - 5, attributes);
  }
  for (const [where, label] of header.y_ticks) {
    const y = top + (where * plotHeight) / rows;
    text(svg, "avlc-ytick", label, left - 5, y + size * 0.35, { "font-size": size, "text-anchor": "end" });
  }
  const frame = element("svg:rect", "", svg);
  for (const [name, value] of Object.entries({ x: left - 0.5, y: top - 0.5, width: plotWidth + 1, height: plotHeight + 1,
                                                 fill: "none", stroke: "#ccc" })) frame.setAttribute(name, value);
  const barX = left + plotWidth + GAP;
  for (const [level, label] of header.bar_ticks) {
    const y = top + plotHeight * (1 - level / 255);
    text(svg, "avlc-bartick", label, barX + BAR + 6, y + 4, { "font-size": 12 });
  }
  const titleX = at.width - 8;
  text(svg, "avlc-bartitle", header.bar_title, titleX, top + plotHeight / 2,
       { "font-size": 14, "text-anchor": "middle", transform: `rotate(90 ${titleX} ${top + plotHeight / 2})` });
  at.barX = barX;
}

function place(node, x, y, width, height) {
  Object.assign(node.style, { left: `${x}px`, top: `${y}px`, width: `${width}px`, height: `${height}px` });
}

function draw(figure, payload, setTriggerValue) {
  const { header, palette, levels } = payload;
  const family = getComputedStyle(figure.root).fontFamily || "sans-serif";
  const width = figure.root.parentElement.clientWidth || 900;
  const at = layout(header, width, family);
  const [rows, cols] = header.shape;
  paint(figure.cells, palette, levels, cols, rows);
  const ramp = new Uint8Array(256);
  for (let level = 0; level < 256; level++) ramp[level] = 255 - level; // top of the bar = level 255
  paint(figure.scale, palette, ramp, 1, 256);
  drawAxes(figure, header, at, family);
  place(figure.stage, 0, 0, at.width, at.height);
  figure.stage.style.position = "relative";
  place(figure.cells, at.left, at.top, at.plotWidth, at.plotHeight);
  place(figure.scale, at.barX, at.top, BAR, at.plotHeight);
  figure.save.textContent = header.format === "svg" ? "Save SVG" : "Save PNG";
  figure.hint.textContent = (header.zoomable ? "Drag a box to zoom in; double-click for the whole text. " : "")
    + "Or click the heatmap and move with the arrow keys.";
  figure.cells.setAttribute("aria-label", `${header.title}: the arrow keys move across the cells`);
  figure.cell = null;
  figure.cursor.hidden = true;
  const [r0, r1] = header.rows, [c0, c1] = header.cols;
  figure.zoomed = header.zoomable && !(r0 === 0 && c0 === 0 && r1 === header.n_queries && c1 === header.n_keys);
  Object.assign(figure, { header, levels, at, family, setTriggerValue, shown: header.id });
  figure.root.dataset.drawn = header.id;
}

// Which cell is under a pointer event, or null.
function cellAt(figure, event) {
  const rect = figure.cells.getBoundingClientRect();
  const [rows, cols] = figure.header.shape;
  const col = Math.floor(((event.clientX - rect.left) / rect.width) * cols);
  const row = Math.floor(((event.clientY - rect.top) / rect.height) * rows);
  return row >= 0 && row < rows && col >= 0 && col < cols ? { row, col } : null;
}

// The token positions a range of tiles covers (first, last), inside the region drawn.
function positions(span, first, last) {
  const [start, stop, tile] = span;
  return [start + first * tile, Math.min(start + (last + 1) * tile, stop) - 1];
}

function describe(figure, { row, col }) {
  const { header, levels } = figure;
  const level = levels[row * header.shape[1] + col];
  const lines = [header.title];
  if (header.query_names !== null) {
    lines.push(`query ${header.query_names[row]}`, `key ${header.key_names[col]}`);
  } else {
    const [q0, q1] = positions(header.rows, row, row), [k0, k1] = positions(header.cols, col, col);
    lines.push(`queries ${q0}…${q1}, keys ${k0}…${k1}`);
  }
  lines.push(header.value.replaceAll("{z}", String(level)));
  return lines;
}

function showHover(figure, event) {
  const cell = cellAt(figure, event);
  if (cell === null || figure.dragging) {
    figure.hover.hidden = true;
    return;
  }
  const stage = figure.stage.getBoundingClientRect();
  showCell(figure, cell, event.clientX - stage.left, event.clientY - stage.top);
}

// The hover box for ``cell``, beside the point (x, y) of the figure.
function showCell(figure, cell, x, y) {
  const hover = figure.hover;
  hover.replaceChildren(...describe(figure, cell).map((line) => {
    const div = document.createElement("div");
    div.textContent = line;
    return div;
  }));
  hover.hidden = false;
  hover.style.left = `${Math.min(x + 14, figure.at.width - hover.offsetWidth - 4)}px`;
  hover.style.top = `${y + 14}px`;
}

const STEPS = { ArrowLeft: [0, -1], ArrowRight: [0, 1], ArrowUp: [-1, 0], ArrowDown: [1, 0] };

// Without a pointer: the arrow keys walk a cursor over the cells, and the hover box follows it.
function step(figure, event) {
  if (event.key === "Escape") {
    figure.hover.hidden = figure.cursor.hidden = true;
    return;
  }
  const move = STEPS[event.key];
  if (!move) return;
  event.preventDefault(); // the arrows move the cursor, not the page
  const [rows, cols] = figure.header.shape;
  const at = figure.cell ?? { row: 0, col: 0 };
  const cell = figure.cursor.hidden ? at : {
    row: Math.min(rows - 1, Math.max(0, at.row + move[0] * (event.shiftKey ? 10 : 1))),
    col: Math.min(cols - 1, Math.max(0, at.col + move[1] * (event.shiftKey ? 10 : 1))),
  };
  figure.cell = cell;
  const { left, top, plotWidth, plotHeight } = figure.at;
  const width = plotWidth / cols, height = plotHeight / rows;
  const [w, h] = [Math.max(width, 7), Math.max(height, 7)]; // a cell of 1.5 px still shows a visible square
  place(figure.cursor, left + (cell.col + 0.5) * width - w / 2, top + (cell.row + 0.5) * height - h / 2, w, h);
  figure.cursor.hidden = false;
  showCell(figure, cell, left + (cell.col + 1) * width, top + (cell.row + 1) * height);
}

function wire(figure) {
  const { cells, box } = figure;
  cells.addEventListener("pointermove", (event) => {
    if (figure.dragging) {
      const stage = figure.stage.getBoundingClientRect();
      const x = event.clientX - stage.left, y = event.clientY - stage.top;
      const { x: x0, y: y0 } = figure.dragging;
      place(box, Math.min(x, x0), Math.min(y, y0), Math.abs(x - x0), Math.abs(y - y0));
      box.hidden = false;
    }
    showHover(figure, event);
  });
  cells.addEventListener("pointerleave", () => { figure.hover.hidden = true; });
  cells.addEventListener("keydown", (event) => step(figure, event));
  cells.addEventListener("blur", () => { figure.hover.hidden = figure.cursor.hidden = true; });
  cells.addEventListener("pointerdown", (event) => {
    figure.cell = cellAt(figure, event) ?? figure.cell; // the arrow keys go on from the clicked cell
    if (!figure.header.zoomable || event.button !== 0) return;
    const stage = figure.stage.getBoundingClientRect();
    figure.dragging = { x: event.clientX - stage.left, y: event.clientY - stage.top, cell: cellAt(figure, event) };
    cells.setPointerCapture(event.pointerId);
  });
  cells.addEventListener("pointerup", (event) => {
    const start = figure.dragging;
    figure.dragging = null;
    box.hidden = true;
    if (!start || start.cell === null) return;
    const stage = figure.stage.getBoundingClientRect();
    if (Math.abs(event.clientX - stage.left - start.x) < 4 || Math.abs(event.clientY - stage.top - start.y) < 4) return;
    const rect = cells.getBoundingClientRect();
    const [rows, cols] = figure.header.shape;
    const clamp = (value, n) => Math.min(n - 1, Math.max(0, value));
    const end = {
      row: clamp(Math.floor(((event.clientY - rect.top) / rect.height) * rows), rows),
      col: clamp(Math.floor(((event.clientX - rect.left) / rect.width) * cols), cols),
    };
    const [q0, q1] = positions(figure.header.rows, Math.min(start.cell.row, end.row), Math.max(start.cell.row, end.row));
    const [k0, k1] = positions(figure.header.cols, Math.min(start.cell.col, end.col), Math.max(start.cell.col, end.col));
    figure.setTriggerValue("zoom", { q0, q1, k0, k1 });
  });
  const everything = () => {
    const { n_queries, n_keys } = figure.header;
    figure.setTriggerValue("zoom", { q0: 0, q1: n_queries - 1, k0: 0, k1: n_keys - 1 });
  };
  cells.addEventListener("dblclick", () => { if (figure.zoomed) everything(); }); // the page's Whole text button too
  figure.save.addEventListener("click", () => save(figure));
  box.hidden = true;
  figure.hover.hidden = figure.cursor.hidden = true;
}

// The figure as one SVG document: the axes, with the cells and the colour bar as pixel images.
function standalone(figure) {
  const { at, header } = figure;
  const svg = figure.axes.cloneNode(true);
  svg.setAttribute("xmlns", SVG_NS);
  const background = document.createElementNS(SVG_NS, "rect");
  for (const [name, value] of Object.entries({ width: at.width, height: at.height, fill: "white" })) {
    background.setAttribute(name, value);
  }
  svg.insertBefore(background, svg.firstChild);
  for (const [canvas, x, width] of [[figure.cells, at.left, at.plotWidth], [figure.scale, at.barX, BAR]]) {
    const image = document.createElementNS(SVG_NS, "image");
    for (const [name, value] of Object.entries({ x, y: at.top, width, height: at.plotHeight, preserveAspectRatio: "none",
                                                   href: canvas.toDataURL("image/png"), style: "image-rendering:pixelated" })) {
      image.setAttribute(name, value);
    }
    svg.appendChild(image);
  }
  svg.setAttribute("data-title", header.title);
  return new XMLSerializer().serializeToString(svg);
}

function download(blob, name) {
  const link = document.createElement("a");
  link.href = URL.createObjectURL(blob);
  link.download = name;
  document.body.appendChild(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(link.href), 10_000);
}

async function save(figure) {
  const { header, at } = figure;
  const svg = new Blob([standalone(figure)], { type: "image/svg+xml" });
  if (header.format === "svg") {
    download(svg, `${header.file}.svg`);
    return;
  }
  const picture = new Image();
  picture.src = URL.createObjectURL(svg);
  await picture.decode();
  const canvas = document.createElement("canvas");
  canvas.width = at.width * PNG_SCALE;
  canvas.height = at.height * PNG_SCALE;
  const context = canvas.getContext("2d");
  context.drawImage(picture, 0, 0, canvas.width, canvas.height);
  URL.revokeObjectURL(picture.src);
  context.imageSmoothingEnabled = false; // every cell a sharp square at 3×, as on screen
  context.drawImage(figure.cells, at.left * PNG_SCALE, at.top * PNG_SCALE, at.plotWidth * PNG_SCALE, at.plotHeight * PNG_SCALE);
  canvas.toBlob((png) => download(png, `${header.file}.png`), "image/png");
}

export default function (component) {
  const { parentElement, data, setTriggerValue } = component;
  let figure = figures.get(parentElement);
  if (!figure) {
    figure = build(parentElement);
    figures.set(parentElement, figure);
    figure.observer = follow(figure);
  }
  figure.setTriggerValue = setTriggerValue;
  const payload = read(data instanceof Uint8Array ? data : new Uint8Array(data));
  if (payload.header.id !== figure.shown) draw(figure, payload, setTriggerValue);
  figure.payload = payload;
  return () => { // unmounted (another view, another figure): let go of the element and its observer
    figure.observer.disconnect();
    figure.root.remove();
    figures.delete(parentElement);
  };
}

// A narrower or wider page (the sidebar folded, the window resized) lays the figure out again.
function follow(figure) {
  let width = figure.root.parentElement.clientWidth;
  const observer = new ResizeObserver(() => {
    const now = figure.root.parentElement.clientWidth;
    if (Math.abs(now - width) < 8 || !figure.payload) return;
    width = now;
    draw(figure, figure.payload, figure.setTriggerValue);
  });
  observer.observe(figure.root.parentElement);
  return observer;
}
