"""Across layers: how attention composes through the stack — one token's row in every layer,
attention rollout and attention flow (Abnar & Zuidema 2020)."""

from __future__ import annotations

import numpy as np
import streamlit as st

from ...analysis import FlowTooLarge, attention_flow, rollout
from ...figures.heatmap import attention_heatmap
from ...result import AttentionResult
from ..controls import attention_picker


def render(result: AttentionResult) -> dict:
    group = attention_picker(result, key="layers_group")
    if group == ("decoder", "cross_attn"):
        st.info("Rollout and flow compose a token's attention to itself through the layers; "
                "choose a self-attention.")
        return {}
    stack = result.stack("pattern", *group)  # [layers, heads, q, k]
    labels = list(result.tokens.labels if group[0] == "encoder" or result.target_tokens is None
                  else result.target_tokens.labels)
    lowered = [label.lower() for label in labels]
    default = lowered.index("it") if "it" in lowered else 0
    st.session_state.setdefault("layers_query", default)
    if st.session_state["layers_query"] >= len(labels):
        st.session_state["layers_query"] = default
    q = st.selectbox("Token", range(len(labels)), format_func=lambda i: f"{i}: {labels[i]}", key="layers_query")

    per_layer = stack.mean(axis=1)[:, q, :]  # [layers, keys], heads averaged
    st.plotly_chart(
        attention_heatmap(per_layer, [f"layer {i}" for i in range(len(per_layer))], labels,
                          title=f"“{labels[q]}” in every layer (mean of heads)"),
        key="layers_rows",
    )

    st.subheader("Attention rollout")
    st.caption("Each layer's head mean plus the residual identity (½A + ½I), rows renormalized, multiplied "
               "through the layers: how much of each input token reaches each position.")
    rolled = rollout(stack)
    st.plotly_chart(attention_heatmap(rolled[-1], labels, labels, title="rollout after the last layer"),
                    key="layers_rollout")

    st.subheader("Attention flow")
    st.caption("The layers as a network of pipes with the same capacities: the maximum flow from each "
               "position to each input token.")
    try:
        flow = attention_flow(stack)
        st.plotly_chart(attention_heatmap(flow, labels, labels, title="attention flow"), key="layers_flow")
    except FlowTooLarge as too_large:
        try:
            row = attention_flow(stack, queries=[q])
            st.info(f"{too_large} Showing the flow of “{labels[q]}” only.")
            st.plotly_chart(attention_heatmap(np.asarray(row, dtype=np.float32).reshape(1, -1), [labels[q]], labels,
                                              title=f"attention flow of “{labels[q]}”"), key="layers_flow_row")
        except FlowTooLarge as still_too_large:
            st.info(f"Attention flow is not computed here: {still_too_large}")
    return {}
