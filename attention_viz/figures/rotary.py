"""Figures of the rotary position embedding (RoPE) on the positional page: pairs of dimensions
turning at their own speeds, q_m · k_n as a function of (m, n) beside additive codes, the spread
along each diagonal that proves "depends on m − n only" numerically, and the long-range decay.

Plain numpy in (from :mod:`attention_viz.core.positional`'s rotary functions), ``go.Figure`` out; no
torch here. The small numpy helpers are what the figures plot and what the tests check.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .style import TEMPLATE
from .text_width import autorange, left_margin, legend_right, log_labels, number_labels, overhang, x_axis_room

TOP = 60  # the title's room
PANEL_TITLES = 20  # the second line of the panels' titles (12 px), under the figure's title


def diagonal_spread(scores: np.ndarray) -> np.ndarray:
    """max − min of S[m, n] over all pairs with m − n = k, for k = 0 … n−1 (the causal side).

    Zero (up to rounding) for every k exactly when the scores depend on the distance only.
    """
    s = np.asarray(scores, dtype=np.float64)
    return np.array([np.ptp(np.diagonal(s, offset=-k)) for k in range(s.shape[0])])


def relative_spread(scores: np.ndarray) -> float:
    """The largest diagonal spread relative to the largest |score|: one number per encoding."""
    s = np.asarray(scores, dtype=np.float64)
    return float(diagonal_spread(s).max() / max(np.abs(s).max(), 1e-300))


def pair_rotation_figure(points: np.ndarray, pairs: Sequence[int], wavelengths: Sequence[float]) -> go.Figure:
    """One panel per chosen pair: the 2-D point (x_i, x_{i+d/2}) of one vector at positions 0 … n−1.

    ``points`` (len(pairs), positions, 2). Fast pairs wind round the circle many times, slow ones
    barely move: together they tell near and far positions apart, like the sinusoids' clock hands.
    """
    points = np.asarray(points, dtype=np.float64)
    # two short lines each: on one line a slow pair's title is wider than its panel, over the next panel's labels
    titles = [f"pair {p}<br>one turn per {w:,.1f} positions" for p, w in zip(pairs, wavelengths)]
    figure = make_subplots(rows=1, cols=len(pairs), subplot_titles=titles)
    radius = float(np.abs(points).max()) * 1.1 or 1.0
    positions = np.arange(points.shape[1])
    for col, track in enumerate(points, start=1):
        figure.add_trace(
            go.Scatter(
                x=track[:, 0], y=track[:, 1], mode="lines+markers", showlegend=False,
                marker=dict(size=5, color=positions, colorscale="Viridis"),
                line=dict(width=1, color="lightgray"),
                customdata=positions, hovertemplate="position %{customdata}<br>(%{x:.3f}, %{y:.3f})<extra></extra>",
            ),  # fmt: skip
            row=1,
            col=col,
        )
        figure.update_xaxes(range=[-radius, radius], row=1, col=col)
        figure.update_yaxes(range=[-radius, radius], scaleanchor=f"x{col if col > 1 else ''}", row=1, col=col)
    labels = number_labels(-radius, radius)
    figure.update_layout(
        title=dict(text="rotary: each pair of dimensions turns by m·θᵢ at position m", yref="container", y=0.99,
                   yanchor="top"),
        height=360, template=TEMPLATE, margin=dict(l=left_margin(labels, 12, axis_title=False), r=overhang(labels, 12),
                                                   t=TOP + PANEL_TITLES, b=x_axis_room(labels, 12, axis_title=False)),
    )  # fmt: skip
    figure.update_annotations(font_size=12)
    return figure


def relative_scores_figure(scores: Mapping[str, np.ndarray]) -> go.Figure:
    """Side by side, S[m, n] = q at position m · k at position n for each encoding (name → matrix).

    Rotary gives stripes parallel to the diagonal (a Toeplitz matrix); an additive code does not.
    Each title carries the largest spread along a diagonal, relative to the largest score.
    """
    names = list(scores)
    titles = [f"{name}<br>spread along diagonals {relative_spread(scores[name]):.1e}" for name in names]
    figure = make_subplots(rows=1, cols=len(names), subplot_titles=titles, horizontal_spacing=0.06)
    for col, name in enumerate(names, start=1):
        s = np.asarray(scores[name], dtype=np.float64)
        limit = float(np.abs(s).max()) or 1.0
        figure.add_trace(
            go.Heatmap(
                z=s, x=np.arange(s.shape[1]), y=np.arange(s.shape[0]), zmin=-limit, zmax=limit,
                colorscale="RdBu", reversescale=True, showscale=False,
                hovertemplate="m = %{y}, n = %{x}<br>q·k = %{z:.3f}<extra></extra>",
            ),  # fmt: skip
            row=1,
            col=col,
        )
        figure.update_xaxes(title_text="key position n", row=1, col=col)
        figure.update_yaxes(title_text="query position m" if col == 1 else None, autorange="reversed", row=1, col=col)
    labels = number_labels(0, max(np.shape(s)[0] for s in scores.values()) - 1)
    figure.update_layout(
        title=dict(text="the same query and key vectors at every pair of positions"),
        height=440, template=TEMPLATE, margin=dict(l=left_margin(labels, 12), r=overhang(labels, 12),
                                                   t=TOP + 40, b=x_axis_room(labels, 12)),  # two-line panel titles
    )  # fmt: skip
    return figure


def spread_figure(scores: Mapping[str, np.ndarray]) -> go.Figure:
    """Spread of q_m · k_n along each diagonal (fixed m − n), per encoding, on a log axis: rotary
    sits at rounding error (~1e-15), additive codes at the size of the scores themselves."""
    figure = go.Figure()
    floors = []
    for name, s in scores.items():
        spread = diagonal_spread(s)[:-1]  # the last diagonal is one pair: nothing to compare
        floors.append(np.maximum(spread, 1e-17))
        figure.add_trace(
            go.Scatter(
                x=np.arange(len(spread)), y=floors[-1], mode="lines", name=name,
                hovertemplate="m − n = %{x}<br>max − min = %{y:.2e}<extra></extra>",
            )  # fmt: skip
        )
    legend, legend_width = legend_right(list(scores))
    spreads = np.concatenate(floors)
    x_labels = number_labels(0, max(len(f) for f in floors) - 1)
    figure.update_layout(
        title=dict(text="does q_m·k_n depend on m − n only? max − min over each diagonal"),
        xaxis_title="distance m − n", yaxis=dict(title="spread (log)", type="log", exponentformat="e"),
        height=360, template=TEMPLATE, legend=legend,
        margin=dict(l=left_margin(log_labels(spreads.min(), spreads.max(), exponents=True), 12), r=legend_width,
                    t=TOP, b=x_axis_room(x_labels, 12)),
    )  # fmt: skip
    return figure


def decay_figure(decay: np.ndarray, sinusoidal_products: np.ndarray | None = None) -> go.Figure:
    """RoFormer's bound on |q_m · k_n| against the distance (``decay`` for distances 0 … len−1),
    optionally beside the sinusoids' PE(t)·PE(t+k) = Σ cos(k·ωᵢ), both relative to distance 0 and
    drawn from distance 1 on (the axis is logarithmic)."""
    decay = np.asarray(decay, dtype=np.float64)
    distance = np.arange(1, len(decay))
    figure = go.Figure(
        go.Scatter(
            x=distance, y=decay[1:] / decay[0], mode="lines", name="rotary: bound (1/(d/2)) Σ|S_j|",
            hovertemplate="distance %{x}<br>%{y:.3f} of distance 0<extra></extra>",
        )  # fmt: skip
    )
    if sinusoidal_products is not None:
        products = np.asarray(sinusoidal_products, dtype=np.float64)
        figure.add_trace(
            go.Scatter(
                x=np.arange(1, len(products)), y=products[1:] / products[0], mode="lines", name="sinusoidal: PE(t)·PE(t+k)",
                line=dict(dash="dot"), hovertemplate="distance %{x}<br>%{y:.3f} of distance 0<extra></extra>",
            )  # fmt: skip
        )
    legend, legend_width = legend_right([trace.name for trace in figure.data])
    relative = np.concatenate([np.asarray(trace.y, dtype=np.float64) for trace in figure.data])
    figure.update_layout(
        title=dict(text="long-range decay: farther tokens can score less"),
        xaxis=dict(title="distance m − n (log)", type="log"), yaxis_title="relative to distance 0",
        height=360, template=TEMPLATE, legend=legend,
        margin=dict(l=left_margin(number_labels(*autorange(relative.min(), relative.max())), 12), r=legend_width,
                    t=TOP, b=x_axis_room(log_labels(1, len(decay) - 1), 12)),
    )  # fmt: skip
    return figure
