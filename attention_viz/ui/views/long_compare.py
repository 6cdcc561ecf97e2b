"""Compare for a text longer than the capture limit: two heads of the whole text side by side, each
drawn from its blockwise overview (the passes the head view uses, cached and shared with it), on the
one log colour scale every long heatmap has. :mod:`.compare` hands over here as :mod:`.head` hands over
to :mod:`.long_head`; comparing two sentences stays with texts the other views capture whole."""

from __future__ import annotations

import streamlit as st

from ...analysis.long_input import long_heatmap
from ...core.result import AttentionResult
from ..controls import layer_head_choice
from ..level_canvas import long_heatmap_chart
from .long_head import head_overview, read_whole


def render(result: AttentionResult) -> None:
    render_whole(result.model, result.tokens.text)


def render_whole(model: str, text: str) -> None:
    """Two heads of a text past the model's capture limit, from the model's name and the text."""
    long = read_whole(model, text, "two heads side by side, each from one pass over its whole pattern, block by "
                      "block, on one log colour scale. Comparing two sentences works on texts the other views "
                      "capture whole.")
    everything = range(long.length)
    for column, side, start in zip(st.columns(2), "ab", (0, long.n_layers - 1), strict=True):  # two heads to start
        with column:
            layer, head = layer_head_choice(long.n_layers, long.n_heads, key=f"compare_{side}", reductions=False,
                                            layer=start)
            whole = head_overview(long, (model, text), layer, head, False)
            heatmap = long_heatmap(long, layer, head, whole, everything, everything, "max", colours="log")
            long_heatmap_chart(heatmap, long.tokens.labels, f"layer {layer}, head {head}", f"compare_chart_{side}")
    st.caption(f"Each square is the largest weight of a tile of {heatmap.tile_rows}×{heatmap.tile_cols} tokens, "
               "both heads on the same log scale. The Head view zooms into any region of a head, down to exact "
               "cells.")
