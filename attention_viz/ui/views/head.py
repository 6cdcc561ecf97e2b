"""Head heatmap: one layer and head (or the mean / max over heads) of any attention."""

from __future__ import annotations

import streamlit as st

from ...figures.heatmap import attention_heatmap
from ...names import ENCODER_SELF
from ...result import AttentionResult
from ...selection import COLOUR_SCALES, Choice, displayed, log_range, rescaled, window
from .. import cache
from . import long_head
from ..controls import attention_picker, layer_head_picker, weigh, weighting_picker
from ..export import chart, figure_downloads
from ..widgets import choice, flag, integer, number

WINDOW = 64  # tokens per side drawn at once: every tick labelled, cells large enough to read
SCALE_NAMES = {"linear": "linear", "row": "per row", "log": "log"}


def render(result: AttentionResult) -> None:
    if long_head.applies(result):  # past the capture limit: the whole text, patterns rebuilt blockwise
        long_head.render(result)
        return
    group = attention_picker(result, key="head_group")
    weighed = weigh(result, weighting_picker())
    start_layer, start_head = cache.landing_head(result) if group == ENCODER_SELF else (0, 0)
    layer, head = layer_head_picker(result, group, key="head", layer=start_layer, head=start_head)
    options = st.columns(3)
    with options[0]:
        hide_special = flag("Hide special tokens", "head_hide_special")
    with options[1]:
        words = flag("Word level", "head_words")
    with options[2]:
        threshold = number("Threshold", 0.0, 0.5, "head_threshold", 0.0, step=0.01)
    shown = displayed(weighed.result, Choice(group, layer, head, words, hide_special, threshold, weighed.kind))
    for note in shown.notes:
        st.caption(note)
    scale = choice("Colours", COLOUR_SCALES, "head_scale", widget="radio", horizontal=True,
                   format_func=SCALE_NAMES.get, help="Per row: each row's largest value is darkest, so long rows "
                   "stay visible. Log: small values are told apart.")
    starts = (0, 0)
    if max(shown.matrix.shape) > WINDOW:
        st.caption(f"{shown.matrix.shape[0]} × {shown.matrix.shape[1]} tokens: showing a {WINDOW}-token window "
                   "(every tick labelled); move it with the sliders. The numbers are those of the whole sentence.")
        left, right = st.columns(2)
        with left:
            q0 = integer("First query shown", 0, max(shown.matrix.shape[0] - WINDOW, 0), "head_query_from", 0)
        with right:
            k0 = integer("First key shown", 0, max(shown.matrix.shape[1] - WINDOW, 0), "head_key_from", 0)
        shown, starts = window(shown, q0, k0, WINDOW), (q0, k0)
    z, colour_title = rescaled(shown.matrix, scale, weighed.quantity)
    title = f"layer {layer}, {'head ' + str(head) if isinstance(head, int) else head + ' of heads'}{weighed.suffix}"
    figure = cache.figure(attention_heatmap, z, shown.query_labels, shown.key_labels, title=title, starts=starts,
                          threshold=threshold if scale == "linear" else 0.0, colorbar_title=colour_title,
                          hover=f"query %{{y}}<br>key %{{x}}<br>{colour_title} %{{z:.4f}}<extra></extra>",
                          zrange=log_range(shown.matrix) if scale == "log" else None)
    chart(st, figure, key="head_chart", config={"displaylogo": False})
    figure_downloads(figure, "head_chart")
