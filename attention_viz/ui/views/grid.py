"""All heads at a glance: the layers × heads grid, one head enlarged, and per-head statistics."""

from __future__ import annotations

import streamlit as st

from ...figures.grid import heads_grid
from ...figures.heatmap import attention_heatmap
from ...names import CROSS
from ...result import AttentionResult
from ...selection import group_tokens, head_table
from ..controls import attention_picker, layer_head_picker
from ..export import figure_downloads


def render(result: AttentionResult) -> None:
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
    if group == CROSS:
        st.caption("Cross-attention relates target positions to source positions of another sentence, so the "
                   "statistics that compare positions (previous token, self, next token, offsets) are left out.")
    st.dataframe(head_table(result, group), key="grid_stats", hide_index=True, on_select="ignore")
