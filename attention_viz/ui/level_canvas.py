"""Our own heatmap element for uint8 levels (figures/level_canvas.py builds its bytes,
level_canvas.js draws them): what the head views draw past 256 × 256 cells instead of a Plotly
figure. A box dragged on it sets the view's query and key ranges, which the page then computes
afresh (finer tiles, down to exact cells)."""

from __future__ import annotations

from collections.abc import MutableMapping, Sequence
from pathlib import Path
from typing import Any

import streamlit as st

from ..analysis.long_input import LongHeatmap
from ..figures.level_canvas import level_canvas_payload
from ..figures.long_heatmap import long_heatmap_figure
from . import cache
from .export import chart, saved_as

CSS = """
.avlc { font-size: 12px; }
.avlc [hidden] { display: none !important; }
.avlc-tools { display: flex; gap: 8px; align-items: center; justify-content: flex-end; min-height: 30px; }
.avlc-hint { color: #666; margin-right: auto; }
.avlc-axes { position: absolute; left: 0; top: 0; overflow: visible; }
.avlc-axes text { fill: currentColor; }  /* the page's text colour, light or dark theme */
.avlc-axes .avlc-subtitle { opacity: 0.7; }  /* a saved SVG, without this style, keeps its own grey */
.avlc-cells, .avlc-scale { position: absolute; image-rendering: pixelated; }
.avlc-cells { cursor: crosshair; touch-action: none; }
.avlc-cells:focus { outline: 2px solid #1f77b4; outline-offset: 2px; }
.avlc-cursor { position: absolute; border: 1px solid #d62728; pointer-events: none; }
.avlc-box { position: absolute; border: 1px dashed #333; background: rgba(0, 0, 0, 0.06); pointer-events: none; }
.avlc-hover { position: absolute; z-index: 2; pointer-events: none; white-space: nowrap; background: #fff; color: #222;
              border: 1px solid #bbb; border-radius: 4px; padding: 4px 8px; box-shadow: 0 1px 4px rgba(0, 0, 0, 0.2); }
.avlc button { font: inherit; color: inherit; padding: 2px 10px; border: 1px solid #ccc; border-radius: 6px;
               background: transparent; cursor: pointer; }
"""
# In the page's own DOM (not a shadow root): it takes the page's font, and tests find its parts by class.
SCRIPT = Path(__file__).with_name("level_canvas.js").read_text(encoding="utf-8")
ELEMENT = st.components.v2.component("attention_viz.level_canvas", js=SCRIPT, css=CSS, isolate_styles=False)


def zoom_to(state: MutableMapping[str, Any], element: str, ranges: tuple[str, str, str, str]) -> None:
    """The element's last box (first and last query and key) into the view's range widgets
    (``ranges``), in session ``state``, before the widgets are drawn."""
    box = (state[element] if element in state else {}).get("zoom")
    if isinstance(box, dict):
        for name, value in zip(ranges, (box.get("q0"), box.get("q1"), box.get("k0"), box.get("k1"))):
            if isinstance(value, int):
                state[name] = value


def level_canvas(heatmap: LongHeatmap, labels: Sequence[str], title: str, key: str, *,
                 key_labels: Sequence[str] | None = None, quantity: str = "weight",
                 ranges: tuple[str, str, str, str] | None = None) -> None:
    """Draw ``heatmap`` (levels, not exact cells) as the figure ``key`` (its saved file's name; the
    element's own key is ``key``_levels). ``ranges``: the session keys of the view's first and last
    query and key (its range widgets, which a dragged box sets); None: no zoom."""
    payload = level_canvas_payload(heatmap, labels, title, key_labels, quantity, zoomable=ranges is not None,
                                   **saved_as(key))
    element = f"{key}_levels"
    callbacks = {} if ranges is None else {"on_zoom_change": lambda: zoom_to(st.session_state, element, ranges)}
    ELEMENT(key=element, data=payload, **callbacks)


def long_heatmap_chart(heatmap: LongHeatmap, labels: Sequence[str], title: str, key: str, *,
                       key_labels: Sequence[str] | None = None, quantity: str = "weight",
                       ranges: tuple[str, str, str, str] | None = None) -> None:
    """A :class:`LongHeatmap` wherever a view draws one, as the figure ``key``: levels on
    :func:`level_canvas`, exact cells as a Plotly heatmap, whose hover gives each value."""
    if heatmap.is_exact:
        figure = cache.figure(long_heatmap_figure, heatmap, labels, title, key_labels, quantity)
        chart(st, figure, key=key, config={"displaylogo": False})
    else:
        level_canvas(heatmap, labels, title, key, key_labels=key_labels, quantity=quantity, ranges=ranges)
