"""Compare: two heads side by side, two sentences side by side with their difference, and the
coreference preset ("it" → "animal" with "tired", → "street" with "wide")."""

from __future__ import annotations

import streamlit as st

from ...analysis import difference
from ...analysis.coreference import coreference
from ...errors import ModelError
from ...figures.heatmap import attention_heatmap
from ...names import ENCODER_SELF
from ...result import AttentionResult
from ...selection import Choice, displayed, merged_labels, misalignment
from .. import cache, plain
from ..controls import attention_picker, layer_head_picker, pair_scale
from ..tables import head_table
from ..inputs import EXAMPLES, MAX_TEXT
from ..widgets import choice, text
from ..export import chart

TIRED = EXAMPLES["Coreference — tired (it → animal)"]
WIDE = EXAMPLES["Coreference — wide (it → street)"]
MODES = ("heads", "sentences", "coreference")
MODE_NAMES = {"heads": "two heads", "sentences": "two sentences", "coreference": "coreference preset"}


def render(result: AttentionResult) -> None:
    mode = choice("Compare", MODES, "compare_mode", widget="radio", format_func=MODE_NAMES.get, horizontal=True)
    if mode == "heads":
        two_heads(result)
    elif mode == "sentences":
        two_sentences(result, text("Second sentence", "compare_text_b", WIDE, max_chars=MAX_TEXT))
    else:
        coreference_preset(result.model)


def two_heads(result: AttentionResult) -> None:
    group = attention_picker(result, key="compare_group")
    columns = st.columns(2)
    last = result.n_layers(*group) - 1
    shown = []
    for column, side, start in zip(columns, "ab", (0, last)):  # start on two different heads
        with column:
            layer, head = layer_head_picker(result, group, key=f"compare_{side}", layer=start)
            shown.append((side, layer, head, displayed(result, Choice(group, layer, head))))
    top = pair_scale("compare_separate", *(s.matrix for *_, s in shown))
    for column, (side, layer, head, one) in zip(columns, shown):
        chart(column, attention_heatmap(one.matrix, one.query_labels, one.key_labels, zmax=top,
                                              title=f"layer {layer}, head {head}"), key=f"compare_chart_{side}")


def two_sentences(result: AttentionResult, text_b: str) -> None:
    if not text_b.strip():
        st.info("Type a second sentence to compare.")
        return
    try:
        other = cache.run(result.model, text_b, None)
    except ModelError as error:
        plain.error(error)
        return
    group = attention_picker(result, key="compare_pair_group")
    layer, head = layer_head_picker(result, group, key="compare_pair")
    a, b = displayed(result, Choice(group, layer, head)), displayed(other, Choice(group, layer, head))
    top = pair_scale("compare_separate", a.matrix, b.matrix)
    left, right = st.columns(2)
    chart(left, attention_heatmap(a.matrix, a.query_labels, a.key_labels, title="sentence A", zmax=top),
                      key="compare_pair_a")
    chart(right, attention_heatmap(b.matrix, b.query_labels, b.key_labels, title="sentence B", zmax=top),
                       key="compare_pair_b")
    reason = misalignment(a.query_labels, b.query_labels) or misalignment(a.key_labels, b.key_labels)
    if reason is not None:
        st.info(reason)
        return
    chart(st, 
        attention_heatmap(difference(a.matrix, b.matrix), merged_labels(a.query_labels, b.query_labels),
                          merged_labels(a.key_labels, b.key_labels), diverging=True,
                          title="A − B (red: A attends more)", colorbar_title="A − B"),
        key="compare_pair_diff",
    )


def coreference_preset(model: str) -> None:
    """Find the heads where "it" attends most to "animal" (tired), then see them with "wide"."""
    tired, wide = cache.run(model, TIRED, None), cache.run(model, WIDE, None)
    if ENCODER_SELF not in tired.attentions():
        st.info("The coreference preset reads an encoder's self-attention; pick an encoder model such as minilm.")
        return
    labels = list(tired.tokens.labels)
    found = coreference(tired.stack("pattern"), wide.stack("pattern"), labels)
    if found is None:
        st.info("This model's tokenizer splits “it”, “animal” or “street” into pieces, so the preset cannot "
                "point at them; minilm keeps them whole.")
        return
    st.markdown(f"**{TIRED}** vs **{WIDE}** — the heads where *it* attends most to *animal* with *tired* "
                "(click a row to see that head):")
    layer, head = head_table(found.rows, "coref_table") or (found.layer, found.head)
    rows = {name: run.pattern(ENCODER_SELF, layer)[head, found.it][None, :] for name, run in
            (("tired", tired), ("wide", wide))}  # "it"'s row in that head, in each sentence
    top = pair_scale("compare_separate", *rows.values())
    for column, (name, row), run in zip(st.columns(2), rows.items(), (tired, wide)):
        chart(column, attention_heatmap(row, ["it"], list(run.tokens.labels), zmax=top, starts=(found.it, 0),
                                        title=f"“it” with {name}: layer {layer}, head {head}"), key=f"coref_{name}")
