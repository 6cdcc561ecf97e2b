"""Head detector figures: a layers × heads heatmap of one score (every score on the same fixed
0–1 range, so colours compare across scores and models), and the user's marked query → key pairs
on their sentence."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import plotly.graph_objects as go

from .axes import plotly_text, shorten
from .style import TEMPLATE

MAX_ANNOTATED = 200  # cells; beyond this the printed numbers overlap


def _numbered(name: str, count: int) -> dict:
    return dict(tickmode="array", tickvals=list(range(count)), ticktext=[f"{name} {i}" for i in range(count)],
                showgrid=False)


def score_heatmap(scores: np.ndarray, title: str = "") -> go.Figure:
    """``scores`` ``[layers, heads]`` in [0, 1]: rows are layers (0 at the top), columns heads."""
    z = np.asarray(scores, np.float64)
    if z.ndim != 2:
        raise ValueError(f"scores must be [layers, heads], got shape {z.shape}")
    layers, heads = z.shape
    figure = go.Figure(
        go.Heatmap(
            z=z,
            x=list(range(heads)),
            y=list(range(layers)),
            colorscale="Viridis",
            zmin=0.0,
            zmax=1.0,
            texttemplate="%{z:.2f}" if z.size <= MAX_ANNOTATED else None,
            hovertemplate="layer %{y}, head %{x}<br>score %{z:.3f}<extra></extra>",
            colorbar=dict(title=dict(text="score"), thickness=12),
        )
    )
    figure.update_layout(
        title=dict(text=plotly_text(title)),
        xaxis=dict(_numbered("head", heads), side="top", tickangle=-45 if heads > 8 else 0),
        yaxis=dict(_numbered("layer", layers), autorange="reversed"),
        height=int(min(700, max(240, 40 * layers + 140))),
        margin=dict(l=10, r=10, t=90 if title else 60, b=10),
        template=TEMPLATE,
    )
    return figure


def pairs_figure(labels: Sequence[str], pairs: Iterable[tuple[int, int]]) -> go.Figure:
    """The marked pairs as filled cells of the query × key grid of the user's tokens."""
    n = len(labels)
    marked = np.zeros((n, n), np.float32)
    for q, k in pairs:
        marked[q, k] = 1.0
    ticks = dict(tickmode="array", tickvals=list(range(n)),
                 ticktext=[plotly_text(shorten(label)) for label in labels], showgrid=False)
    figure = go.Figure(
        go.Heatmap(
            z=marked,
            x=list(range(n)),
            y=list(range(n)),
            colorscale=[[0.0, "#f4f4f4"], [1.0, "#d62728"]],
            zmin=0.0,
            zmax=1.0,
            showscale=False,
            xgap=1,
            ygap=1,
            hovertemplate="query %{y} → key %{x}<extra></extra>",
        )
    )
    figure.update_layout(
        xaxis=dict(ticks, title="key", side="top", tickangle=-60),
        yaxis=dict(ticks, title="query", autorange="reversed"),
        height=int(min(600, max(260, 16 * n + 160))),
        margin=dict(l=10, r=10, t=100, b=10),
        template=TEMPLATE,
    )
    return figure
