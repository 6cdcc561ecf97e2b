"""Figures of the "inside one head" page: any labelled matrix as a heatmap (tokens on the token
axis, dimension index on the other) and the saturation of softmax without 1/√d_k."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .axes import MAX_TICKS, categories, tick_labels, token_axis
from .heatmap import X_ANGLE
from .style import TEMPLATE, THIN_COLOUR_BAR, sequential
from .style import diverging as diverging_scale  # the name ``diverging`` is the builder's switch
from .text_width import (
    LINE_BOX,
    TURNED_END_ROOM,
    colour_bar_room,
    labels_that_fit,
    left_margin,
    legend_below,
    number_labels,
    overhang,
    x_axis_room,
)

MAX_HEIGHT = 520


def _axis(labels: Sequence[str] | None, size: int,
          title: str) -> tuple[list | np.ndarray, dict, tuple[list[str], int]]:
    """Values, layout and shown tick labels (with their font size) for one axis: token categories when
    labels are given, else 0 … size−1."""
    if labels is None:
        return np.arange(size), dict(title=title, showgrid=False, zeroline=False), (number_labels(0, size - 1), 12)
    if len(labels) != size:
        raise ValueError(f"{len(labels)} labels for an axis of {size}")
    return categories(labels), dict(token_axis(labels), title=title), tick_labels(labels)


def matrix_heatmap(
    matrix: np.ndarray,
    title: str = "",
    row_labels: Sequence[str] | None = None,
    col_labels: Sequence[str] | None = None,
    row_title: str = "token",
    col_title: str = "dimension",
    diverging: bool = True,
    colorbar_title: str = "value",
    height: int | None = None,
    highlight_cols: tuple[int, int] | None = None,
    highlight_rows: tuple[int, int] | None = None,
    dark: bool = False,
) -> go.Figure:
    """``matrix`` (rows × cols) as a heatmap. Token axes (``*_labels``) are categorical over
    positions with escaped labels; other axes are integer indices (a dimension of a vector).

    ``diverging``: signed values (weights, activations) red/blue around 0; else white → blue.
    ``dark``: the scale's neutral end is a dark page's background, not white.
    ``highlight_cols`` / ``highlight_rows``: a [start, stop) band outlined (e.g. one head's columns).
    """
    z = np.asarray(matrix, dtype=np.float32)
    if z.ndim != 2:
        raise ValueError(f"matrix_heatmap needs a 2-D matrix, got shape {z.shape}")
    rows, cols = z.shape
    y, yaxis, y_ticks = _axis(row_labels, rows, row_title)
    x, xaxis, x_ticks = _axis(col_labels, cols, col_title)
    x_angle = 0 if col_labels is None else X_ANGLE  # tokens turned, as on the heatmaps: never left to Plotly
    top = float(np.abs(z).max()) if z.size else 1.0
    top = top if top > 0 else 1.0
    hover = f"{row_title} %{{y}}<br>{col_title} %{{x}}<br>{colorbar_title} %{{z:.4f}}<extra></extra>"
    figure = go.Figure(go.Heatmap(
        z=z, x=x, y=y,
        colorscale=diverging_scale(dark) if diverging else sequential(dark),
        zmin=-top if diverging else 0.0, zmax=top,
        hovertemplate=hover, colorbar=dict(title=dict(text=colorbar_title), thickness=THIN_COLOUR_BAR, x=1),
    ))
    colour_bar = colour_bar_room(colorbar_title, number_labels(-top if diverging else 0.0, top), THIN_COLOUR_BAR)
    above, below = 60 if title else 30, x_axis_room(*x_ticks, x_angle)
    if height is None:  # token rows a label's line each, as far as the page allows
        row = (LINE_BOX * y_ticks[1] + 1) if row_labels is not None else 14
        height = min(MAX_HEIGHT, max(260, math.ceil(row * rows + above + below)))
    if row_labels is not None:  # the token labels that fit the plot's height
        fit = labels_that_fit(height - above - below, y_ticks[1])
        yaxis = dict(yaxis, **token_axis(row_labels, min(MAX_TICKS, fit)))
    figure.update_layout(
        title=dict(text=title),
        xaxis=dict(xaxis, tickangle=x_angle),
        yaxis=dict(yaxis, autorange="reversed"),
        height=height,
        margin=dict(l=max(left_margin(*y_ticks), overhang(*x_ticks, x_angle, len(x) if col_labels else 0)),
                    r=max(colour_bar, overhang(*x_ticks)), t=above, b=below),
        template=TEMPLATE,
    )
    band = dict(type="rect", line=dict(color="white" if dark else "black", width=2), fillcolor="rgba(0,0,0,0)")
    if highlight_cols is not None:
        figure.add_shape(band, x0=highlight_cols[0] - 0.5, x1=highlight_cols[1] - 0.5, y0=-0.5, y1=rows - 0.5,
                         xref="x", yref="y")
    if highlight_rows is not None:
        figure.add_shape(band, y0=highlight_rows[0] - 0.5, y1=highlight_rows[1] - 0.5, x0=-0.5, x1=cols - 0.5,
                         xref="x", yref="y")
    return figure


def row_max(pattern: np.ndarray) -> np.ndarray:
    """The largest weight of each query row: 1/n is flat, 1 is a one-hot (saturated) softmax."""
    return np.asarray(pattern, dtype=np.float64).max(axis=-1)


def row_entropy(pattern: np.ndarray) -> np.ndarray:
    """Entropy of each row in bits: log2(n) is uniform, 0 is all weight on one key."""
    p = np.asarray(pattern, dtype=np.float64)
    logs = np.log2(p, out=np.zeros_like(p), where=p > 0)
    return -(p * logs).sum(axis=-1)


def saturation_figure(
    scaled: np.ndarray, unscaled: np.ndarray, labels: Sequence[str], d_k: int
) -> go.Figure:
    """Per query: the largest weight and the entropy of its row, with and without ÷√d_k.

    Without scaling the logits are √d_k times larger, so softmax moves toward a one-hot row:
    the row maximum rises toward 1 and the entropy falls toward 0 bits.
    """
    x = categories(labels)
    figure = make_subplots(rows=1, cols=2, subplot_titles=("largest weight in the row", "entropy of the row (bits)"),
                           horizontal_spacing=0.08)
    styles = ((scaled, f"÷√{d_k} (the model)", "#1f77b4"), (unscaled, "not scaled", "#d62728"))
    for pattern, name, color in styles:
        figure.add_trace(go.Scatter(x=x, y=row_max(pattern), mode="lines+markers", name=name, legendgroup=name,
                                    line=dict(color=color)), row=1, col=1)
        figure.add_trace(go.Scatter(x=x, y=row_entropy(pattern), mode="lines+markers", name=name,
                                    legendgroup=name, showlegend=False, line=dict(color=color)), row=1, col=2)
    n_keys = np.asarray(scaled).shape[-1]  # rows may be a window of the queries; each sees every key
    figure.add_hline(y=float(np.log2(n_keys)), line=dict(dash="dot", color="grey"), row=1, col=2,
                     annotation_text=f"uniform: log2({n_keys})", annotation_position="bottom right")
    axis = dict(token_axis(labels), title="query token", tickangle=X_ANGLE)  # turned: never left to Plotly
    figure.update_xaxes(axis, row=1, col=1)
    figure.update_xaxes(axis, row=1, col=2)
    figure.update_yaxes(range=[0, 1.05], row=1, col=1)
    figure.update_yaxes(rangemode="tozero", row=1, col=2)
    legend, legend_height = legend_below([name for _, name, _ in styles])
    ticks = tick_labels(labels)
    figure.update_layout(height=380, template=TEMPLATE, legend=legend, margin=dict(
        l=max(left_margin(number_labels(0, 1.05), 12, axis_title=False), overhang(*ticks, X_ANGLE, 2 * len(labels))),
        r=TURNED_END_ROOM, t=50, b=x_axis_room(*ticks, X_ANGLE) + legend_height))
    return figure
