"""All heads at a glance: the layers × heads grid, one head enlarged, and per-head statistics."""

from __future__ import annotations

import streamlit as st

from ...analysis import head_stats
from ...figures.grid import heads_grid
from ...figures.heatmap import attention_heatmap
from ...result import AttentionResult
from ...selection import group_tokens
from ..controls import attention_picker, layer_head_picker
from ..export import figure_downloads


def render(result: AttentionResult) -> dict:
    group = attention_picker(result, key="grid_group")
    stack = result.stack("pattern", *group)  # [layers, heads, q, k]
    query_tokens, key_tokens = group_tokens(result, group)
    grid = heads_grid(stack, title="every head (rows: layers, columns: heads)")
    st.plotly_chart(grid, key="grid_chart", config={"displaylogo": False})
    figure_downloads(grid, "attention-all-heads", key="grid")

    st.subheader("Enlarge one head")
    layer, head = layer_head_picker(result, group, key="grid", reductions=False)
    enlarged = attention_heatmap(stack[layer, head], list(query_tokens.labels), list(key_tokens.labels),
                                 title=f"layer {layer}, head {head}")
    st.plotly_chart(enlarged, key="grid_enlarged", config={"displaylogo": False})

    st.subheader("Per-head statistics and roles")
    if group == ("decoder", "cross_attn"):
        st.caption("Position-based statistics compare target and source positions, which are not aligned.")
    st.dataframe(head_stats(stack, list(key_tokens.special)), key="grid_stats", hide_index=True,
                 on_select="ignore")
    return {"layer": layer, "head": head}
