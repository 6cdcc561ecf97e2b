"""Head atlas figures: plain data in, Plotly figures out (no torch, no Streamlit)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from .axes import plotly_text

KIND_NAMES = ("word", "special", "punctuation")  # atlas.stats.WORD, SPECIAL, PUNCTUATION


def head_grid(values: np.ndarray, title: str, selected: tuple[int, int] | None = None) -> go.Figure:
    """``[layers, heads]`` as a heatmap with integer axes; the selected head outlined. A heatmap cell
    cannot be selected in Plotly, so a transparent marker sits on each (trace 1, point layer·H + head)."""
    L, H = values.shape
    layer, head = np.divmod(np.arange(L * H), H)
    figure = go.Figure([
        go.Heatmap(z=np.asarray(values, dtype=np.float32), x=np.arange(H), y=np.arange(L), colorscale="Viridis",
                   hoverinfo="skip"),
        go.Scatter(x=head, y=layer, mode="markers", showlegend=False,
                   customdata=np.stack([layer, head, np.asarray(values, dtype=np.float32).ravel()], axis=1),
                   marker=dict(size=max(8, min(30, 500 // max(H, 1))), symbol="square", color="rgba(0,0,0,0.01)"),
                   hovertemplate="layer %{customdata[0]}, head %{customdata[1]}<br>%{customdata[2]:.3f}<br>"
                                 "click to choose it<extra></extra>",
                   selected=dict(marker=dict(color="rgba(214,39,40,0.35)")), unselected=dict(marker=dict(opacity=1))),
    ])
    if selected is not None:
        layer, head = selected
        figure.add_shape(type="rect", x0=head - 0.5, x1=head + 0.5, y0=layer - 0.5, y1=layer + 0.5,
                         line=dict(color="red", width=3))
    figure.update_layout(title=plotly_text(title), xaxis=dict(title="head", dtick=1, range=[-0.5, H - 0.5]),
                         yaxis=dict(title="layer", dtick=1, range=[L - 0.5, -0.5]), height=80 + 40 * L,
                         clickmode="event+select")
    return figure


def head_map_figure(xy: np.ndarray, heads: int, selected: tuple[int, int]) -> go.Figure:
    """Every head as a point of the MDS map, coloured by layer; the selected head ringed."""
    index = np.arange(len(xy))
    layer, head = index // heads, index % heads
    figure = go.Figure(go.Scatter(
        x=xy[:, 0], y=xy[:, 1], mode="markers+text", text=[f"{l}.{h}" for l, h in zip(layer, head)],
        textposition="top center", textfont=dict(size=9),
        marker=dict(color=layer, colorscale="Viridis", size=9, colorbar=dict(title="layer")),
        hovertemplate="layer %{customdata[0]}, head %{customdata[1]}<br>click to choose it<extra></extra>",
        customdata=np.stack([layer, head], axis=1),
    ))
    chosen = selected[0] * heads + selected[1]
    figure.add_trace(go.Scatter(x=[xy[chosen, 0]], y=[xy[chosen, 1]], mode="markers", hoverinfo="skip",
                                marker=dict(size=20, color="rgba(0,0,0,0)", line=dict(color="red", width=3))))
    figure.update_layout(title="heads by the similarity of their patterns (MDS of JS divergences)",
                         showlegend=False, height=500, xaxis=dict(visible=False), yaxis=dict(visible=False))
    return figure


def qk_scatter(xy: np.ndarray, labels: Sequence[str], lines: np.ndarray, positions: np.ndarray,
               kinds: np.ndarray, color_by: str = "position", title: str = "") -> go.Figure:
    """AttentionViz's joint view: WebGL points, the first half queries, the second keys of the same
    tokens; coloured by position in the sentence or token kind; hover shows the token and its line."""
    n = len(labels)
    hover = [f"{plotly_text(label)} (line {line}, position {position})" for label, line, position in
             zip(labels, lines, positions)]
    figure = go.Figure()
    for name, rows, symbol in (("query", slice(0, n), "circle"), ("key", slice(n, 2 * n), "diamond")):
        if color_by == "kind":
            color = np.asarray(kinds, dtype=np.int8)
            marker = dict(color=color, colorscale=[[0, "#4C78A8"], [0.5, "#E45756"], [1, "#54A24B"]], cmin=0, cmax=2)
        else:
            marker = dict(color=np.asarray(positions, dtype=np.int32), colorscale="Plasma",
                          colorbar=dict(title="position") if name == "query" else None)
        figure.add_trace(go.Scattergl(
            x=xy[rows, 0], y=xy[rows, 1], mode="markers", name=name, hovertext=hover, hoverinfo="text",
            marker=dict(size=4, symbol=symbol, opacity=0.7 if name == "query" else 0.45, **marker),
        ))
    figure.update_layout(title=plotly_text(title), height=600, legend=dict(itemsizing="constant"),
                         xaxis=dict(visible=False), yaxis=dict(visible=False))
    return figure


def placement_figure(corpus: np.ndarray, value: float, title: str) -> go.Figure:
    """Histogram of a head's per-sentence values over the corpus, the current sentence as a line."""
    figure = go.Figure(go.Histogram(x=np.asarray(corpus, dtype=np.float32), nbinsx=40, name="corpus sentences"))
    figure.add_vline(x=value, line=dict(color="red", width=3), annotation_text="this sentence")
    figure.update_layout(title=plotly_text(title), height=300, showlegend=False, yaxis_title="sentences")
    return figure
