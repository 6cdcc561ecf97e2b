"""Pages that work from disk with no server and no network: plotly.js inlined once.

* :func:`heads_html` — one page with every layer and head of a result, switchable in the page itself:
  attention (encoder self / decoder self / cross), layer, head or the mean / max over heads, and a
  readout of the cell under the cursor (positions, both tokens, the stored weight).
* :func:`figures_html` — a few ordinary figures (and notes) on one page.

How the heads page stores the weights (also said in the page): every attention row is quantized to
8 bits with its own float32 scale, the row's largest weight, so ``weight = code × scale / 255``. A
stored weight is within ``scale / 510`` of the captured one, the row's largest weight and exact zeros
(the causal mask) stay exact, and a diffuse row of a 512-token input keeps its resolution (a scale per
head would round it to 0 or 1/255 of the head's peak). The codes of one layer are zlib-compressed and
base64-encoded; the page inflates a layer only when it is first shown (``DecompressionStream``), so
the first heatmap does not wait for the others.

How the heads page draws fast: executing plotly.js (4.8 MB) costs a fresh browser seconds of main-thread
time, during which nothing paints. So the heads page keeps plotly.js as inert text
(``<script type="text/plain">``), paints the first heatmap with a small canvas renderer of its own
(offline_preview.js: the same stored values, colour scale and plot area), and only then executes
plotly.js; the interactive heatmap then takes the canvas's place. The figures page loads plotly.js
first, as its figures' own scripts call it as they load.

The heads view's elements (:func:`heads_body`) and script (:func:`heads_script`) also make a notebook
output (figures/notebook.py): there every element id starts with the output's own prefix, and plotly.js
is the copy the notebook's page holds.
"""

from __future__ import annotations

import base64
import html
import json
import zlib
from collections.abc import Sequence
from functools import cache
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

from ..core.names import GROUPS, Group
from ..core.result import AttentionResult
from ..analysis.selection import GROUP_NAMES, group_tokens
from .axes import shorten
from .export import CONFIG
from .heatmap import attention_heatmap

ENCODING = (
    "uint8 codes, one float32 scale per attention row (the row's largest weight): "
    "weight = code × scale / 255; each layer's codes zlib-compressed, then base64"
)
ATTENTION_KEYS = {GROUPS[0]: "encoder", GROUPS[1]: "decoder", GROUPS[2]: "cross"}  # the CLI's --attention names
HOVER = "query %{y}<br>key %{x}<br>weight %{z:.6f}<extra></extra>"  # 6 decimals: the stored value
_SCRIPTS = [Path(__file__).with_name(name) for name in ("offline_preview.js", "offline.js")]  # preview first
PLOTLY_READY = "attention-viz:plotly"  # the event a notebook's plotly.js fires on window once it is defined


def quantize(patterns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``[..., query, key]`` weights → (uint8 codes of the same shape, float32 scales ``[..., query]``)."""
    weights = np.asarray(patterns, dtype=np.float32)
    if not np.isfinite(weights).all() or (weights < 0).any():
        raise ValueError("attention weights must be finite and non-negative")
    scales = weights.max(axis=-1)
    safe = np.where(scales > 0, scales, 1.0)[..., None]
    codes = np.rint(weights / safe * 255.0)
    return np.clip(codes, 0, 255).astype(np.uint8), scales.astype(np.float32)


def dequantize(codes: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """The weights the page shows, computed as the page computes them (float64, code × scale / 255)."""
    return codes.astype(np.float64) * scales.astype(np.float64)[..., None] / 255.0


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _layer_blob(layer_patterns: np.ndarray) -> dict[str, str]:
    codes, scales = quantize(layer_patterns)  # [heads, q, k], [heads, q]
    return {
        "codes": _b64(zlib.compress(np.ascontiguousarray(codes).tobytes(), 6)),
        "scales": _b64(scales.astype("<f4").tobytes()),
    }


def _figure_template(query_labels: list[str], key_labels: list[str]) -> dict:
    """Layout and trace of the project's heatmap (token axes, hover), without values: the page fills z.
    ``ticks`` = the labelled positions of each axis with their plain text, for the canvas preview."""
    blank = np.zeros((len(query_labels), len(key_labels)), dtype=np.float32)
    figure = attention_heatmap(blank, query_labels, key_labels, title=" ", hover=HOVER).to_plotly_json()
    trace = figure["data"][0]
    trace.pop("z", None)
    layout = figure["layout"]
    ticks = {}
    for axis, labels in (("x", key_labels), ("y", query_labels)):
        position = {value: i for i, value in enumerate(layout[axis + "axis"]["categoryarray"])}
        ticks[axis] = [[position[value], shorten(labels[position[value]])] for value in layout[axis + "axis"]["tickvals"]]
    return {"trace": trace, "layout": layout, "ticks": ticks}


def _attention_payload(result: AttentionResult, group: Group) -> dict:
    stack = result.stack("pattern", *group)  # [layers, heads, q, k]
    query_tokens, key_tokens = group_tokens(result, group)
    queries, keys = list(query_tokens.labels), list(key_tokens.labels)
    return {
        "key": ATTENTION_KEYS[group],
        "name": GROUP_NAMES[group],
        "layers": int(stack.shape[0]),
        "heads": int(stack.shape[1]),
        "queries": queries,
        "keys": keys,
        "figure": _figure_template(queries, keys),
        "data": [_layer_blob(stack[layer]) for layer in range(stack.shape[0])],
    }


def heads_payload(result: AttentionResult, start: tuple[Group, int, int | str] | None = None) -> dict:
    """Everything the heads page reads, as JSON-ready data (one entry per attention of the result);
    ``start`` = (attention, layer, head) shown first (default: the first attention, layer 0, head 0)."""
    attentions = result.attentions()
    if not attentions:
        raise ValueError("the result holds no attention pattern")
    group, layer, head = start or (attentions[0], 0, 0)
    return {
        "model": result.model,
        "encoding": ENCODING,
        "start": {"attention": attentions.index(group), "layer": int(layer), "head": str(head)},
        "attentions": [_attention_payload(result, group) for group in attentions],
    }


def script_json(data: object) -> str:
    """JSON that is safe inside ``<script>``: no ``</script>``, ``<!--`` or ``]]>`` can close or bend it."""
    return script_safe(json.dumps(data, ensure_ascii=False, separators=(",", ":")))


def script_safe(json_text: str) -> str:
    """JSON text made safe inside ``<script>`` (see :func:`script_json`): the characters escaped can
    only stand inside its strings, where the escape means the same character."""
    return (json_text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


@cache
def plotly_js() -> str:
    return get_plotlyjs()


def page_html(title: str, body: str, tail_script: str = "", deferred_plotly: bool = False) -> str:
    """A complete page: plotly.js in the head (figures' own scripts call it as they load), then ``body``.
    ``deferred_plotly``: plotly.js is kept as inert text (``#plotly-js``, after ``tail_script``, so that
    script starts before the parser reads 4.8 MB more) for the tail script to execute when it chooses."""
    tail = f"<script>{tail_script}</script>\n" if tail_script else ""
    if deferred_plotly:
        head, tail = "", f"{tail}<script type=\"text/plain\" id=\"plotly-js\">{plotly_js()}</script>\n"
    else:
        head = f"<script>{plotly_js()}</script>\n"
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{html.escape(title)}</title>\n<style>{style()}</style>\n{head}</head>\n"
        f"<body>\n{body}\n{tail}</body></html>\n"
    )


def style(root: str = "body", prefix: str = "") -> str:
    """The pages' CSS for the element ``root`` (a selector) whose element ids start with ``prefix``:
    a standalone page's body, or one notebook output among others (figures/notebook.py)."""
    return (
        f"{root} [hidden]{{display:none!important}}"
        f"{root}{{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:12px;color:#222}}"
        f"#{prefix}controls{{display:flex;flex-wrap:wrap;gap:14px;align-items:center;margin:6px 0}}"
        f"#{prefix}controls label{{display:flex;gap:6px;align-items:center}}"
        f"#{prefix}readout{{font-family:ui-monospace,monospace;min-height:1.4em;margin:4px 0;white-space:pre-wrap}}"
        f"{root} .note{{color:#555;font-size:.9em;margin:4px 0}}"
        f"#{prefix}stage{{position:relative}}"
        f"#{prefix}preview{{position:absolute;left:0;top:0}}"
    )


def heads_html(result: AttentionResult, start: tuple[Group, int, int | str] | None = None,
               title: str | None = None) -> str:
    """One self-contained page with every layer and head of ``result`` (see the module docstring),
    opened on ``start`` = (attention, layer, head)."""
    title = title or f"attention-viz: {result.model}, every head"
    return page_html(title, heads_body(result, start), heads_script(), deferred_plotly=True)


def heads_body(result: AttentionResult, start: tuple[Group, int, int | str] | None = None, prefix: str = "") -> str:
    """The heads view's elements and data, every element id starting with ``prefix``."""
    p = prefix
    return (
        f"<h3 id=\"{p}heading\"></h3>\n"
        f"<div id=\"{p}controls\">"
        f"<label id=\"{p}attention-label\">attention <select id=\"{p}attention\" disabled></select></label>"
        f"<label>layer <select id=\"{p}layer\" disabled></select></label>"
        f"<label>head <select id=\"{p}head\" disabled></select></label>"
        "<span class=\"note\">keys: ←/→ head, ↑/↓ layer</span>"
        f"<span class=\"note\" id=\"{p}status\">interactive view loading…</span></div>\n"
        f"<div id=\"{p}readout\">hover a cell: query, key and the stored weight</div>\n"
        f"<div id=\"{p}stage\"><canvas id=\"{p}preview\" hidden></canvas><div id=\"{p}chart\"></div></div>\n"
        f"<p class=\"note\" id=\"{p}reduction-note\"></p>\n"
        f"<p class=\"note\" id=\"{p}encoding\">How the weights are stored: {html.escape(ENCODING)}. A stored weight "
        "is within scale / 510 of the captured one; each row's largest weight and exact zeros are exact.</p>\n"
        f"<script type=\"application/json\" id=\"{p}attention-data\">{script_json(heads_payload(result, start))}</script>"
    )


def heads_script(prefix: str = "") -> str:
    """The heads view's script for the elements of :func:`heads_body` made with ``prefix``; its names
    stay inside one function, so two outputs on one page never clash."""
    code = "\n".join(path.read_text(encoding="utf-8") for path in _SCRIPTS)
    return f"(function (prefix, PLOTLY_READY) {{\n{code}\n}})({json.dumps(prefix)}, {json.dumps(PLOTLY_READY)});"


def figures_html(figures: Sequence[go.Figure], notes: Sequence[str] = (), title: str = "attention-viz",
                 extra_html: Sequence[str] = (), heading: str = "") -> str:
    """Several figures on one page with plotly.js inlined once; ``heading`` and ``notes`` are plain
    text (escaped), ``extra_html`` is markup built by this package (e.g. :func:`.focus.highlighted_text`)."""
    parts = [f"<h3>{html.escape(heading)}</h3>"] if heading else []
    parts += [f"<p class=\"note\">{html.escape(note)}</p>" for note in notes]
    for figure in figures:
        parts.append(figure.to_html(include_plotlyjs=False, full_html=False, config=CONFIG))
    parts.extend(extra_html)
    return page_html(title, "\n".join(parts))
