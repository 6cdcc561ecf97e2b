"""Across layers for a text longer than the capture limit: one token's row in every layer (mean of
heads) and its attention rollout over the whole text, from the kept queries and keys — the row's cells
exactly, the rollout by one blockwise pass a head over the rows the token reaches, never a T × T
array. :mod:`.layers` hands over here as :mod:`.head` hands over to :mod:`.long_head`."""

from __future__ import annotations

import numpy as np
import streamlit as st

from ...analysis.long_input import LongInput, pooled_keys, token_rollout
from ...core.result import AttentionResult
from ...figures.heatmap import attention_heatmap
from .. import cache
from ..export import chart
from ..heavy import heavy
from ..plain import literal
from ..theme import dark
from ..widgets import integer
from .long_focus import rows_of
from .long_head import read_whole

COLUMNS = 512  # keys drawn per row: past that, each column is the largest value of a run of keys
TOP_KEYS = 10


@st.cache_resource(max_entries=16, show_spinner="Rolling the token's attention out through the layers…")
def rollout_of(_long: LongInput, identity: tuple, query: int) -> np.ndarray:
    """(query + 1,) rollout shares; ``identity`` = (model, text) names ``_long``. A pass over every head's
    rows up to the query: heavy work."""
    with heavy("the token's rollout through every layer"):
        return token_rollout(_long, query)


def render(result: AttentionResult) -> None:
    render_whole(result.model, result.tokens.text)


def render_whole(model: str, text: str) -> None:
    """Across layers of a text past the model's capture limit, from the model's name and the text."""
    long = read_whole(model, text, "the token's row in every layer is computed exactly from the kept queries and "
                      "keys, and its rollout by one pass over each head's rows up to the token, block by block.")
    n, labels = long.length, long.tokens.labels
    q = integer("Token position", 0, n - 1, "layers_long_query", n - 1)
    st.caption(f"Token: “{literal(labels[q])}” (keys after it are never read: a decoder looks back only)")
    per_layer = rows_of(long, (model, text), q).mean(axis=1)  # (layers, q + 1)
    pooled, names = _columns(per_layer, labels)
    pooling = "" if pooled.shape[-1] == q + 1 else f", each column the largest of {_run(q + 1)} keys"
    chart(st, cache.figure(attention_heatmap, pooled, [f"layer {i}" for i in range(long.n_layers)], names,
                           title=f"“{labels[q]}” in every layer (mean of heads){pooling}", row_title="layer",
                           dark=dark()),
          key="layers_rows")

    st.subheader("Attention rollout")
    st.caption("Each layer's mean of heads plus the residual identity (½A + ½I), multiplied through the layers "
               "for this token's row: how much of each input token reaches it.")
    rolled = rollout_of(long, (model, text), q)
    pooled, names = _columns(rolled[None], labels)
    chart(st, cache.figure(attention_heatmap, pooled.astype(np.float32), ["rollout"], names,
                           title=f"rollout of “{labels[q]}” after the last layer{pooling}", row_title="",
                           dark=dark()),
          key="layers_rollout")
    top = np.argsort(-rolled, kind="stable")[:TOP_KEYS]
    st.dataframe({"key position": top.tolist(), "token": [labels[i] for i in top],
                  "share": [round(float(rolled[i]), 4) for i in top]}, hide_index=True)  # fmt: skip

    st.subheader("Attention flow")
    st.caption("Attention flow solves a maximum flow through every layer's T × T edges, which only short "
               "sentences afford (up to 23 tokens): for this text the rollout above stands in for it.")


def _run(keys: int) -> int:
    return -(-keys // COLUMNS)


def _columns(values: np.ndarray, labels: tuple[str, ...]) -> tuple[np.ndarray, list[str]]:
    """``values`` (rows, keys) as drawn: every key with its token, or runs of keys max-pooled to at most
    COLUMNS columns, each named by its positions."""
    keys = values.shape[-1]
    if keys <= COLUMNS:
        return values, list(labels[:keys])
    pooled, starts = pooled_keys(values, _run(keys))
    return pooled, [f"{a}–{min(a + _run(keys), keys) - 1}" for a in starts]
