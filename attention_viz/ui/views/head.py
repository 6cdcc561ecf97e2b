"""Head heatmap: one layer and head (or the mean / max over heads) of any attention."""

from __future__ import annotations

from functools import partial

import plotly.graph_objects as go
import streamlit as st

from ...analysis.coreference import positions
from ...analysis.head_levels import LEVELS_ABOVE, captured_heatmap, needs_levels
from ...analysis.long_input import LongHeatmap
from ...analysis.weighting import QUANTITIES, WEIGHTING_NAMES, Weighted
from ...figures.heatmap import attention_heatmap
from ...figures.long_heatmap import long_heatmap_figure
from ...core.names import ENCODER_SELF
from ...core.result import AttentionResult
from ...analysis.selection import COLOUR_SCALES, LOG_FLOOR, Choice, Displayed, displayed, log_range, rescaled, window
from .. import cache
from . import long_head
from ..controls import attention_picker, layer_head_picker, weigh, weighting_picker, where_title
from ..export import chart, figure_downloads
from ..theme import dark
from ..level_canvas import level_canvas
from ..widgets import choice, flag, integer, number

WINDOW = 64  # tokens per side drawn at once: every tick labelled, cells large enough to read
SCALE_NAMES = {"linear": "linear", "row": "per row", "log": "log"}


def render(result: AttentionResult) -> None:
    if long_head.applies(result):  # past the capture limit: the whole text, patterns rebuilt blockwise
        long_head.render(result)
        return
    # The heatmap takes the page's width (beside the choices it was too narrow to label every token): the
    # layer and head above it, so they stay next to the figure on a phone too; the rest under it.
    with st.container():
        group = attention_picker(result, key="head_group")
        start_layer, start_head = cache.landing_head(result) if group == ENCODER_SELF else (0, 0)
        layer, head = layer_head_picker(result, group, key="head", layer=start_layer, head=start_head)
    plot = st.container()
    with st.container():  # under the figure, so that the heatmap is on a laptop's first screen
        if (layer, head) == (start_layer, start_head) and group == ENCODER_SELF and positions(result.tokens.labels):
            st.caption(f"Opened on layer {layer}, head {head}: of all heads, the one where “it” attends most to "
                       "“animal” in this sentence.")  # said only when the sentence has both and it is shown
        weighed = weigh(result, weighting_picker(), group=group)
        options = st.columns([1, 1, 2, 2], vertical_alignment="center")
        with options[0]:
            hide_special = flag("Hide special tokens", "head_hide_special")
        with options[1]:
            words = flag("Word level", "head_words")
        with options[2]:
            scale = choice("Colours", COLOUR_SCALES, "head_scale", widget="radio", horizontal=True,
                           format_func=SCALE_NAMES.get, help="Per row: each row's largest value is darkest, so "
                           "long rows stay visible. Log: small values are told apart.")
        with options[3]:
            threshold = number("Threshold", 0.0, 0.5, "head_threshold", 0.0, step=0.01)
        shown = displayed(weighed.result, Choice(group, layer, head, words, hide_special, threshold, weighed.kind))
        for note in shown.notes:
            st.caption(note)
    with plot:
        draw(result, shown, weighed, scale, threshold, layer, head)
    if weighed.weighting != "weights":
        side_by_side(result, Choice(group, layer, head, words, hide_special, threshold, "pattern"), shown,
                     weighed.weighting, layer, head, weighed.layer_level)


def draw(result: AttentionResult, shown: Displayed, weighed: Weighted, scale: str, threshold: float, layer: int,
         head: int | str) -> None:
    """The head's heatmap (our levels element past what float32 cells carry) and its downloads."""
    title = where_title(layer, head, weighed.layer_level) + weighed.suffix
    if needs_levels(shown.matrix.shape):  # too many cells for float32: levels, zoomed down to exact cells
        heatmap, title, colour_title = levels(result, shown, scale, threshold, weighed.quantity, title)
        figure = partial(cache.figure, long_heatmap_figure, heatmap, shown.query_labels, title, shown.key_labels,
                         colour_title)
        if not heatmap.is_exact:  # our own element: the levels as bytes onto a canvas
            level_canvas(heatmap, shown.query_labels, title, "head_chart", key_labels=shown.key_labels,
                         quantity=colour_title, ranges=long_head.RANGES)
            figure_downloads(figure, "head_chart")  # the Plotly figure, built only when asked for
            return
        figure = figure()
    else:
        figure = windowed(shown, scale, threshold, weighed.quantity, title)
    chart(st, figure, key="head_chart", config={"displaylogo": False})
    figure_downloads(figure, "head_chart")


def side_by_side(result: AttentionResult, choice_: Choice, weighted_shown: Displayed, weighting: str,
                 layer: int, head: int | str, layer_level: bool) -> None:
    """The chosen head's attention weights above the same head under the weighting, each on its own
    colour bar (different quantities): where a large weight carries little, the two differ."""
    if max(weighted_shown.matrix.shape) > WINDOW:
        return  # two more matrices that long would not be read side by side
    weights = displayed(result, choice_)
    st.markdown(f"**Attention weights and {WEIGHTING_NAMES[weighting]} of this head, one above the other**")
    columns = (st.container(), st.container())  # each the page's width: every token labelled
    for where, shown, name, key, title in (
            (columns[0], weights, "weights", "head_side_weights", where_title(layer, head)),
            (columns[1], weighted_shown, weighting, "head_side_weighted", where_title(layer, head, layer_level))):
        figure = cache.figure(attention_heatmap, shown.matrix, shown.query_labels, shown.key_labels,
                              title=f"{title} · {WEIGHTING_NAMES[name]}", colorbar_title=QUANTITIES[name],
                              hover=f"query %{{y}}<br>key %{{x}}<br>{QUANTITIES[name]} %{{z:.4f}}<extra></extra>",
                              dark=dark())
        chart(where, figure, key=key, config={"displaylogo": False})


def windowed(shown: Displayed, scale: str, threshold: float, quantity: str, title: str) -> go.Figure:
    """float32 cells; past ``WINDOW`` tokens a side, a window of them moved by sliders (in the link)."""
    starts = (0, 0)
    if max(shown.matrix.shape) > WINDOW:
        st.caption(f"{shown.matrix.shape[0]} × {shown.matrix.shape[1]} tokens: showing a {WINDOW}-token window "
                   "(every token labelled where the page's width holds it, hover names each); move it with the sliders. The numbers are those of the whole sentence.")
        left, right = st.columns(2)
        with left:
            q0 = integer("First query shown", 0, max(shown.matrix.shape[0] - WINDOW, 0), "head_query_from", 0)
        with right:
            k0 = integer("First key shown", 0, max(shown.matrix.shape[1] - WINDOW, 0), "head_key_from", 0)
        shown, starts = window(shown, q0, k0, WINDOW), (q0, k0)
    z, colour_title = rescaled(shown.matrix, scale, quantity)
    return cache.figure(attention_heatmap, z, shown.query_labels, shown.key_labels, title=title, starts=starts,
                        threshold=threshold if scale == "linear" else 0.0, colorbar_title=colour_title,
                        hover=f"query %{{y}}<br>key %{{x}}<br>{colour_title} %{{z:.4f}}<extra></extra>",
                        zrange=log_range(shown.matrix) if scale == "log" else None, dark=dark())


def levels(result: AttentionResult, shown: Displayed, scale: str, threshold: float, quantity: str,
           title: str) -> tuple[LongHeatmap, str, str]:
    """The long head view's way (analysis/head_levels.py): uint8 levels with one scale, query and key
    ranges (in the link, and a box dragged on the levels) down to exact float cells. Every choice
    above (weighting, special tokens, words, threshold, colours) is already in ``shown`` or applied
    here. The heatmap, its title and what its colours show."""
    n_queries, n_keys = shown.matrix.shape
    long_head.whole_for_a_new_text((result.model, hash(result.tokens.text), shown.matrix.shape))
    rows, cols = long_head.zoom(n_queries, n_keys)
    z, colour_title = rescaled(shown.matrix, scale, quantity) if scale == "row" else (shown.matrix, quantity)
    heatmap = captured_heatmap(z, rows, cols, "log" if scale == "log" else "linear",
                               threshold if scale == "linear" else 0.0, LOG_FLOOR)
    if (len(rows), len(cols)) != (n_queries, n_keys):
        title += f": queries {rows.start}–{rows.stop - 1}, keys {cols.start}–{cols.stop - 1}"
    if heatmap.is_exact:
        st.caption(f"{len(rows)} × {len(cols)} of {n_queries} × {n_keys} tokens: every cell is its exact value "
                   "(hover shows it).")
    else:
        tiles = (f"; each square is a tile of {heatmap.tile_rows}×{heatmap.tile_cols} tokens showing its largest "
                 "value" if heatmap.tile_rows * heatmap.tile_cols > 1 else "")
        st.caption(f"{n_queries} × {n_keys} tokens: each cell is sent as a level from 0 to 255, not its exact value "
                   f"(the colour bar reads levels as values; hover gives a cell's level and the range it stands "
                   f"for){tiles}. Narrow the ranges to {LEVELS_ABOVE:,} cells or fewer (e.g. 256 × 256) for exact "
                   "values.")
    return heatmap, title, colour_title
