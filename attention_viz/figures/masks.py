"""Mask figures: the mask itself, scores with −∞ written in, and how much each row changed."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from .axes import categories, plotly_text, tick_labels, token_axis
from .heatmap import X_ANGLE
from .style import TEMPLATE, diverging, two_levels
from .text_width import (
    LINE_BOX,
    TURNED_END_ROOM,
    colour_bar_room,
    figure_width,
    heatmap_margins,
    left_margin,
    number_labels,
    overhang,
    pixels,
    x_axis_room,
)


def _margins(query_labels: Sequence[str], key_labels: Sequence[str], colour_bar: int | None) -> dict[str, int]:
    """Margins that hold the token axes (keys turned along the top), the title, and ``colour_bar`` px on
    the right for a colour bar."""
    margin = heatmap_margins(tick_labels(query_labels), tick_labels(key_labels), X_ANGLE, 35, None)
    return dict(margin, r=colour_bar or margin["r"])


def _height(query_labels: Sequence[str], key_labels: Sequence[str]) -> int:
    return int(min(760, max(360, 24 * max(len(query_labels), len(key_labels)) + 170)))


def _layout(figure: go.Figure, title: str, query_labels: Sequence[str], key_labels: Sequence[str],
            colour_bar: int | None = None) -> go.Figure:
    """Title, token axes (keys turned along the top) and margins that hold them."""
    figure.update_layout(
        title=dict(text=plotly_text(title), yref="container", y=0.99, yanchor="top", x=0.01, xanchor="left"),
        xaxis=dict(token_axis(key_labels), side="top", tickangle=X_ANGLE, title="key"),
        yaxis=dict(token_axis(query_labels), autorange="reversed", title="query"),
        height=_height(query_labels, key_labels),
        margin=_margins(query_labels, key_labels, colour_bar),
        template=TEMPLATE,
    )
    return figure


def mask_heatmap(mask: np.ndarray, query_labels: Sequence[str], key_labels: Sequence[str], title: str,
                 dark: bool = False) -> go.Figure:
    """A boolean mask: blue = may attend, a shade off the page's background (``dark`` or not) = masked."""
    figure = go.Figure(go.Heatmap(
        z=mask.astype(np.float32), x=categories(key_labels), y=categories(query_labels),
        colorscale=two_levels(dark), zmin=0, zmax=1, showscale=False, xgap=1, ygap=1,
        hovertemplate="query %{y}<br>key %{x}<br>%{z:.0f} (1 = may attend)<extra></extra>",
    ))
    return _layout(figure, title, query_labels, key_labels)


def cell_text_size(cell_width: float, cell_height: float, text: str) -> int | None:
    """The largest font (12 down to 9 px) at which ``text`` fits inside a cell with a pixel to spare on
    each side, or None when not even 9 px does."""
    return next((size for size in (12, 11, 10, 9)
                 if pixels(text, size) + 2 <= cell_width and LINE_BOX * size + 2 <= cell_height), None)


def _minus_infinity(finite: np.ndarray, width: float, height: float) -> tuple[np.ndarray, int] | tuple[None, None]:
    """The "−∞" written into masked cells ``width`` × ``height`` px, and its font size: in every masked cell
    while it fits one, else only in the first masked cell of each row, where its neighbours are a row
    away (written side by side in narrow cells they run together)."""
    size = cell_text_size(width, height, "−∞")
    masked = ~finite
    if size is None:
        size = cell_text_size(np.inf, height, "−∞")
        if size is None:
            return None, None
        first = np.zeros_like(masked)
        rows = np.flatnonzero(masked.any(axis=1))
        first[rows, masked[rows].argmax(axis=1)] = True
        masked = first
    return np.where(masked, "−∞", ""), size


def scores_heatmap(scores: np.ndarray, query_labels: Sequence[str], key_labels: Sequence[str], title: str,
                   dark: bool = False, across: int = 1) -> go.Figure:
    """Scores with masked cells blank and labelled −∞ (what softmax turns into exactly 0), as the cells
    hold it when ``across`` figures share the page's width."""
    finite = np.isfinite(scores)
    z = np.where(finite, scores, np.nan).astype(np.float32)
    top = float(np.abs(z[finite]).max()) if finite.any() else 1.0  # zmid=0: the colours span ±top
    colour_bar = colour_bar_room("score", number_labels(-top, top), 30)
    margin, height = _margins(query_labels, key_labels, colour_bar), _height(query_labels, key_labels)
    text, size = _minus_infinity(finite, (figure_width(across) - margin["l"] - margin["r"]) / max(1, len(key_labels)),
                                 (height - margin["t"] - margin["b"]) / max(1, len(query_labels)))
    figure = go.Figure(go.Heatmap(
        z=z, x=categories(key_labels), y=categories(query_labels), colorscale=diverging(dark), zmid=0,
        text=text, texttemplate="%{text}" if size else None, textfont=dict(size=size) if size else None,
        hovertemplate="query %{y}<br>key %{x}<br>score %{z:.3f}<extra></extra>", hoverongaps=False,
        colorbar=dict(title=dict(text="score"), x=1),
    ))
    return _layout(figure, title, query_labels, key_labels, colour_bar)


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
