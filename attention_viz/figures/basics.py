"""Figures of the basics page (synthetic data, the formulas themselves): softmax with and without
÷√d_k, the variance of q·k as d_k grows, and attention pooling as Nadaraya–Watson kernel
regression (the waist → weight example).

The small numpy functions here (softmax, the dot-product statistics, kernel weights) are what the
figures plot; the tests check them against hand computations.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .style import TEMPLATE
from .text_width import (
    TURNED_END_ROOM,
    autorange,
    left_margin,
    legend_below,
    log_labels,
    number_labels,
    overhang,
    x_axis_room,
)

BLUE, RED = "#1f77b4", "#d62728"
KERNEL_ANGLE = -30  # the kernel weights' long bar labels ("K1: 50 cm → 38 kg"), turned

# The waist/weight example: a handful of (waist cm, weight kg) pairs; the query 57 sits halfway between the keys
# 56 → 43 kg and 58 → 48 kg, so a narrow kernel gives them 50 % each: 43·0.5 + 48·0.5.
WAISTS = (50.0, 56.0, 58.0, 63.0, 68.0, 74.0)
WEIGHTS = (38.0, 43.0, 48.0, 52.0, 58.0, 66.0)


# ---------------------------------------------------------------- numpy helpers


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Numerically stable softmax (float64)."""
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def dot_product_stats(d_ks: Sequence[int], samples: int = 400, n_keys: int = 8,
                      seed: int = 0) -> dict[str, np.ndarray]:
    """For each d_k: the variance of q·k for q, k with independent N(0, 1) entries (≈ d_k), the
    variance after ÷√d_k (≈ 1), and the mean largest softmax weight of one query over ``n_keys``
    keys, with and without the scaling."""
    rng = np.random.default_rng(seed)
    out = {k: [] for k in ("variance", "variance_scaled", "max_weight", "max_weight_scaled")}
    for d_k in d_ks:
        q = rng.standard_normal((samples, 1, d_k))
        k = rng.standard_normal((samples, n_keys, d_k))
        dots = (q * k).sum(-1)  # (samples, n_keys)
        scaled = dots / np.sqrt(d_k)
        out["variance"].append(dots.var())
        out["variance_scaled"].append(scaled.var())
        out["max_weight"].append(softmax(dots).max(-1).mean())
        out["max_weight_scaled"].append(softmax(scaled).max(-1).mean())
    return {"d_k": np.asarray(d_ks), **{k: np.asarray(v) for k, v in out.items()}}


def kernel_weights(query: float, keys: np.ndarray, sigma: float) -> np.ndarray:
    """Gaussian-kernel attention weights softmax(−(q − k)² / 2σ²) over the keys."""
    keys = np.asarray(keys, dtype=np.float64)
    return softmax(-((query - keys) ** 2) / (2.0 * sigma**2))


def nadaraya_watson(query: float, keys: np.ndarray, values: np.ndarray, sigma: float) -> tuple[np.ndarray, float]:
    """(weights, prediction): the prediction is the weighted mean Σ αᵢ vᵢ of the values."""
    weights = kernel_weights(query, keys, sigma)
    return weights, float(weights @ np.asarray(values, dtype=np.float64))


# ---------------------------------------------------------------- figures


def score_pairs_figure(pairs: Sequence[tuple[float, float]] = ((51, 49), (70, 30)), d: int = 64) -> go.Figure:
    """The classic two pairs of scores through softmax as they are and divided by √d (= 8 for d = 64).

    Bars carry the exact probabilities (``y``) and their labels (``text``)."""
    root = float(np.sqrt(d))
    labels = []
    raw, scaled = [], []
    for a, b in pairs:
        p = softmax(np.array([a, b]))
        s = softmax(np.array([a, b]) / root)
        labels += [f"{a:g} vs {b:g}: first", f"{a:g} vs {b:g}: second"]
        raw += list(p)
        scaled += list(s)
    figure = go.Figure([
        go.Bar(x=labels, y=raw, name="softmax(scores)", marker_color=RED,
               text=[f"{v:.4g}" for v in raw], textposition="outside"),
        go.Bar(x=labels, y=scaled, name=f"softmax(scores / √{d} = /{root:g})", marker_color=BLUE,
               text=[f"{v:.4g}" for v in scaled], textposition="outside"),
    ])
    figure.update_layout(barmode="group", title=dict(text="two scores through softmax"), height=380,
                         yaxis=dict(title="weight", range=[0, 1.15]), template=TEMPLATE,
                         **_bar_margins(labels, [trace.name for trace in figure.data], 1.15))
    return figure


def _bar_margins(labels: Sequence[str], names: Sequence[str], top: float) -> dict:
    """Margins and legend of a bar chart titled above, its level category ``labels`` below, weights
    from 0 to ``top`` on a titled y axis, a legend of ``names`` under it all."""
    legend, legend_height = legend_below(names)
    ends = overhang(labels, 12, categories=len(labels))
    return dict(margin=dict(l=max(left_margin(number_labels(0, top), 12), ends), r=ends, t=50,
                            b=x_axis_room(labels, 12, axis_title=False) + legend_height), legend=legend)


def variance_figure(stats: dict[str, np.ndarray]) -> go.Figure:
    """Left: var(q·k) against d_k, log–log, with the line var = d_k. Right: the mean largest softmax
    weight; without ÷√d_k it climbs to 1 (one key takes everything)."""
    d = stats["d_k"]
    figure = make_subplots(rows=1, cols=2, horizontal_spacing=0.1,
                           subplot_titles=("variance of q·k", "largest softmax weight (mean)"))
    figure.add_trace(go.Scatter(x=d, y=stats["variance"], mode="lines+markers", name="q·k", line=dict(color=RED)),
                     row=1, col=1)
    figure.add_trace(go.Scatter(x=d, y=stats["variance_scaled"], mode="lines+markers", name="q·k / √d_k",
                                line=dict(color=BLUE)), row=1, col=1)
    figure.add_trace(go.Scatter(x=d, y=d, mode="lines", name="d_k", line=dict(color="grey", dash="dot")),
                     row=1, col=1)
    figure.add_trace(go.Scatter(x=d, y=stats["max_weight"], mode="lines+markers", name="softmax(q·k)",
                                line=dict(color=RED), showlegend=False), row=1, col=2)
    figure.add_trace(go.Scatter(x=d, y=stats["max_weight_scaled"], mode="lines+markers",
                                name="softmax(q·k / √d_k)", line=dict(color=BLUE), showlegend=False), row=1, col=2)
    figure.update_xaxes(type="log", title="d_k", row=1, col=1)
    figure.update_yaxes(type="log", title="variance", row=1, col=1)
    figure.update_xaxes(type="log", title="d_k", row=1, col=2)
    figure.update_yaxes(range=[0, 1.05], title="weight", row=1, col=2)
    legend, legend_height = legend_below([trace.name for trace in figure.data if trace.showlegend is not False])
    variances = np.concatenate([stats["variance"], stats["variance_scaled"], d])
    x_labels = log_labels(d.min(), d.max())
    figure.update_layout(height=380, template=TEMPLATE, legend=legend, margin=dict(
        l=left_margin(log_labels(variances.min(), variances.max()), 12), r=overhang(x_labels, 12), t=50,
        b=x_axis_room(x_labels, 12) + legend_height))
    return figure


def dk_softmax_figure(scores: np.ndarray, d_k: int) -> go.Figure:
    """One query's raw scores q·k over a few keys, through softmax with and without ÷√d_k."""
    scores = np.asarray(scores, dtype=np.float64)
    keys = [f"k{i + 1}" for i in range(len(scores))]
    raw, scaled = softmax(scores), softmax(scores / np.sqrt(d_k))
    figure = go.Figure([
        go.Bar(x=keys, y=raw, name="softmax(q·k)", marker_color=RED,
               customdata=scores, hovertemplate="%{x}: q·k = %{customdata:.2f}<br>weight %{y:.4f}<extra></extra>"),
        go.Bar(x=keys, y=scaled, name=f"softmax(q·k / √{d_k})", marker_color=BLUE,
               customdata=scores / np.sqrt(d_k),
               hovertemplate="%{x}: q·k/√d_k = %{customdata:.2f}<br>weight %{y:.4f}<extra></extra>"),
    ])
    figure.update_layout(barmode="group", height=340, template=TEMPLATE, yaxis=dict(title="weight", range=[0, 1.05]),
                         title=dict(text=f"one query, {len(scores)} random keys, d_k = {d_k}"),
                         **_bar_margins(keys, [trace.name for trace in figure.data], 1.05))
    return figure


def kernel_weights_figure(keys: np.ndarray, values: np.ndarray, weights: np.ndarray) -> go.Figure:
    """The attention weight of every (waist, weight) pair for the current query."""
    labels = [f"K{i + 1}: {k:g} cm → {v:g} kg" for i, (k, v) in enumerate(zip(keys, values))]
    figure = go.Figure(go.Bar(x=labels, y=weights, marker_color=BLUE, text=[f"{w:.2f}" for w in weights],
                              textposition="outside", hovertemplate="%{x}<br>weight %{y:.4f}<extra></extra>"))
    # turned by a fixed angle: left to Plotly, the angle (and so the margin it needs) would follow the width
    figure.update_layout(title=dict(text="attention weights α(q, kᵢ)"), height=360, template=TEMPLATE,
                         xaxis=dict(tickangle=KERNEL_ANGLE), yaxis=dict(title="weight", range=[0, 1.15]),
                         margin=dict(l=max(left_margin(number_labels(0, 1.15), 12),
                                           overhang(labels, 12, KERNEL_ANGLE, len(labels))),
                                     r=TURNED_END_ROOM, t=50,
                                     b=x_axis_room(labels, 12, KERNEL_ANGLE, axis_title=False)))
    return figure


def kernel_regression_figure(keys: np.ndarray, values: np.ndarray, query: float, sigma: float,
                             grid_points: int = 200) -> go.Figure:
    """The pairs as points (size ∝ weight), the whole regression curve f(q) for this σ, the query as
    a vertical line and the prediction f(query) — the weighted mean of the values — as a star."""
    keys = np.asarray(keys, dtype=np.float64)
    values = np.asarray(values, dtype=np.float64)
    weights, prediction = nadaraya_watson(query, keys, values, sigma)
    lo, hi = min(keys.min(), query) - 3, max(keys.max(), query) + 3
    grid = np.linspace(lo, hi, grid_points)
    curve = np.array([nadaraya_watson(g, keys, values, sigma)[1] for g in grid])
    figure = go.Figure([
        go.Scatter(x=grid, y=curve, mode="lines", name=f"f(q) for σ = {sigma:g}", line=dict(color="grey")),
        go.Scatter(x=keys, y=values, mode="markers", name="pairs (key = waist, value = weight)",
                   marker=dict(size=10 + 30 * weights, color=BLUE), customdata=weights,
                   hovertemplate="waist %{x} cm → %{y} kg<br>weight %{customdata:.3f}<extra></extra>"),
        go.Scatter(x=[query], y=[prediction], mode="markers", name="prediction",
                   marker=dict(symbol="star", size=18, color=RED),
                   hovertemplate="query %{x:.1f} cm → %{y:.2f} kg<extra></extra>"),
    ])
    figure.add_vline(x=query, line=dict(dash="dot", color=RED))
    legend, legend_height = legend_below([trace.name for trace in figure.data])
    x_labels = number_labels(lo, hi)
    figure.update_layout(title=dict(text=f"query waist {query:g} cm → predicted {prediction:.2f} kg"),
                         height=380, template=TEMPLATE, xaxis=dict(title="waist (cm)"),
                         yaxis=dict(title="weight (kg)"), legend=legend, margin=dict(
                             l=left_margin(number_labels(*autorange(curve.min(), curve.max())), 12),
                             r=overhang(x_labels, 12), t=50, b=x_axis_room(x_labels, 12) + legend_height))
    return figure
