"""Compare: two heads side by side, two sentences side by side with their difference, and the
coreference preset ("it" → "animal" with "tired", → "street" with "wide")."""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from ...analysis import difference
from ...analysis.coreference import coreference
from ...analysis.weighting import WEIGHTING_NAMES, Weighted
from ...errors import ModelError
from ...figures.heatmap import attention_heatmap
from ...core.names import ENCODER_SELF
from ...core.result import AttentionResult
from ...analysis.selection import Choice, Displayed, displayed, merged_labels, misalignment
from .. import cache, plain
from ..controls import attention_picker, for_group, layer_head_picker, pair_scale, weigh, weighting_picker
from ..tables import head_table
from ..inputs import EXAMPLES, MAX_TEXT
from ..widgets import choice, text
from ..export import chart, drawn_from

TIRED = EXAMPLES["Coreference — tired (it → animal)"]
WIDE = EXAMPLES["Coreference — wide (it → street)"]
MODES = ("heads", "sentences", "coreference")
MODE_NAMES = {"heads": "two heads", "sentences": "two sentences", "coreference": "coreference preset"}


def render(result: AttentionResult) -> None:
    mode = choice("Compare", MODES, "compare_mode", widget="radio", format_func=MODE_NAMES.get, horizontal=True)
    weighting = weighting_picker()
    if mode == "heads":
        two_heads(weigh(result, weighting))
    elif mode == "sentences":
        two_sentences(weigh(result, weighting), text("Second sentence", "compare_text_b", WIDE, max_chars=MAX_TEXT))
    else:
        coreference_preset(result.model, weighting)


def heatmap(shown: Displayed, weighed: Weighted, title: str, top: float | None) -> go.Figure:
    """One of a pair: ``top`` is the pair's shared colour range; the title and colour bar name the weighting."""
    return attention_heatmap(shown.matrix, shown.query_labels, shown.key_labels, zmax=top,
                             title=f"{title}{weighed.suffix}", colorbar_title=weighed.quantity,
                             hover=f"query %{{y}}<br>key %{{x}}<br>{weighed.quantity} %{{z:.4f}}<extra></extra>")


def two_heads(weighed: Weighted) -> None:
    result = weighed.result
    group = attention_picker(result, key="compare_group")
    weighed = for_group(weighed, group)
    columns = st.columns(2)
    last = result.n_layers(*group) - 1
    shown = []
    for column, side, start in zip(columns, "ab", (0, last)):  # start on two different heads
        with column:
            layer, head = layer_head_picker(result, group, key=f"compare_{side}", layer=start)
            shown.append((side, layer, head, displayed(result, Choice(group, layer, head, kind=weighed.kind))))
    top = pair_scale("compare_separate", *(s.matrix for *_, s in shown))
    for column, (side, layer, head, one) in zip(columns, shown):
        chart(column, heatmap(one, weighed, f"layer {layer}, head {head}", top), key=f"compare_chart_{side}")


def two_sentences(weighed: Weighted, text_b: str) -> None:
    result = weighed.result
    if not text_b.strip():
        st.info("Type a second sentence to compare.")
        return
    try:
        other = weigh(cache.run(result.model, text_b, None), weighed.weighting, quiet=True).result
    except ModelError as error:
        plain.error(error)
        return
    group = attention_picker(result, key="compare_pair_group")
    weighed = for_group(weighed, group)
    layer, head = layer_head_picker(result, group, key="compare_pair")
    picked = Choice(group, layer, head, kind=weighed.kind)
    a, b = displayed(result, picked), displayed(other, picked)
    top = pair_scale("compare_separate", a.matrix, b.matrix)
    left, right = st.columns(2)
    chart(left, heatmap(a, weighed, "sentence A", top), key="compare_pair_a")
    with drawn_from(other.provenance):
        chart(right, heatmap(b, weighed, "sentence B", top), key="compare_pair_b")
    reason = misalignment(a.query_labels, b.query_labels) or misalignment(a.key_labels, b.key_labels)
    if reason is not None:
        st.info(reason)
        return
    chart(st, 
        attention_heatmap(difference(a.matrix, b.matrix), merged_labels(a.query_labels, b.query_labels),
                          merged_labels(a.key_labels, b.key_labels), diverging=True,
                          title=f"A − B (red: A attends more){weighed.suffix}", colorbar_title="A − B"),
        key="compare_pair_diff",
    )


def coreference_preset(model: str, weighting: str) -> None:
    """Find the heads where "it" attends most to "animal" (tired), then see them with "wide"."""
    tired = weigh(cache.run(model, TIRED, None), weighting)
    wide = weigh(cache.run(model, WIDE, None), weighting, quiet=True)
    if ENCODER_SELF not in tired.result.attentions():
        st.info("The coreference preset reads an encoder's self-attention; pick an encoder model such as minilm.")
        return
    labels = list(tired.result.tokens.labels)
    found = coreference(tired.stack(ENCODER_SELF), wide.stack(ENCODER_SELF), labels)
    if found is None:
        st.info("This model's tokenizer splits “it”, “animal” or “street” into pieces, so the preset cannot "
                "point at them; minilm keeps them whole.")
        return
    st.markdown(f"**{TIRED}** vs **{WIDE}** — the heads where *it* attends most to *animal* with *tired* "
                f"(by {WEIGHTING_NAMES[tired.weighting]}; click a row to see that head):")
    layer, head = head_table(found.rows, "coref_table") or (found.layer, found.head)
    rows = {name: run.layer(ENCODER_SELF, layer)[head, found.it][None, :] for name, run in
            (("tired", tired), ("wide", wide))}  # "it"'s row in that head, in each sentence
    top = pair_scale("compare_separate", *rows.values())
    for column, (name, row), run in zip(st.columns(2), rows.items(), (tired, wide)):
        with drawn_from(run.result.provenance):  # the preset's sentences, not the sidebar's
            chart(column, cache.figure(attention_heatmap,
                                       row, ["it"], list(run.result.tokens.labels), zmax=top, starts=(found.it, 0),
                                       title=f"“it” with {name}: layer {layer}, head {head}{run.suffix}",
                                       colorbar_title=run.quantity), key=f"coref_{name}")
