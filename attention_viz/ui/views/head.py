"""Head heatmap: one layer and head (or the mean / max over heads) of any attention."""

from __future__ import annotations

import streamlit as st

from ...figures.heatmap import attention_heatmap
from ...names import ENCODER_SELF
from ...result import AttentionResult
from ...selection import Choice, displayed
from .. import cache
from ..controls import attention_picker, layer_head_picker
from ..export import chart, figure_downloads
from ..widgets import flag, number


def render(result: AttentionResult) -> None:
    group = attention_picker(result, key="head_group")
    start_layer, start_head = cache.landing_head(result) if group == ENCODER_SELF else (0, 0)
    layer, head = layer_head_picker(result, group, key="head", layer=start_layer, head=start_head)
    options = st.columns(3)
    with options[0]:
        hide_special = flag("Hide special tokens", "head_hide_special")
    with options[1]:
        words = flag("Word level", "head_words")
    with options[2]:
        threshold = number("Threshold", 0.0, 0.5, "head_threshold", 0.0, step=0.01)
    shown = displayed(result, Choice(group, layer, head, words, hide_special, threshold))
    for note in shown.notes:
        st.caption(note)
    title = f"layer {layer}, {'head ' + str(head) if isinstance(head, int) else head + ' of heads'}"
    figure = attention_heatmap(shown.matrix, shown.query_labels, shown.key_labels, title=title,
                               threshold=threshold)
    chart(st, figure, key="head_chart", config={"displaylogo": False})
    figure_downloads(figure, "head_chart")
