"""Head detector figures: a layers × heads heatmap of one score (every score on the same fixed
0–1 range, so colours compare across scores and models), and the user's marked query → key pairs
on their sentence."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import plotly.graph_objects as go

from .axes import plotly_text, shorten
from .heatmap import X_ANGLE
from .style import TEMPLATE, THIN_COLOUR_BAR
from .text_width import colour_bar_room, heatmap_margins, left_margin, number_labels, overhang, x_axis_room

MAX_ANNOTATED = 200  # cells; beyond this the printed numbers overlap
TITLE_ROOM = 30  # the figure's title above the head labels


def _numbered(name: str, count: int) -> dict:
    return dict(tickmode="array", tickvals=list(range(count)), ticktext=_names(name, count), showgrid=False)


def _names(name: str, count: int) -> list[str]:
    return [f"{name} {i}" for i in range(count)]


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
            colorbar=dict(title=dict(text="score"), thickness=THIN_COLOUR_BAR, x=1),
        )
    )
    angle = -90 if heads > 8 else 0  # upright: two figures side by side leave a head's column narrower than a
    # line turned any less
    head_names = _names("head", heads)
    # the last head's label, turned, reaches past the plot's right end (level: by half its width)
    right = max(colour_bar_room("score", number_labels(0.0, 1.0), THIN_COLOUR_BAR),
                overhang(head_names[-1:], 12, angle, heads))
    figure.update_layout(
        title=dict(text=plotly_text(title)),
        xaxis=dict(_numbered("head", heads), side="top", tickangle=angle),
        yaxis=dict(_numbered("layer", layers), autorange="reversed"),
        height=int(min(700, max(240, 40 * layers + 140))),
        margin=dict(l=left_margin(_names("layer", layers), 12, axis_title=False), r=right,
                    t=(TITLE_ROOM if title else 0) + x_axis_room(head_names, 12, angle, axis_title=False), b=20),
        template=TEMPLATE,
    )
    return figure


def pairs_figure(labels: Sequence[str], pairs: Iterable[tuple[int, int]]) -> go.Figure:
    """The marked pairs as filled cells of the query × key grid of the user's tokens."""
    n = len(labels)
    marked = np.zeros((n, n), np.float32)
    for q, k in pairs:
        marked[q, k] = 1.0
    shown = [shorten(label) for label in labels]
    ticks = dict(tickmode="array", tickvals=list(range(n)), ticktext=[plotly_text(label) for label in shown],
                 showgrid=False)
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
        xaxis=dict(ticks, title="key", side="top", tickangle=X_ANGLE),
        yaxis=dict(ticks, title="query", autorange="reversed"),
        height=int(min(600, max(260, 16 * n + 160))),
        margin=heatmap_margins((shown, 12), (shown, 12), X_ANGLE, 0, None),
        template=TEMPLATE,
    )
    return figure
