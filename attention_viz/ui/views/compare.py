"""Compare: two heads side by side, two sentences side by side with their difference, and the
coreference preset ("it" → "animal" with "tired", → "street" with "wide")."""

from __future__ import annotations

import numpy as np
import streamlit as st

from ...analysis import difference, top_heads
from ...figures.heatmap import attention_heatmap
from ...result import AttentionResult
from ...selection import Choice, displayed
from .. import cache
from ..controls import attention_picker, layer_head_picker
from ..inputs import EXAMPLES

TIRED = EXAMPLES["Coreference — tired (it → animal)"]
WIDE = EXAMPLES["Coreference — wide (it → street)"]


def render(result: AttentionResult) -> dict:
    mode = st.radio("Compare", ["two heads", "two sentences", "coreference preset"], key="compare_mode",
                    horizontal=True)
    if mode == "two heads":
        return two_heads(result)
    if mode == "two sentences":
        two_sentences(result, st.text_input("Second sentence", value=WIDE, key="compare_text_b"))
    else:
        coreference(result.model)
    return {}


def two_heads(result: AttentionResult) -> dict:
    group = attention_picker(result, key="compare_group")
    left, right = st.columns(2)
    chosen = {}
    st.session_state.setdefault("compare_b_layer", result.n_layers(*group) - 1)  # start on two different heads
    for column, side in ((left, "a"), (right, "b")):
        with column:
            layer, head = layer_head_picker(result, group, key=f"compare_{side}")
            shown = displayed(result, Choice(group, layer, head))
            st.plotly_chart(attention_heatmap(shown.matrix, shown.query_labels, shown.key_labels,
                                              title=f"layer {layer}, head {head}"), key=f"compare_chart_{side}")
            chosen.setdefault("layer", layer)
            chosen.setdefault("head", head)
    return chosen


def two_sentences(result: AttentionResult, text_b: str) -> None:
    if not text_b.strip():
        st.info("Type a second sentence to compare.")
        return
    other = cache.run(result.model, text_b, None)
    group = attention_picker(result, key="compare2_group")
    layer, head = layer_head_picker(result, group, key="compare2")
    a, b = displayed(result, Choice(group, layer, head)), displayed(other, Choice(group, layer, head))
    left, right = st.columns(2)
    left.plotly_chart(attention_heatmap(a.matrix, a.query_labels, a.key_labels, title="sentence A"),
                      key="compare2_a")
    right.plotly_chart(attention_heatmap(b.matrix, b.query_labels, b.key_labels, title="sentence B"),
                       key="compare2_b")
    if a.matrix.shape != b.matrix.shape:
        st.info(f"The sentences have {len(a.key_labels)} and {len(b.key_labels)} tokens: a cell-by-cell "
                "difference needs the same number of tokens.")
        return
    labels_a = [x if x == y else f"{x}/{y}" for x, y in zip(a.query_labels, b.query_labels)]
    keys_a = [x if x == y else f"{x}/{y}" for x, y in zip(a.key_labels, b.key_labels)]
    st.plotly_chart(
        attention_heatmap(difference(a.matrix, b.matrix), labels_a, keys_a, diverging=True,
                          title="A − B (red: A attends more)", colorbar_title="A − B"),
        key="compare2_diff",
    )


def coreference(model: str) -> None:
    """Find the heads where "it" attends most to "animal" (tired), then see them with "wide"."""
    tired, wide = cache.run(model, TIRED, None), cache.run(model, WIDE, None)
    if tired.attentions() != [("encoder", "self_attn")]:
        st.info("The coreference preset runs on encoder models such as minilm.")
        return
    labels = list(tired.tokens.labels)
    it, animal, street = labels.index("it"), labels.index("animal"), labels.index("street")
    stack_t, stack_w = tired.stack("pattern"), wide.stack("pattern")
    st.markdown(f"**{TIRED}** vs **{WIDE}** — the heads where *it* attends most to *animal* with *tired*:")
    rows = []
    for layer, head, weight in top_heads(stack_t, it, animal, n=5):
        rows.append({
            "layer": layer, "head": head,
            "tired: it→animal": round(weight, 3), "tired: it→street": round(float(stack_t[layer, head, it, street]), 3),
            "wide: it→animal": round(float(stack_w[layer, head, it, animal]), 3),
            "wide: it→street": round(float(stack_w[layer, head, it, street]), 3),
        })
    st.dataframe(rows, hide_index=True, key="coref_table")
    best_layer, best_head = rows[0]["layer"], rows[0]["head"]
    left, right = st.columns(2)
    for column, result, name in ((left, tired, "tired"), (right, wide, "wide")):
        row = result.stack("pattern")[best_layer, best_head, it][None, :]
        column.plotly_chart(
            attention_heatmap(row.astype(np.float32), ["it"], list(result.tokens.labels),
                              title=f"“it” with {name}: layer {best_layer}, head {best_head}"),
            key=f"coref_{name}",
        )
