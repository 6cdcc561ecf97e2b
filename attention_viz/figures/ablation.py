"""Head ablation, before and after: attention maps side by side on one colour range, per-token
bars (how far each token moved; each token's log-probability), and the coreference study's
top heads against random heads. Positions are integers on the axes, labelled with the tokens,
so repeated tokens never merge."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..analysis.ablation_view import pooled_map
from .axes import plotly_text, shorten
from .heatmap import X_ANGLE
from .style import TEMPLATE, sequential
from .text_width import (
    PAD,
    TURNED_END_ROOM,
    autorange,
    colour_bar_margin,
    left_margin,
    number_labels,
    overhang,
    x_axis_room,
)

BEFORE, AFTER = "#1f77b4", "#d62728"
SUBPLOT_TITLE_ROOM = 30  # the "before" / "after" titles (16 px) above the key labels


def _positions(labels: Sequence[str]) -> dict:
    """Axis settings: integer positions, ticks named by the (escaped, shortened) tokens."""
    return dict(
        tickmode="array",
        tickvals=list(range(len(labels))),
        ticktext=[plotly_text(shorten(label)) for label in labels],
        showgrid=False,
    )


def _bar_margins(labels: Sequence[str], values: Sequence[float], top: int) -> dict[str, int]:
    """Margins of bars over token positions: their labels turned below (the first reaching left past
    the plot), ``values`` on a titled y axis, ``top`` px above."""
    shown = [shorten(label) for label in labels]
    y_labels = number_labels(*autorange(min(0.0, *values), max(0.0, *values)))
    return dict(l=max(left_margin(y_labels, 12), overhang(shown, 12, X_ANGLE, len(shown))), r=TURNED_END_ROOM, t=top,
                b=x_axis_room(shown, 12, X_ANGLE, axis_title=False))


def _hover_labels(labels: Sequence[str]) -> list[str]:
    return [f"{i}: {plotly_text(shorten(label))}" for i, label in enumerate(labels)]


def pattern_pair(
    before: np.ndarray,
    after: np.ndarray,
    labels_before: tuple[Sequence[str], Sequence[str]],
    labels_after: tuple[Sequence[str], Sequence[str]],
    titles: tuple[str, str] = ("before", "after"),
    dark: bool = False,
) -> go.Figure:
    """Two ``[query, key]`` maps side by side on ONE colour range (0 .. the larger maximum), so the
    same colour means the same weight in both; past ``PAIR_TILES`` a side each is max-pooled. ``labels_*`` = (query labels, key labels); the
    after map may have other tokens (an ablated translation can come out different). ``dark``: 0 is a dark
    page's background, not white."""
    maps = [np.asarray(before, np.float32), np.asarray(after, np.float32)]
    for z, (rows, cols) in zip(maps, (labels_before, labels_after)):
        if z.shape != (len(rows), len(cols)):
            raise ValueError(f"a map of shape {z.shape} does not match {len(rows)}×{len(cols)} tokens")
    pooled = [pooled_map(z, labels) for z, labels in zip(maps, (labels_before, labels_after))]
    if any(z.shape != p.shape for z, (p, _) in zip(maps, pooled)):  # a long text: each tile's largest weight
        titles = tuple(f"{title} (largest weight of each tile)" for title in titles)
    (maps[0], labels_before), (maps[1], labels_after) = pooled
    top = max(float(np.nanmax(z)) if z.size else 0.0 for z in maps) or 1.0
    figure = make_subplots(rows=1, cols=2, subplot_titles=[plotly_text(t) for t in titles], horizontal_spacing=0.12)
    for column, (z, (rows, cols)) in enumerate(zip(maps, (labels_before, labels_after)), start=1):
        figure.add_trace(
            go.Heatmap(
                z=z,
                x=list(range(len(cols))),
                y=list(range(len(rows))),
                customdata=[[[q, k] for k in _hover_labels(cols)] for q in _hover_labels(rows)],
                coloraxis="coloraxis",
                hovertemplate="query %{customdata[0]}<br>key %{customdata[1]}<br>weight %{z:.4f}<extra></extra>",
                hoverongaps=False,
            ),
            row=1,
            col=column,
        )
        figure.update_xaxes(_positions(cols), side="top", tickangle=X_ANGLE, row=1, col=column)
        figure.update_yaxes(_positions(rows), autorange="reversed", row=1, col=column)
    n = max(len(labels) for pair in (labels_before, labels_after) for labels in pair)
    rows = [shorten(label) for label in (*labels_before[0], *labels_after[0])]
    keys = x_axis_room([shorten(label) for label in (*labels_before[1], *labels_after[1])], 12, X_ANGLE,
                       axis_title=False)
    figure.update_annotations(yshift=keys - PAD)  # the "before" / "after" titles above the key labels, not on them
    figure.update_layout(
        coloraxis=dict(colorscale=sequential(dark), cmin=0.0, cmax=top, colorbar=dict(title=dict(text="weight"))),
        height=int(min(700, max(380, 18 * n + 200))),
        margin=dict(l=left_margin(rows, 12, axis_title=False), r=colour_bar_margin("weight"), b=20,
                    t=keys + SUBPLOT_TITLE_ROOM),
        template=TEMPLATE,
    )
    return figure


def movement_bars(labels: Sequence[str], movement: Sequence[float], title: str = "") -> go.Figure:
    """How far each token's final representation moved (1 − cosine of before and after)."""
    if len(labels) != len(movement):
        raise ValueError(f"{len(movement)} values for {len(labels)} tokens")
    figure = go.Figure(
        go.Bar(
            x=list(range(len(labels))),
            y=list(movement),
            marker_color=AFTER,
            customdata=_hover_labels(labels),
            hovertemplate="%{customdata}<br>1 − cosine %{y:.5f}<extra></extra>",
        )
    )
    figure.update_layout(
        title=dict(text=plotly_text(title)),
        xaxis=dict(_positions(labels), tickangle=X_ANGLE),
        yaxis=dict(title="1 − cosine(before, after)", rangemode="tozero"),
        height=360,
        margin=_bar_margins(labels, movement, 50 if title else 20),
        template=TEMPLATE,
    )
    return figure


def log_prob_bars(labels: Sequence[str], before: Sequence[float], after: Sequence[float], title: str = "") -> go.Figure:
    """Each output token's log-probability before and after, as paired bars on one axis."""
    if not len(labels) == len(before) == len(after):
        raise ValueError(f"{len(before)} and {len(after)} values for {len(labels)} tokens")
    positions = list(range(len(labels)))
    hover = "%{customdata}<br>log p %{y:.4f}<extra>%{fullData.name}</extra>"
    figure = go.Figure(
        [
            go.Bar(x=positions, y=list(before), name="before", marker_color=BEFORE,
                   customdata=_hover_labels(labels), hovertemplate=hover),
            go.Bar(x=positions, y=list(after), name="after", marker_color=AFTER,
                   customdata=_hover_labels(labels), hovertemplate=hover),
        ]
    )
    figure.update_layout(
        title=dict(text=plotly_text(title)),
        barmode="group",
        xaxis=dict(_positions(labels), tickangle=X_ANGLE),
        yaxis=dict(title="log-probability (nats)"),
        legend=dict(orientation="h", y=1.02, yanchor="bottom", x=1, xanchor="right"),  # one short row, on top
        height=380,
        margin=_bar_margins(labels, [*before, *after], 60),
        template=TEMPLATE,
    )
    return figure


def study_bars(top_heads: Sequence[str], top_movement: float, random_movements: Sequence[float]) -> go.Figure:
    """The coreference study: how far the query token moved without the top heads (first bar)
    and without each random set of as many heads (the others, largest first)."""
    ordered = sorted(random_movements, reverse=True)
    labels = ["top heads"] + [f"random {i + 1}" for i in range(len(ordered))]
    figure = go.Figure(
        go.Bar(
            x=list(range(len(labels))),
            y=[top_movement, *ordered],
            marker_color=[AFTER] + [BEFORE] * len(ordered),
            customdata=[plotly_text(", ".join(top_heads))] + ["random heads"] * len(ordered),
            hovertemplate="%{customdata}<br>1 − cosine %{y:.5f}<extra></extra>",
        )
    )
    figure.update_layout(
        xaxis=dict(_positions(labels), tickangle=X_ANGLE),
        yaxis=dict(title="1 − cosine of the token", rangemode="tozero"),
        height=340,
        margin=_bar_margins(labels, [top_movement, *ordered], 20),
        template=TEMPLATE,
    )
    return figure
