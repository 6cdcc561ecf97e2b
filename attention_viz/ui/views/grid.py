"""All heads at a glance: the layers × heads grid, one head enlarged, and per-head statistics."""

from __future__ import annotations

import streamlit as st

from ...figures.grid import heads_grid
from ...analysis.head_levels import captured_heatmap, needs_levels
from ...figures.heatmap import attention_heatmap
from ...core.names import CROSS
from ...core.result import AttentionResult
from ...analysis.selection import group_tokens
from ...analysis.selection import head_table as table_of  # the rows; ..tables draws them
from .. import cache
from ..controls import attention_picker, layer_head_picker, weigh, weighting_picker, where_title
from ..tables import clicked_tile, follow, head_table
from ..export import chart, figure_downloads
from ..theme import dark
from ..level_canvas import long_heatmap_chart
from . import long_grid, long_head


def render(result: AttentionResult) -> None:
    if long_head.applies(result):  # past the capture limit: every head's pass over the whole text
        long_grid.render(result)
        return
    group = attention_picker(result, key="grid_group")
    weighed = weigh(result, weighting_picker(), group=group)
    stack = weighed.stack(group)  # [layers, heads, q, k]
    query_tokens, key_tokens = group_tokens(result, group)
    kv_heads = result.kv_heads(group)
    grid = cache.figure(heads_grid, stack, kv_heads=kv_heads, quantity=weighed.quantity,
                        title=f"every head (rows: layers, columns: heads){weighed.suffix} — click one to enlarge it")
    if kv_heads is not None and kv_heads < stack.shape[1]:
        st.caption(f"Grouped-query attention: {stack.shape[1]} query heads share {kv_heads} key/value heads, "
                   f"{stack.shape[1] // kv_heads} per dashed frame (“kv” under each head names its K/V head).")
    event = chart(st, grid, key="grid_chart", on_select="rerun", selection_mode="points")
    figure_downloads(grid, "grid_chart")
    follow(clicked_tile(event, stack.shape[1]), "grid_chart", "grid_layer", "grid_head")

    st.subheader("Per-head statistics and roles")
    if group == CROSS:
        st.caption("Cross-attention relates target positions to source positions of another sentence, so the "
                   "statistics that compare positions (previous token, self, next token, offsets) are left out.")
    if weighed.weighting != "weights":
        st.caption("The statistics are those of the attention weights (shares of each row), whatever the weighting.")
    st.caption("Click a row to enlarge that head below.")
    follow(head_table(table_of(result, group), "grid_stats"), "grid_stats", "grid_layer", "grid_head")

    st.subheader("Enlarge one head")
    layer, head = layer_head_picker(result, group, key="grid", reductions=False)
    pattern, title = stack[layer, head], where_title(layer, head, weighed.layer_level) + weighed.suffix
    if needs_levels(pattern.shape):  # as the head view: uint8 levels rather than float32
        whole = captured_heatmap(pattern, range(pattern.shape[0]), range(pattern.shape[1]))
        long_heatmap_chart(whole, list(query_tokens.labels), title, "grid_enlarged",
                           key_labels=list(key_tokens.labels), quantity=weighed.quantity)
        st.caption("Each cell is sent as a level from 0 to 255, not its exact value (hover gives its level and the "
                   "range it stands for). The Head view zooms into any region of this head, down to exact values.")
        return
    enlarged = cache.figure(attention_heatmap, pattern, list(query_tokens.labels), list(key_tokens.labels),
                            title=title, colorbar_title=weighed.quantity, dark=dark(),
                            hover=f"query %{{y}}<br>key %{{x}}<br>{weighed.quantity} %{{z:.4f}}<extra></extra>")
    chart(st, enlarged, key="grid_enlarged")
