"""Mask figures: the mask itself, scores with −∞ written in, and how much each row changed."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from .axes import categories, plotly_text, tick_labels, token_axis
from .heatmap import X_ANGLE
from .style import TEMPLATE
from .text_width import (
    TURNED_END_ROOM,
    colour_bar_room,
    heatmap_margins,
    left_margin,
    number_labels,
    overhang,
    x_axis_room,
)


def _layout(figure: go.Figure, title: str, query_labels: Sequence[str], key_labels: Sequence[str],
            colour_bar: int | None = None) -> go.Figure:
    """Title, token axes (keys turned along the top) and margins that hold them, and ``colour_bar`` px
    on the right for a colour bar."""
    n = max(len(query_labels), len(key_labels))
    margin = heatmap_margins(tick_labels(query_labels), tick_labels(key_labels), X_ANGLE, 35, None)
    figure.update_layout(
        title=dict(text=plotly_text(title), yref="container", y=0.99, yanchor="top", x=0.01, xanchor="left"),
        xaxis=dict(token_axis(key_labels), side="top", tickangle=X_ANGLE, title="key"),
        yaxis=dict(token_axis(query_labels), autorange="reversed", title="query"),
        height=int(min(760, max(360, 24 * n + 170))),
        margin=dict(margin, r=colour_bar or margin["r"]),
        template=TEMPLATE,
    )
    return figure


def mask_heatmap(mask: np.ndarray, query_labels: Sequence[str], key_labels: Sequence[str], title: str) -> go.Figure:
    """A boolean mask: dark = may attend, light = masked."""
    figure = go.Figure(go.Heatmap(
        z=mask.astype(np.float32), x=categories(key_labels), y=categories(query_labels),
        colorscale=[[0, "#f3f3f3"], [1, "#2b6cb0"]], zmin=0, zmax=1, showscale=False, xgap=1, ygap=1,
        hovertemplate="query %{y}<br>key %{x}<br>%{z:.0f} (1 = may attend)<extra></extra>",
    ))
    return _layout(figure, title, query_labels, key_labels)


def scores_heatmap(scores: np.ndarray, query_labels: Sequence[str], key_labels: Sequence[str], title: str) -> go.Figure:
    """Scores with masked cells blank and labelled −∞ (what softmax turns into exactly 0)."""
    finite = np.isfinite(scores)
    z = np.where(finite, scores, np.nan).astype(np.float32)
    show_text = scores.size <= 40 * 40  # a label per cell only while cells are big enough to read
    figure = go.Figure(go.Heatmap(
        z=z, x=categories(key_labels), y=categories(query_labels), colorscale="RdBu_r", zmid=0,
        text=np.where(finite, "", "−∞") if show_text else None, texttemplate="%{text}" if show_text else None,
        hovertemplate="query %{y}<br>key %{x}<br>score %{z:.3f}<extra></extra>", hoverongaps=False,
        colorbar=dict(title=dict(text="score"), x=1),
    ))
    top = float(np.abs(z[finite]).max()) if finite.any() else 1.0  # zmid=0: the colours span ±top
    return _layout(figure, title, query_labels, key_labels, colour_bar_room("score", number_labels(-top, top), 30))


def row_change_bars(change: np.ndarray, query_labels: Sequence[str], edited: int) -> go.Figure:
    """Max |Δ pattern| per query row after editing the token at ``edited``."""
    colors = ["#2b6cb0" if i < edited else "#d62728" for i in range(len(change))]
    figure = go.Figure(go.Bar(
        x=categories(query_labels), y=change, marker_color=colors,
        hovertemplate="row %{x}<br>max |Δ| %{y:.2e}<extra></extra>",
    ))
    ticks = tick_labels(query_labels)
    y_labels = number_labels(0, float(np.max(change, initial=0.0)) * 1.1)
    figure.update_layout(
        title=dict(text="largest change of each row's attention after the edit"),
        # the tokens turned as on the heatmaps: left to Plotly, their angle (and room) would follow the width
        xaxis=dict(token_axis(query_labels), title="query row", tickangle=X_ANGLE), yaxis=dict(title="max |Δ weight|"),
        height=360, template=TEMPLATE,
        margin=dict(l=max(left_margin(y_labels, 12), overhang(*ticks, X_ANGLE, len(query_labels))), r=TURNED_END_ROOM,
                    t=60, b=x_axis_room(*ticks, X_ANGLE)),
    )
    return figure
