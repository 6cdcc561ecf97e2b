"""Across layers: how attention composes through the stack — one token's row in every layer,
attention rollout and attention flow (Abnar & Zuidema 2020)."""

from __future__ import annotations

import streamlit as st

from ...analysis.composition import FlowShown, flow_for
from ...analysis.weighting import Weighted
from ...errors import ServerBusy
from ...figures.heatmap import attention_heatmap
from ...core.names import CROSS, Group
from ...core.result import AttentionResult
from ...analysis.selection import default_token, group_tokens
from .. import cache, plain
from ..controls import attention_picker, token_picker, weigh, weighting_picker
from ..plain import literal
from ..theme import dark
from ..export import chart
from ..heavy import heavy
from . import long_head, long_layers

HEAVY_FLOW_TOKENS = 32  # past a sentence's length, flow may take most of its time budget: a heavy job


@st.cache_resource(max_entries=32, show_spinner="Computing the attention flow…")
def flow_cached(_weighed: Weighted, run: tuple, weighting: str, group: Group, query: int) -> FlowShown:
    """Max-flow is the slow part of this page: once per (run, weighting, attention, token). ``run``
    names the result (:func:`..cache.identity`); the result itself is not hashed. Past
    ``HEAVY_FLOW_TOKENS`` it takes a slot of the server's heavy work (refused, not queued, when busy)."""
    shares = _weighed.shares(group)
    if shares.shape[-1] <= HEAVY_FLOW_TOKENS:
        return flow_for(shares, query)
    with heavy("the attention flow of this input"):
        return flow_for(shares, query)


def render(result: AttentionResult) -> None:
    if long_head.applies(result):  # past the capture limit: the token's rows and rollout over the whole text
        long_layers.render(result)
        return
    group = attention_picker(result, key="layers_group")
    weighed = weigh(result, weighting_picker(), group=group)
    if group == CROSS:
        st.info("Rollout and flow compose a token's attention to itself through the layers; "
                "choose a self-attention.")
        return
    labels = list(group_tokens(result, group)[0].labels)
    q = token_picker("Token", labels, "layers_query", default_token(labels, "it", 0))
    norms = weighed.weighting == "norms"
    per_layer, rolled = weighed.across_layers(group, q)
    chart(st, 
        attention_heatmap(per_layer, [f"layer {i}" for i in range(len(per_layer))], labels,
                          title=f"“{labels[q]}” in every layer (mean of heads){weighed.suffix}",
                          colorbar_title=weighed.quantity, row_title="layer",
                          hover=f"%{{y}}<br>key %{{x}}<br>{weighed.quantity} %{{z:.4f}}<extra></extra>", dark=dark()),
        key="layers_rows",
    )
    if norms:
        plain.caption("Rollout and flow below compose value-weighted shares: each row of norms divided by its sum.")

    st.subheader("Attention rollout")
    if weighed.layer_level:
        st.caption("Each layer's map multiplied through the layers as they are (the residual is already in "
                   "them): how much of each input token reaches each position.")
    else:
        st.caption("Each layer's mean of heads plus the residual identity (½A + ½I), rows renormalized, multiplied "
                   "through the layers: how much of each input token reaches each position.")
    chart(st, cache.figure(attention_heatmap,
                           rolled, labels, labels, title=f"rollout after the last layer{weighed.suffix}", dark=dark()),
                    key="layers_rollout")

    st.subheader("Attention flow")
    st.caption("The layers as a network of pipes with the same capacities: the maximum flow from each "
               "position to each input token.")
    try:
        flow = flow_cached(weighed, cache.identity(result), weighed.weighting, group, q)
    except ServerBusy as busy:
        plain.info(busy)
        return
    if flow.note:
        st.info(literal(flow.note))
    if flow.matrix is not None:
        rows = labels if flow.rows is None else [labels[i] for i in flow.rows]
        title = ("attention flow" if flow.rows is None else f"attention flow of “{labels[q]}”") + weighed.suffix
        chart(st, cache.figure(attention_heatmap, flow.matrix, rows, labels, title=title, dark=dark()),
                        key="layers_flow" if flow.rows is None else "layers_flow_row")
