"""Mask figures: the mask itself, scores with −∞ written in, and how much each row changed."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from .axes import categories, plotly_text, token_axis
from .style import TEMPLATE


def _layout(figure: go.Figure, title: str, query_labels: Sequence[str], key_labels: Sequence[str]) -> go.Figure:
    n = max(len(query_labels), len(key_labels))
    figure.update_layout(
        title=dict(text=plotly_text(title), yref="container", y=0.99, yanchor="top", x=0.01, xanchor="left"),
        xaxis=dict(token_axis(key_labels), side="top", tickangle=-60, title="key"),
        yaxis=dict(token_axis(query_labels), autorange="reversed", title="query"),
        height=int(min(760, max(360, 24 * n + 170))),
        margin=dict(l=10, r=10, t=125, b=10),
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
        colorbar=dict(title=dict(text="score")),
    ))
    return _layout(figure, title, query_labels, key_labels)


def row_change_bars(change: np.ndarray, query_labels: Sequence[str], edited: int) -> go.Figure:
    """Max |Δ pattern| per query row after editing the token at ``edited``."""
    colors = ["#2b6cb0" if i < edited else "#d62728" for i in range(len(change))]
    figure = go.Figure(go.Bar(
        x=categories(query_labels), y=change, marker_color=colors,
        hovertemplate="row %{x}<br>max |Δ| %{y:.2e}<extra></extra>",
    ))
    figure.update_layout(
        title=dict(text="largest change of each row's attention after the edit"),
        xaxis=dict(token_axis(query_labels), title="query row"), yaxis=dict(title="max |Δ weight|"),
        height=360, margin=dict(l=10, r=10, t=60, b=10), template=TEMPLATE,
    )
    return figure
