"""One head as a :class:`LongHeatmap`: pooled tiles (uint8 levels, the colour bar in weights) or,
zoomed in far enough, exact cells with token labels (the ordinary heatmap). Long inputs draw their
blockwise heatmaps with it, and the head view a captured pattern too large for float32."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.colors
import plotly.graph_objects as go

from ..analysis.long_input import LongHeatmap
from .axes import hover_text, plotly_text
from .heatmap import attention_heatmap
from .style import TEMPLATE
from .text_width import colour_bar_margin, left_margin

POOLING_WORDS = {"max": "largest", "mean": "mean"}
TRANSPARENT = "rgba(0,0,0,0)"


def blank_level_zero(name: str = "Blues") -> list:
    """The colour scale with level 0 transparent (a cell under the threshold is left blank, as the
    float heatmap leaves it) and levels 1…255 in the usual colours."""
    cut = 0.5 / 255
    return [[0.0, TRANSPARENT], [cut, TRANSPARENT],
            *[[cut + stop * (1 - cut), colour] for stop, colour in plotly.colors.get_colorscale(name)]]


def level_ticks(heatmap: LongHeatmap) -> tuple[np.ndarray, list[str]]:
    """Colour-bar ticks at levels, labelled in the values they stand for."""
    if heatmap.colours == "log":  # one tick per power of ten, from the floor to the top
        bottom, top = np.log10(heatmap.floor), np.log10(heatmap.scale)
        decades = np.arange(np.ceil(bottom), np.floor(top) + 1)
        return (decades - bottom) / (top - bottom) * 255.0, [f"1e{int(d)}" if d else "1" for d in decades]
    ticks = np.linspace(0, 255, 6)
    return ticks, [f"{v / 255 * heatmap.scale:.3g}" for v in ticks]


def level_words(heatmap: LongHeatmap, level: str = "%{z}") -> str:
    """What a hovered level means: the range of values it stands for (``level``: where the hovered
    level goes, Plotly's placeholder by default)."""
    if heatmap.colours == "log":
        return f"level {level} of 255 (log scale: 0 = {heatmap.floor:g} or less, 255 = {heatmap.scale:.3g})"
    blank = f"; 0 = below {heatmap.threshold:g}, blank" if heatmap.threshold > 0 else ""
    return f"level {level} of 255 (255 = {heatmap.scale:.4g}{blank}), i.e. ({level} ± ½) × {heatmap.scale / 255:.3g}"


def long_heatmap_figure(heatmap: LongHeatmap, labels: Sequence[str], title: str,
                        key_labels: Sequence[str] | None = None, quantity: str = "weight") -> go.Figure:
    """``labels``: every query's label (the whole input), ``key_labels`` every key's (default: the
    same); only the shown region's are sent. ``quantity`` names what a cell holds."""
    key_labels = labels if key_labels is None else key_labels
    rows, cols = heatmap.rows, heatmap.cols
    query_shown, key_shown = labels[rows.start : rows.stop], key_labels[cols.start : cols.stop]
    log = heatmap.colours == "log"
    if heatmap.is_exact:
        floor = float(np.log10(heatmap.floor))
        z = np.log10(np.maximum(heatmap.exact, heatmap.floor)).astype(np.float32) if log else heatmap.exact
        name = f"log10 {quantity}" if log else quantity
        top = max(0.0, float(np.log10(max(heatmap.scale, heatmap.floor))))  # weights: 1; norms may pass it
        return attention_heatmap(z, query_shown, key_shown, title=title, starts=(rows.start, cols.start),
                                 colorbar_title=name, zrange=(floor, top) if log else None,
                                 threshold=0.0 if log else heatmap.threshold,
                                 hover=f"query %{{y}}<br>key %{{x}}<br>{name} %{{z:.4f}}<extra></extra>")
    tr, tc = heatmap.tile_rows, heatmap.tile_cols
    what = f"{POOLING_WORDS[heatmap.pooling]} {quantity}" if tr * tc > 1 else quantity
    colorscale = blank_level_zero() if heatmap.threshold > 0 and not log else "Blues"
    ticks = level_ticks(heatmap)
    if tr == tc == 1:  # one level per query–key pair: token axes and labels, as the float heatmap
        return attention_heatmap(heatmap.codes, query_shown, key_shown, title=title, starts=(rows.start, cols.start),
                                 colorbar_title=what, zrange=(0, 255), colorscale=colorscale, colorbar_ticks=ticks,
                                 hover=f"query %{{y}}<br>key %{{x}}<br>{what}: {level_words(heatmap)}<extra></extra>")
    figure = go.Figure(
        go.Heatmap(
            z=heatmap.codes,  # uint8: a quarter of float32 on the wire
            x=heatmap.col_starts, y=heatmap.row_starts, zmin=0, zmax=255, colorscale=colorscale,
            colorbar=dict(title=dict(text=what), tickvals=ticks[0], ticktext=ticks[1]),
            hovertemplate=(
                f"{hover_text(title)}<br>queries %{{y}}…+{tr - 1}, keys %{{x}}…+{tc - 1}<br>{what}: "
                f"{level_words(heatmap)}<extra></extra>"
            ),
        )
    )
    figure.update_layout(
        title=dict(text=plotly_text(title), yref="container", y=0.99, yanchor="top", x=0.01, xanchor="left"),
        xaxis=dict(title=f"key position (tiles of {tc})", side="top", showgrid=False),
        yaxis=dict(title=f"query position (tiles of {tr})", autorange="reversed", showgrid=False),
        height=800, margin=dict(l=left_margin([f"{rows.stop:,}"], 12), r=colour_bar_margin(what), t=110, b=20),
        template=TEMPLATE,
    )
    return figure
