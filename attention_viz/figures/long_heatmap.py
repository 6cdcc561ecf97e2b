"""One head of a long input: pooled tiles (uint8 levels, the colour bar in weights) or, zoomed in
far enough, exact cells with token labels (the ordinary heatmap)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from ..analysis.long_input import LOG_FLOOR, LongHeatmap
from .axes import hover_text, plotly_text
from .heatmap import attention_heatmap
from .style import TEMPLATE

POOLING_WORDS = {"max": "largest weight", "mean": "mean weight"}


def long_heatmap_figure(heatmap: LongHeatmap, labels: Sequence[str], title: str) -> go.Figure:
    """``labels``: every token's label (the whole input); only the shown region's are sent."""
    log = heatmap.colours == "log"
    floor = float(np.log10(LOG_FLOOR))
    if heatmap.is_exact:
        rows, cols = heatmap.rows, heatmap.cols
        z = np.log10(np.maximum(heatmap.exact, LOG_FLOOR)).astype(np.float32) if log else heatmap.exact
        name = "log10 weight" if log else "weight"
        return attention_heatmap(z, labels[rows.start : rows.stop], labels[cols.start : cols.stop], title=title,
                                 starts=(rows.start, cols.start), colorbar_title=name, zrange=(floor, 0.0) if log else None,
                                 hover=f"query %{{y}}<br>key %{{x}}<br>{name} %{{z:.4f}}<extra></extra>")
    tr, tc = heatmap.tile_rows, heatmap.tile_cols
    what = POOLING_WORDS[heatmap.pooling]
    if log:  # one tick per power of ten, from the floor to 1
        decades = np.arange(floor, 1.0)
        ticks, labels_ = (1.0 - decades / floor) * 255.0, [f"1e{int(d)}" if d else "1" for d in decades]
        level = f"level %{{z}} of 255 (log scale: 0 = {LOG_FLOOR:g} or less, 255 = 1)"
    else:
        ticks = np.linspace(0, 255, 6)
        labels_ = [f"{v / 255 * heatmap.scale:.3g}" for v in ticks]
        level = f"level %{{z}} of 255 (255 = {heatmap.scale:.4g})"
    figure = go.Figure(
        go.Heatmap(
            z=heatmap.codes,  # uint8: a quarter of float32 on the wire
            x=heatmap.col_starts, y=heatmap.row_starts, zmin=0, zmax=255, colorscale="Blues",
            colorbar=dict(title=dict(text=what), tickvals=ticks, ticktext=labels_),
            hovertemplate=(
                f"{hover_text(title)}<br>queries %{{y}}…+{tr - 1}, keys %{{x}}…+{tc - 1}<br>{what}: {level}<extra></extra>"
            ),
        )
    )
    figure.update_layout(
        title=dict(text=plotly_text(title), yref="container", y=0.99, yanchor="top", x=0.01, xanchor="left"),
        xaxis=dict(title=f"key position (tiles of {tc})", side="top", showgrid=False),
        yaxis=dict(title=f"query position (tiles of {tr})", autorange="reversed", showgrid=False),
        height=800, margin=dict(l=10, r=10, t=110, b=10), template=TEMPLATE,
    )
    return figure
