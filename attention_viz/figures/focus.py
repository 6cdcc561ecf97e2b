"""Token focus: one query token's attention to one key token in every head, and one attention
row drawn over the sentence itself."""

from __future__ import annotations

import html
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from .axes import plotly_text


def focus_heatmap(focus: np.ndarray, query_label: str, key_label: str) -> go.Figure:
    """``focus`` [layers, heads]: how much ``query_label`` attends to ``key_label`` in each head."""
    layers, heads = focus.shape
    figure = go.Figure(
        go.Heatmap(
            z=focus.astype(np.float32),
            x=list(range(heads)),
            y=list(range(layers)),
            colorscale="Blues",
            zmin=0.0,
            zmax=max(float(focus.max()), 1e-6),
            hovertemplate="layer %{y}, head %{x}<br>weight %{z:.3f}<extra></extra>",
            colorbar=dict(title=dict(text="weight")),
        )
    )
    figure.update_layout(
        title=dict(text=f"attention from {plotly_text(query_label)} to {plotly_text(key_label)}"),
        xaxis=dict(title="head", tickmode="linear", dtick=1, side="top"),
        yaxis=dict(title="layer", tickmode="linear", dtick=1, autorange="reversed"),
        height=int(min(700, 90 + 45 * layers)),
        margin=dict(l=10, r=10, t=90, b=10),
        template="plotly_white",
    )
    return figure


def highlighted_text(labels: Sequence[str], weights: np.ndarray, query_index: int | None = None) -> str:
    """HTML: each token on a background as dark as its weight; the query token outlined.

    Every label is HTML-escaped: user text never becomes markup.
    """
    top = float(weights.max()) if weights.size and weights.max() > 0 else 1.0
    spans = []
    for i, (label, weight) in enumerate(zip(labels, weights)):
        alpha = float(weight) / top
        color = "#fff" if alpha > 0.55 else "#111"
        outline = "outline:2px solid #d62728;" if i == query_index else ""
        spans.append(
            f'<span title="{html.escape(label)}: {float(weight):.3f}" style="background:rgba(8,81,156,{alpha:.3f});'
            f'color:{color};{outline}padding:2px 3px;margin:1px;border-radius:3px;display:inline-block">'
            f"{html.escape(label)}</span>"
        )
    return '<div style="line-height:2.1;font-size:1.05rem">' + "".join(spans) + "</div>"
