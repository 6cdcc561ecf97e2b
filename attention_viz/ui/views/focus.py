"""Token focus: pick a query token (e.g. "it") and a key token: which heads link them, and the
query's attention row in one head drawn over the sentence."""

from __future__ import annotations

import streamlit as st

from ...analysis import focus_matrix
from ...figures.focus import focus_heatmap, highlighted_text
from ...result import AttentionResult
from ...selection import group_tokens
from ..controls import attention_picker, layer_head_picker


def _token_choice(label: str, labels: list[str], default: int, key: str) -> int:
    if key not in st.session_state or st.session_state[key] >= len(labels):
        st.session_state[key] = default
    return st.selectbox(label, range(len(labels)), format_func=lambda i: f"{i}: {labels[i]}", key=key)


def _default(labels: list[str], wanted: str, fallback: int) -> int:
    lowered = [label.lower() for label in labels]
    return lowered.index(wanted) if wanted in lowered else fallback


def render(result: AttentionResult) -> dict:
    group = attention_picker(result, key="focus_group")
    query_tokens, key_tokens = group_tokens(result, group)
    queries, keys = list(query_tokens.labels), list(key_tokens.labels)
    left, right = st.columns(2)
    with left:
        q = _token_choice("Query token (attending)", queries, _default(queries, "it", min(1, len(queries) - 1)),
                          "focus_query")
    with right:
        k = _token_choice("Key token (attended to)", keys, _default(keys, "animal", 0), "focus_key")
    stack = result.stack("pattern", *group)
    st.plotly_chart(focus_heatmap(focus_matrix(stack, q, k), queries[q], keys[k]), key="focus_chart")

    st.subheader(f"The attention row of “{queries[q]}” in one head")
    layer, head = layer_head_picker(result, group, key="focus", reductions=False)
    st.html(highlighted_text(keys, stack[layer, head, q], q if group[1] == "self_attn" else None))
    return {"layer": layer, "head": head}
