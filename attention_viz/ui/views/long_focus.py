"""Token focus for a text longer than the capture limit: one query token's exact attention row in every
head of every layer, from the kept queries and keys (one row a head: about T · d_k work, never T²), so
which heads link the query to a key is read off the whole text. :mod:`.focus` hands over here as
:mod:`.head` hands over to :mod:`.long_head`."""

from __future__ import annotations

import numpy as np
import streamlit as st

from ...analysis.long_input import LongInput, query_rows
from ...core.result import AttentionResult
from ...figures.focus import focus_heatmap, highlighted_text
from .. import cache
from ..controls import layer_head_choice
from ..export import chart
from ..heavy import heavy
from ..plain import literal
from ..tables import clicked_tile, follow
from ..widgets import integer
from .long_head import read_whole

SHOWN_KEYS = 300  # keys drawn as text before the query (a row of 30,000 spans would be a page of its own)
TOP_KEYS = 10


@st.cache_resource(max_entries=16, show_spinner="Computing the query's row in every head…")
def rows_of(_long: LongInput, identity: tuple, query: int) -> np.ndarray:
    """(layers, heads, query + 1) weights; ``identity`` = (model, text) names ``_long``. Runs every layer
    the text has not run yet: heavy work."""
    with heavy("the query's row in every head"):
        return query_rows(_long, query)


def render(result: AttentionResult) -> None:
    render_whole(result.model, result.tokens.text)


def render_whole(model: str, text: str) -> None:
    """Token focus of a text past the model's capture limit, from the model's name and the text."""
    long = read_whole(model, text, "the query token's attention row is computed exactly in every head from the "
                      "kept queries and keys, never the whole table. Pick the two positions with the sliders.")
    n, labels = long.length, long.tokens.labels
    left, right = st.columns(2)
    with left:
        q = integer("Query position (attending)", 0, n - 1, "focus_long_query", n - 1)
        st.caption(f"Query token: “{literal(labels[q])}”")
    with right:
        k = integer("Key position (attended to)", 0, n - 1, "focus_long_key", 0)
        st.caption(f"Key token: “{literal(labels[k])}”")
    rows = rows_of(long, (model, text), q)
    if k > q:
        st.caption("The key comes after the query: a decoder never looks ahead, so every head gives it 0.")
    focus = rows[:, :, k] if k <= q else np.zeros(rows.shape[:2], dtype=np.float32)
    event = chart(st, cache.figure(focus_heatmap, focus, labels[q], labels[k], q, k, quantity="weight",
                                   zmax=max(float(rows.max()), 1e-6)),
                  key="focus_chart", on_select="rerun", selection_mode="points")
    follow(clicked_tile(event, long.n_heads), "focus_chart", "focus_layer", "focus_head")

    st.subheader(f"The attention row of “{literal(labels[q])}” in one head")
    layer, head = layer_head_choice(long.n_layers, long.n_heads, key="focus", reductions=False)
    row = rows[layer, head]
    top = np.argsort(-row, kind="stable")[:TOP_KEYS]
    st.dataframe({"key position": top.tolist(), "token": [labels[i] for i in top],
                  "weight": [round(float(row[i]), 4) for i in top]}, hide_index=True)  # fmt: skip
    first = max(0, q + 1 - SHOWN_KEYS)
    st.caption(f"Keys {first:,}–{q:,} (the {q + 1 - first:,} just before the query, itself outlined), shaded by weight:")
    st.html(highlighted_text(labels[first : q + 1], row[first:], q - first))
