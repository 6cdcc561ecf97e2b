"""Token focus: pick a query token (e.g. "it") and a key token: which heads link them, and the
query's attention row in one head drawn over the sentence."""

from __future__ import annotations

import streamlit as st

from ...analysis import focus_matrix
from ...analysis.focus import query_top
from ...analysis.weighting import WEIGHTING_NAMES
from ...figures.focus import focus_heatmap, highlighted_text
from ...core.names import CROSS
from ...core.result import AttentionResult
from ...analysis.selection import default_token, group_tokens
from ..controls import attention_picker, layer_head_picker, token_picker, weigh, weighting_picker
from ..plain import literal
from ..tables import clicked_tile, follow
from .. import cache
from ..export import chart
from . import long_focus, long_head


def render(result: AttentionResult) -> None:
    if long_head.applies(result):  # past the capture limit: the query's row in every head, from the whole text
        long_focus.render(result)
        return
    group = attention_picker(result, key="focus_group")
    weighed = weigh(result, weighting_picker(), group=group)
    query_tokens, key_tokens = group_tokens(result, group)
    queries, keys = list(query_tokens.labels), list(key_tokens.labels)
    left, right = st.columns(2)
    with left:
        q = token_picker("Query token (attending)", queries, "focus_query",
                         default_token(queries, "it", min(1, len(queries) - 1)))
    with right:
        k = token_picker("Key token (attended to)", keys, "focus_key", default_token(keys, "animal", 0))
    stack = weighed.stack(group)
    event = chart(st, cache.figure(focus_heatmap, focus_matrix(stack, q, k), queries[q], keys[k], q, k,
                                   quantity=weighed.quantity, zmax=query_top(stack, q)),
                  key="focus_chart", on_select="rerun", selection_mode="points")
    follow(clicked_tile(event, stack.shape[1]), "focus_chart", "focus_layer", "focus_head")

    what = "attention row" if weighed.weighting == "weights" else WEIGHTING_NAMES[weighed.weighting]
    st.subheader(f"The {what} of “{literal(queries[q])}” in one head")
    layer, head = layer_head_picker(result, group, key="focus", reductions=False)
    st.html(highlighted_text(keys, stack[layer, head, q], None if group == CROSS else q))
