"""All heads of a text longer than the capture limit: every head's thumbnail from its blockwise pass
over the whole input (the passes the head view uses, cached and shared), one head enlarged.
:mod:`.grid` hands over here as :mod:`.head` hands over to :mod:`.long_head`."""

from __future__ import annotations

import streamlit as st

from ...analysis.blockwise import POOLINGS
from ...analysis.long_input import long_heatmap, thumbnails
from ...figures.grid import THUMB, heads_grid
from ...core.result import AttentionResult
from .. import cache
from ..controls import layer_head_choice
from ..export import chart, figure_downloads
from ..heavy import heavy
from ..level_canvas import long_heatmap_chart
from ..tables import clicked_tile, follow
from ..widgets import choice
from .long_head import POOLING_NAMES, head_overview, long_input


def render(result: AttentionResult) -> None:
    render_whole(result.model, result.tokens.text)


def render_whole(model: str, text: str) -> None:
    """The grid of a text past the model's capture limit, from the model's name and the text."""
    long = long_input(model, text)
    n, layers, heads = long.length, long.n_layers, long.n_heads
    st.info(
        f"This text has {n:,} tokens, more than the {cache.backend(model).max_tokens:,} the other views capture. "
        f"Each thumbnail comes from one pass over its head's whole pattern, block by block ({layers * heads} passes, "
        "kept for the head view too); never the whole table at once."
    )
    pooling = choice("Each tile shows", POOLINGS, "grid_long_pooling", widget="radio", horizontal=True,
                     format_func=POOLING_NAMES.get)
    identity = (model, text)
    with heavy("every head's pass over the long text"):
        long.read_every_head(means=pooling == "mean")
        overviews = [[head_overview(long, identity, layer, head, pooling == "mean")
                      for head in range(heads)] for layer in range(layers)]
    stack = thumbnails(overviews, THUMB, pooling)
    kv_heads = len(long.kept.layer(0)[1])  # layer 0's keys: one per K/V head
    grid = heads_grid(stack, title=f"every head, {pooling}-pooled over {n:,} tokens (rows: layers, columns: heads) "
                      "— click one to enlarge it", quantity=f"{pooling} weight", kv_heads=kv_heads)
    event = chart(st, grid, key="grid_chart", on_select="rerun", selection_mode="points")
    figure_downloads(grid, "grid_chart")
    follow(clicked_tile(event, heads), "grid_chart", "grid_layer", "grid_head")

    st.subheader("Enlarge one head")
    layer, head = layer_head_choice(layers, heads, key="grid", reductions=False)
    everything = range(n)
    heatmap = long_heatmap(long, layer, head, overviews[layer][head], everything, everything, pooling, colours="log")
    long_heatmap_chart(heatmap, long.tokens.labels, f"layer {layer}, head {head}", "grid_enlarged")
    st.caption(f"Each square is a tile of {heatmap.tile_rows}×{heatmap.tile_cols} tokens ({pooling} pooling, log "
               "scale). The Head view zooms into any region of this head, down to exact cells.")
