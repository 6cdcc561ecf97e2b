"""One head of a long input: pooled tiles (uint8 levels, the colour bar in weights) or, zoomed in
far enough, exact cells with token labels (the ordinary heatmap)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from ..analysis.long_input import LongHeatmap
from .axes import hover_text, plotly_text
from .heatmap import attention_heatmap

POOLING_WORDS = {"max": "largest weight", "mean": "mean weight"}


def long_heatmap_figure(heatmap: LongHeatmap, labels: Sequence[str], title: str) -> go.Figure:
    """``labels``: every token's label (the whole input); only the shown region's are sent."""
    if heatmap.is_exact:
        rows, cols = heatmap.rows, heatmap.cols
        return attention_heatmap(heatmap.exact, labels[rows.start : rows.stop], labels[cols.start : cols.stop],
                                 title=title, starts=(rows.start, cols.start))
    levels = np.linspace(0, 255, 6)
    tr, tc = heatmap.tile_rows, heatmap.tile_cols
    what = POOLING_WORDS[heatmap.pooling]
    figure = go.Figure(
        go.Heatmap(
            z=heatmap.codes,  # uint8: a quarter of float32 on the wire
            x=heatmap.col_starts, y=heatmap.row_starts, zmin=0, zmax=255, colorscale="Blues",
            colorbar=dict(title=dict(text=what), tickvals=levels,
                          ticktext=[f"{v / 255 * heatmap.scale:.3g}" for v in levels]),
            hovertemplate=(
                f"{hover_text(title)}<br>queries %{{y}}…+{tr - 1}, keys %{{x}}…+{tc - 1}<br>"
                f"{what}: level %{{z}} of 255 (255 = {heatmap.scale:.4g})<extra></extra>"
            ),
        )
    )
    figure.update_layout(
        title=dict(text=plotly_text(title), yref="container", y=0.99, yanchor="top", x=0.01, xanchor="left"),
        xaxis=dict(title=f"key position (tiles of {tc})", side="top", showgrid=False),
        yaxis=dict(title=f"query position (tiles of {tr})", autorange="reversed", showgrid=False),
        height=800, margin=dict(l=10, r=10, t=110, b=10), template="plotly_white",
    )
    return figure
