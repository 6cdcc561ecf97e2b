"""Shared view controls: which attention, layer and head. Each returns the user's choice."""

from __future__ import annotations

import streamlit as st

from ..result import AttentionResult
from ..selection import GROUP_NAMES, REDUCTIONS, Group
from .state import url_int


def attention_picker(result: AttentionResult, key: str) -> Group:
    groups = result.attentions()
    if len(groups) == 1:
        return groups[0]
    return st.radio("Attention", groups, format_func=GROUP_NAMES.get, key=key, horizontal=True)


def layer_head_picker(result: AttentionResult, group: Group, key: str, reductions: bool = True) -> tuple[int, int | str]:
    """Layer slider and head choice; the first picker of a session takes its values from the URL."""
    n_layers = result.n_layers(*group)
    n_heads = result.arrays[f"{group[0]}.layers.0.{group[1]}.pattern"].shape[0]
    layer_key, head_key = f"{key}_layer", f"{key}_head"
    if layer_key not in st.session_state:
        st.session_state[layer_key] = url_int("layer", 0, n_layers)
    if head_key not in st.session_state:
        st.session_state[head_key] = url_int("head", 0, n_heads)
    st.session_state[layer_key] = min(st.session_state[layer_key], n_layers - 1)
    options: list[int | str] = list(range(n_heads)) + (list(REDUCTIONS) if reductions else [])
    if st.session_state[head_key] not in options:
        st.session_state[head_key] = 0
    left, right = st.columns(2)
    with left:
        layer = st.slider("Layer", 0, n_layers - 1, key=layer_key) if n_layers > 1 else 0
    with right:
        head = st.select_slider(
            "Head", options, key=head_key,
            format_func=lambda h: {"mean": "mean of heads", "max": "max of heads"}.get(h, str(h)),
        )
    return layer, head
