"""Figures of the positional-encoding page: an encoding as a heatmap, chosen dimensions as curves,
position similarity, the shift-as-rotation property, and the simpler alternatives each with the
figure that makes its problem visible.

Matrices come in as numpy ``(positions, d_model)`` (from :mod:`attention_viz.core.positional` or a
model's learned table); the small numpy helpers here (neighbour distances, offset products,
rotation angles) are what the figures plot, and what the tests check.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .style import TEMPLATE, THIN_COLOUR_BAR
from .text_width import (
    autorange,
    colour_bar_room,
    left_margin,
    legend_below,
    legend_right,
    number_labels,
    overhang,
    x_axis_room,
)

PROBLEM_BAR = 10  # px: the colour bar beside the small heatmap of an alternative code


# ---------------------------------------------------------------- numpy helpers


def omega(pair: int, d_model: int, base: float = 10000.0) -> float:
    """ω_i = 1 / base^(2i / d_model): the angular speed of sine/cosine pair ``pair``."""
    return float(base ** (-2.0 * pair / d_model))


def similarity(pe: np.ndarray, cosine: bool = False) -> np.ndarray:
    """PE · PEᵀ (positions × positions); ``cosine`` divides by the norms first."""
    m = np.asarray(pe, dtype=np.float64)
    if cosine:
        norms = np.linalg.norm(m, axis=1, keepdims=True)
        m = m / np.where(norms > 0, norms, 1.0)
    return m @ m.T


def neighbour_distance(matrix: np.ndarray) -> np.ndarray:
    """‖P(t+1) − P(t)‖ for t = 0 … n−2: how far one step moves the code."""
    m = np.asarray(matrix, dtype=np.float64)
    return np.linalg.norm(np.diff(m, axis=0), axis=1)


def offset_products(pe: np.ndarray, starts: Sequence[int], max_offset: int) -> np.ndarray:
    """(len(starts), max_offset+1): PE(t) · PE(t + k) for each start t and k = 0 … max_offset."""
    m = np.asarray(pe, dtype=np.float64)
    return np.stack([m[t] @ m[t : t + max_offset + 1].T for t in starts])


def pair_points(pe: np.ndarray, pair: int) -> np.ndarray:
    """(positions, 2): the (sin, cos) coordinates of pair ``pair`` — points on the unit circle."""
    return np.asarray(pe, dtype=np.float64)[:, 2 * pair : 2 * pair + 2]


def shift_angles(pe: np.ndarray, pair: int, k: int) -> np.ndarray:
    """The angle (radians, in [0, 2π)) that takes the point of position t to that of t + k, per t."""
    p = pair_points(pe, pair)
    # angle of (sin θ, cos θ) is θ itself when measured as atan2(sin, cos)
    theta = np.arctan2(p[:, 0], p[:, 1])
    return np.mod(theta[k:] - theta[:-k], 2 * np.pi) if k > 0 else np.zeros(len(p))


def rotation_error(pe: np.ndarray, rotation: np.ndarray, pair: int, k: int) -> float:
    """max_t ‖R_i(k) · [PE(t)_2i, PE(t)_2i+1] − [PE(t+k)_2i, PE(t+k)_2i+1]‖ (0 when the property holds)."""
    p = pair_points(pe, pair)
    rotated = p[: len(p) - k] @ np.asarray(rotation, dtype=np.float64).T
    return float(np.abs(rotated - p[k:]).max()) if len(p) > k else 0.0


# ---------------------------------------------------------------- figures


def encoding_heatmap(matrix: np.ndarray, title: str = "", diverging: bool = True,
                     colorbar_title: str = "value", height: int = 420, robust: bool = False) -> go.Figure:
    """An encoding table: positions down, dimensions across.

    ``robust``: the colour range ends at the 99th percentile of |value|, so a few outlier dimensions
    (learned tables have some) do not wash everything else out; hover still shows the exact value.
    """
    z = np.asarray(matrix, dtype=np.float32)
    top = float(np.percentile(np.abs(z), 99) if robust and z.size else np.abs(z).max()) or 1.0
    figure = go.Figure(go.Heatmap(
        z=z, x=np.arange(z.shape[1]), y=np.arange(z.shape[0]),
        colorscale="RdBu_r" if diverging else "Blues",
        zmin=-top if diverging else 0.0, zmax=top,
        hovertemplate="position %{y}<br>dimension %{x}<br>value %{z:.3f}<extra></extra>",
        colorbar=dict(title=dict(text=colorbar_title), thickness=THIN_COLOUR_BAR, x=1),
    ))
    figure.update_layout(
        title=dict(text=title), height=height, template=TEMPLATE,
        margin=_table_margins(z.shape, colour_bar_room(colorbar_title, number_labels(-top if diverging else 0.0, top),
                                                       THIN_COLOUR_BAR)),
        xaxis=dict(title="dimension", showgrid=False),
        yaxis=dict(title="position", autorange="reversed", showgrid=False),
    )
    return figure


def _table_margins(shape: tuple[int, int], right: int) -> dict[str, int]:
    """Margins of a (positions × columns) heatmap titled above, both axes numbered and titled, ``right``
    px for its colour bar."""
    x_labels = number_labels(0, shape[1] - 1)
    return dict(l=left_margin(number_labels(0, shape[0] - 1), 12), r=max(right, overhang(x_labels, 12)), t=50,
                b=x_axis_room(x_labels, 12))


def dimension_curves(pe: np.ndarray, dims: Sequence[int], base: float = 10000.0) -> go.Figure:
    """Chosen dimensions of a sinusoidal table as curves over the positions (even = sine, odd = cosine)."""
    m = np.asarray(pe, dtype=np.float64)
    d_model = m.shape[1]
    positions = np.arange(m.shape[0])
    figure = go.Figure()
    for dim in dims:
        wave = "sin" if dim % 2 == 0 else "cos"
        w = omega(dim // 2, d_model, base)
        figure.add_trace(go.Scatter(x=positions, y=m[:, dim], mode="lines",
                                    name=f"dim {dim}: {wave}(pos·{w:.3g}), period {2 * np.pi / w:.3g}"))
    # beside the plot: a line per long entry, whatever the figure's width
    legend, legend_width = legend_right([trace.name for trace in figure.data])
    x_labels = number_labels(0, len(positions) - 1)
    figure.update_layout(
        title=dict(text="chosen dimensions over the positions"), height=360, template=TEMPLATE,
        xaxis=dict(title="position"), yaxis=dict(title="value", range=[-1.1, 1.1]), legend=legend,
        margin=dict(l=left_margin(number_labels(-1.1, 1.1), 12), r=legend_width, t=50, b=x_axis_room(x_labels, 12)),
    )
    return figure


def similarity_heatmap(pe: np.ndarray, cosine: bool = False, title: str = "") -> go.Figure:
    """PE · PEᵀ (or the cosine similarity) between every pair of positions."""
    s = similarity(pe, cosine).astype(np.float32)
    name = "cosine" if cosine else "PE·PEᵀ"
    figure = go.Figure(go.Heatmap(
        z=s, x=np.arange(len(s)), y=np.arange(len(s)), colorscale="RdBu_r",
        zmin=-float(np.abs(s).max()), zmax=float(np.abs(s).max()),
        hovertemplate=f"position %{{y}}<br>position %{{x}}<br>{name} %{{z:.3f}}<extra></extra>",
        colorbar=dict(title=dict(text=name), thickness=THIN_COLOUR_BAR, x=1),
    ))
    top = float(np.abs(s).max())
    figure.update_layout(
        title=dict(text=title or f"{name} between positions"), height=440, template=TEMPLATE,
        xaxis=dict(title="position", showgrid=False),
        yaxis=dict(title="position", autorange="reversed", showgrid=False),
        margin=_table_margins(s.shape, colour_bar_room(name, number_labels(-top, top), THIN_COLOUR_BAR)),
    )
    return figure


def shift_figure(pe: np.ndarray, pair: int, k: int, rotation: np.ndarray, base: float = 10000.0,
                 arrows: int = 4) -> go.Figure:
    """Left: the (sin, cos) points of pair ``pair``, the same points rotated by R_i(k) (they land on
    the points k positions later) and arrows t → t+k for a few t; only as many positions as fit in
    about one turn of the circle, so the points do not pile up. Right: the angle from t to t+k for
    every position of ``pe`` — one flat line at k·ω_i (mod 2π)."""
    w = omega(pair, pe.shape[1], base)
    one_turn = int(2 * np.pi / w) if w > 0 else len(pe)
    n = min(len(pe), max(k + 2, one_turn))
    p = pair_points(pe, pair)[:n]
    angle = float(np.mod(k * w, 2 * np.pi))
    rotated = p[: n - k] @ np.asarray(rotation, dtype=np.float64).T
    figure = make_subplots(rows=1, cols=2, column_widths=[0.5, 0.5], horizontal_spacing=0.12, subplot_titles=(
        f"pair {pair} (dims {2 * pair}, {2 * pair + 1}), ω = {w:.3g}",
        f"angle from position t to t+{k}",
    ))
    circle = np.linspace(0, 2 * np.pi, 200)
    figure.add_trace(go.Scatter(x=np.sin(circle), y=np.cos(circle), mode="lines", line=dict(color="lightgrey"),
                                hoverinfo="skip", showlegend=False), row=1, col=1)
    figure.add_trace(go.Scatter(x=p[:, 0], y=p[:, 1], mode="markers+text", name="PE(t)",
                                text=[str(t) for t in range(n)], textposition="top right", textfont=dict(size=10),
                                marker=dict(size=9, color=np.arange(n), colorscale="Viridis"),
                                hovertemplate="t = %{text}<br>sin %{x:.3f}<br>cos %{y:.3f}<extra></extra>"),
                     row=1, col=1)
    figure.add_trace(go.Scatter(x=rotated[:, 0], y=rotated[:, 1], mode="markers", name=f"R(k)·PE(t), k={k}",
                                text=[f"R·PE({t}) vs PE({t + k})" for t in range(n - k)],
                                marker=dict(symbol="x", size=7, color="black"),
                                hovertemplate="%{text}<extra></extra>"), row=1, col=1)
    for t in range(min(arrows, n - k)):
        figure.add_annotation(x=p[t + k, 0], y=p[t + k, 1], ax=p[t, 0], ay=p[t, 1], xref="x", yref="y",
                              axref="x", ayref="y", showarrow=True, arrowhead=2, arrowcolor="#d62728", text="")
    angles = shift_angles(pe, pair, k)  # every position, not only the drawn ones
    figure.add_trace(go.Scatter(x=np.arange(len(angles)), y=angles, mode="lines+markers", name="measured angle",
                                line=dict(color="#1f77b4")), row=1, col=2)
    figure.add_hline(y=angle, line=dict(dash="dot", color="#d62728"), row=1, col=2,
                     annotation_text=f"k·ω = {angle:.3f} rad", annotation_position="top left")
    figure.update_xaxes(title="sin (dim 2i)", range=[-1.2, 1.2], row=1, col=1)
    figure.update_yaxes(title="cos (dim 2i+1)", range=[-1.2, 1.2], scaleanchor="x", row=1, col=1)
    figure.update_xaxes(title="position t", row=1, col=2)
    figure.update_yaxes(title="radians", range=[0, 2 * np.pi], row=1, col=2)
    legend, legend_height = legend_below([trace.name for trace in figure.data if trace.showlegend is not False])
    x_labels = number_labels(0, len(angles) - 1)
    figure.update_layout(height=420, template=TEMPLATE, legend=legend, margin=dict(
        l=left_margin(number_labels(-1.2, 1.2), 12), r=overhang(x_labels, 12), t=50,
        b=x_axis_room(x_labels, 12) + legend_height))
    return figure


def _with_problem(matrix: np.ndarray, title: str, problem_title: str, x_title: str, y_title: str,
                  traces: list[go.Scatter], diverging: bool) -> go.Figure:
    """A small heatmap of the encoding (top) and the plot that shows its problem (bottom)."""
    z = np.asarray(matrix, dtype=np.float32)
    top = float(np.abs(z).max()) or 1.0
    figure = make_subplots(rows=2, cols=1, row_heights=[0.5, 0.5], vertical_spacing=0.16,
                           subplot_titles=(f"{z.shape[0]} positions × {z.shape[1]} dimensions", problem_title))
    figure.add_trace(go.Heatmap(
        z=z, x=np.arange(z.shape[1]), y=np.arange(z.shape[0]),
        colorscale="RdBu_r" if diverging else "Blues", zmin=-top if diverging else 0.0, zmax=top,
        colorbar=dict(thickness=PROBLEM_BAR, len=0.45, y=0.78, x=1),
        hovertemplate="position %{y}<br>dimension %{x}<br>value %{z:.3f}<extra></extra>",
    ), row=1, col=1)
    for trace in traces:
        figure.add_trace(trace, row=2, col=1)
    figure.update_yaxes(title="position", autorange="reversed", row=1, col=1)
    figure.update_xaxes(title=x_title, row=2, col=1)
    figure.update_yaxes(title=y_title, row=2, col=1)
    # Plotly shows a legend only for two traces or more
    legend, legend_height = legend_below([trace.name for trace in traces]) if len(traces) > 1 else ({}, 0)
    values = np.concatenate([np.asarray(trace.y, dtype=np.float64) for trace in traces])
    y_labels = number_labels(0, z.shape[0] - 1) + number_labels(*autorange(values.min(), values.max()))
    x_labels = number_labels(*autorange(0, max(len(trace.x) for trace in traces) - 1))
    colour_bar = colour_bar_room("", number_labels(-top if diverging else 0.0, top), PROBLEM_BAR)
    figure.update_layout(title=dict(text=title), height=560, template=TEMPLATE, legend=legend, margin=dict(
        l=left_margin(y_labels, 12), r=max(colour_bar, overhang(x_labels, 12)), t=70,
        b=x_axis_room(x_labels, 12) + legend_height))
    return figure


def integer_figure(matrix: np.ndarray) -> go.Figure:
    """Integer positions: the code's value grows with the position, without bound."""
    values = np.asarray(matrix)[:, 0]
    trace = go.Scatter(x=np.arange(len(values)), y=values, mode="lines+markers", name="value of every dimension")
    return _with_problem(matrix, "integer: position t → t", "the value grows without bound",
                         "position", "value", [trace], diverging=False)


def normalized_figure(short: np.ndarray, long: np.ndarray) -> go.Figure:
    """Positions in [0, 1]: the same index gets a different value in sentences of different lengths."""
    traces = []
    for m, color in ((short, "#d62728"), (long, "#1f77b4")):
        values = np.asarray(m)[:, 0]
        traces.append(go.Scatter(x=np.arange(len(values)), y=values, mode="lines+markers",
                                 name=f"sentence of {len(values)} tokens", line=dict(color=color)))
    return _with_problem(long, "normalized: position t → t / (n−1)",
                         f"position 4 is {float(short[4, 0]):.2f} in {len(short)} tokens, "
                         f"{float(long[4, 0]):.2f} in {len(long)}" if len(short) > 4 and len(long) > 4
                         else "the same index, different values",
                         "position", "value", traces, diverging=False)


def binary_figure(matrix: np.ndarray) -> go.Figure:
    """Binary codes: bounded, but one step to the next neighbour moves the code by uneven jumps."""
    jumps = neighbour_distance(matrix)
    trace = go.Scatter(x=np.arange(len(jumps)), y=jumps, mode="lines+markers", name="‖P(t+1) − P(t)‖")
    return _with_problem(matrix, "binary: position t → its bits", "distance to the next position jumps",
                         "position t", "‖P(t+1) − P(t)‖", [trace], diverging=False)


def sinusoidal_figure(matrix: np.ndarray, starts: Sequence[int] = (0, 10, 20), max_offset: int = 20) -> go.Figure:
    """Sinusoids: bounded, every step moves the code by the same distance, and PE(t)·PE(t+k)
    depends on the offset k only — the curves for different t coincide."""
    n = len(matrix)
    starts = [t for t in starts if t + max_offset < n] or [0]
    max_offset = min(max_offset, n - 1 - max(starts))
    products = offset_products(matrix, starts, max_offset)
    widths = [9, 5, 2][: len(starts)] + [2] * max(0, len(starts) - 3)  # wide under narrow: all visible at once
    traces = [go.Scatter(x=np.arange(max_offset + 1), y=row, mode="lines+markers", name=f"PE({t})·PE({t}+k)",
                         line=dict(width=width), marker=dict(size=width + 2), opacity=0.8)
              for t, row, width in zip(starts, products, widths)]
    return _with_problem(matrix, "sinusoidal: sin/cos at many frequencies",
                         "PE(t)·PE(t+k) depends only on k (curves coincide)", "offset k", "dot product",
                         traces, diverging=True)
