"""The attention heatmap of one head (or the mean / max of heads): query rows × key columns."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from .axes import MAX_TICKS, categories, hover_text, plotly_text, shorten, tick_labels, token_axis
from .style import TEMPLATE, sequential
from .style import diverging as diverging_scale  # the name ``diverging`` is the builder's switch
from .text_width import (TICK_SIZE, colour_bar_margin, figure_width, fitted_ticks, heatmap_margins, left_margin,
                         row_pitch)

X_ANGLE = -60  # the key labels along the top, turned so that long ones never overlap
UPRIGHT = -90  # turned all the way when -60° leaves too little room between them
# A colour bar laid under the plot (when the one beside it would leave too little width to label every
# key): its length along the plot, and the room it takes under it (pads, bar, tick labels).
BAR_BELOW_LENGTH = 0.5
BAR_BELOW_ROOM = 64
NO_BAR_RIGHT = 20  # the right margin without a colour bar beside the plot (text_width.heatmap_margins)
HOVER = "query %{y}<br>key %{x}<br>weight %{z:.4f}<extra></extra>"  # axis values carry positions


def shared_top(*matrices: np.ndarray) -> float:
    """One colour range for figures drawn side by side: the largest |value| among them, so the same
    shade means the same weight in both."""
    tops = [float(np.nanmax(np.abs(m))) for m in matrices if np.size(m) and np.isfinite(m).any()]
    return max(tops, default=1.0) or 1.0


def attention_heatmap(
    pattern: np.ndarray,
    query_labels: Sequence[str],
    key_labels: Sequence[str] | None = None,
    title: str = "",
    threshold: float = 0.0,
    zmax: float | None = None,
    colorbar_title: str = "weight",
    hover: str = HOVER,
    diverging: bool = False,
    starts: tuple[int, int] = (0, 0),
    zrange: tuple[float, float] | None = None,
    colorscale: str | list | None = None,
    colorbar_ticks: tuple[Sequence[float], Sequence[str]] | None = None,
    row_title: str = "query (attending)",
    dark: bool = False,
) -> go.Figure:
    """``pattern`` [query, key] as a heatmap; weights below ``threshold`` are left blank.

    ``diverging`` draws signed values (a difference of two patterns) red/blue around 0.
    ``zrange`` fixes the colour range outright (e.g. a log scale's); ``starts``: the positions of the first query and key drawn, when the matrix is a window.
    ``colorscale`` and ``colorbar_ticks`` (values, labels) replace the defaults (uint8 levels label theirs in weights).
    ``row_title`` names what a row is (a layer, in Across layers); ``dark``: colours that start from a dark
    page's background instead of white.

    Values go to the browser as float32 binary arrays (compact), or as given when uint8 levels
    (a quarter of that; see figures/long_heatmap.py), labels once per axis.
    """
    key_labels = query_labels if key_labels is None else key_labels
    if pattern.shape != (len(query_labels), len(key_labels)):
        raise ValueError(f"pattern {pattern.shape} does not match {len(query_labels)}×{len(key_labels)} tokens")
    z = pattern if pattern.dtype == np.uint8 else np.asarray(pattern, dtype=np.float32)
    if threshold > 0 and z.dtype != np.uint8:
        z = np.where(z >= threshold, z, np.nan).astype(np.float32)
    finite = z[np.isfinite(z)]
    top = zmax if zmax is not None else (float(np.abs(finite).max()) if finite.size else 1.0)
    top = top if top > 0 else 1.0
    n = max(len(query_labels), len(key_labels))
    size = int(min(900, max(420, 22 * n + 160)))
    x_fit, x_angle, y_fit, bar_below = token_ticks(query_labels, key_labels, colorbar_title)
    trace = go.Heatmap(
        z=z,
        x=categories(key_labels, starts[1]),
        y=categories(query_labels, starts[0]),
        colorscale=colorscale or (diverging_scale(dark) if diverging else sequential(dark)),
        zmin=zrange[0] if zrange else -top if diverging else 0.0,
        zmax=zrange[1] if zrange else top,
        hovertemplate=f"{hover_text(title)}<br>{hover}" if title else hover,  # names layer and head
        colorbar=dict(title=dict(text=colorbar_title, **(dict(side="right") if bar_below else {})),
                      **(BAR_BELOW if bar_below else {}),
                      **(dict(tickvals=colorbar_ticks[0], ticktext=colorbar_ticks[1]) if colorbar_ticks else {})),
        hoverongaps=False,
    )
    layout = dict(  # given to the constructor: update_layout would validate it all over again
        # the title sits at the very top of the container, above the top-side key axis and its title
        title=dict(text=plotly_text(title), yref="container", y=0.99, yanchor="top", x=0.01, xanchor="left"),
        xaxis=dict(token_axis(key_labels, start=starts[1], fitted=x_fit), title="key (attended to)", side="top",
                   tickangle=x_angle),
        yaxis=dict(token_axis(query_labels, start=starts[0], fitted=y_fit), title=row_title, autorange="reversed"),
        margin=heatmap_margins(shown_ticks(query_labels, y_fit), shown_ticks(key_labels, x_fit), x_angle,
                               35 if title else 0, None if bar_below else colorbar_title),
        template=TEMPLATE,
    )
    if bar_below:
        layout["margin"]["b"] += BAR_BELOW_ROOM
    if y_fit is not None:  # a row a line of labels high at least: every query labelled at full size
        layout["height"] = max(size, math.ceil(layout["margin"]["t"] + layout["margin"]["b"]
                                               + len(query_labels) * row_pitch()))
    else:
        layout["height"] = size
    return go.Figure(trace, layout=layout)


# Plotly's colour bar under the plot, centred, its title at its right end
BAR_BELOW = dict(orientation="h", len=BAR_BELOW_LENGTH, thickness=12, x=0.5, xanchor="center", yref="container",
                 y=0, yanchor="bottom")


def token_ticks(query_labels: Sequence[str], key_labels: Sequence[str],
                colorbar_title: str) -> tuple[tuple[int, float], int, tuple[int, float] | None, bool]:
    """How the two token axes are labelled: the keys (every k-th, font size) and their angle, sized for
    the plot's width on a full-width figure (ui/narrow_charts.js fits them again to the width drawn);
    the queries every one at full size up to MAX_TICKS (the figure grows a line a row), else None
    (every k-th of them, as token_axis thins); and whether the colour bar goes under the plot, giving
    the keys its width, because beside it they would be thinned."""
    y_fit = (1, TICK_SIZE) if len(query_labels) <= MAX_TICKS else None
    y_labels, y_size = shown_ticks(query_labels, y_fit)
    room = figure_width(1) - left_margin(y_labels, y_size)
    shown, every, size = fitted_ticks(len(key_labels), room - colour_bar_margin(colorbar_title), X_ANGLE)
    if size == TICK_SIZE:
        return (every, size), X_ANGLE, y_fit, False
    shown, every, size = fitted_ticks(len(key_labels), room - colour_bar_margin(colorbar_title), UPRIGHT)
    if every == 1:
        return (every, size), UPRIGHT, y_fit, False
    shown, every, size = fitted_ticks(len(key_labels), room - NO_BAR_RIGHT, UPRIGHT)
    return (every, size), UPRIGHT, y_fit, True


def shown_ticks(labels: Sequence[str], fit: tuple[int, float] | None) -> tuple[list[str], float]:
    """The labelled ticks' text and their size, as the margins must hold them."""
    if fit is None:
        return tick_labels(labels)
    return [shorten(label) for label in labels[:: fit[0]]], fit[1]
