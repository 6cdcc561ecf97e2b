"""Encoder–decoder: translation with the demo models. The source × target cross-attention (the
alignment figure of Bahdanau et al.), greedy decoding step by step, teacher forcing versus inference
(the two data flows of training and use), and the Transformer's alignment beside the Bahdanau RNN's."""

from __future__ import annotations

import streamlit as st

from ...errors import ModelError
from ...backends.registry import MODELS, availability
from ...figures.focus import highlighted_text
from ...figures.heatmap import attention_heatmap
from ...core.result import AttentionResult
from ...analysis.selection import Choice, displayed
from ...core.names import CROSS
from .. import cache, plain
from ..controls import layer_head_picker
from ..fallback import result_with
from ..inputs import MAX_TEXT
from ..plain import literal
from ..widgets import integer, text
from ..theme import dark
from ..export import chart, drawn_from

TRANSFORMER, RNN = "toy-translate", "toy-translate-rnn"


def render(result: AttentionResult) -> None:
    st.markdown(
        "In translation the decoder asks, for every word it writes, *which source words matter now?* Its "
        "**cross-attention** takes queries from the decoder and keys and values from the encoder's output, so "
        "each row below is a distribution over the source sentence: an alignment, learned without ever being "
        "told which words correspond."
    )
    translated = result_with(result, CROSS)
    if translated is None:
        return
    with drawn_from(translated.provenance):  # the demo model's run when the sidebar's model has no decoder
        sections(translated)


def sections(translated: AttentionResult) -> None:
    source = translated.tokens.text
    translation = translation_of(translated)
    if translation:
        st.markdown(f"**Translation:** {literal(translation)}")

    st.subheader("1 · Cross-attention: target × source")
    layer, head = layer_head_picker(translated, CROSS, key="encdec")
    shown = displayed(translated, Choice(CROSS, layer, head))
    chart(st, cache.figure(attention_heatmap, shown.matrix, shown.query_labels, shown.key_labels,
                                      title=f"{translated.model}: layer {layer}, head {head}", dark=dark()),
          key="encdec_cross")
    st.caption("Rows: what the decoder had read (<bos> + the words so far) when it predicted the next word.")

    step_by_step(translated, layer)
    data_flows(translated, source, layer)
    beside_rnn(translated, source, layer)


def translation_of(run: AttentionResult) -> str:
    """The model's own translation (demo models), or the text ``transformers`` generated (hf:)."""
    return run.meta.get("translation") or run.meta.get("generated_text") or ""


def step_by_step(translated: AttentionResult, layer: int) -> None:
    st.subheader("2 · Greedy decoding, one step at a time")
    predicted = translated.meta.get("predicted")
    if translated.meta.get("flow") != "greedy decoding (inference)" or not predicted:
        st.info("Step by step is shown for the demo models' own translations: pick toy-translate or "
                "toy-translate-rnn and leave the target empty.")
        return
    steps = len(translated.target_tokens)
    step = integer("Step", 1, steps, "encdec_step", 1) if steps > 1 else 1
    written = predicted[: step - 1]
    st.markdown(f"Read so far: {literal(' '.join(['<bos>', *written]))} → writes **{literal(predicted[step - 1])}**")
    cross = translated.stack("pattern", *CROSS)[layer].mean(axis=0)  # [target, source], heads averaged
    st.html(highlighted_text(list(translated.tokens.labels), cross[step - 1]))
    st.caption("Source words shaded by the cross-attention of this step (layer mean over heads). The decoder is "
               "causal, so this row is the same whether computed at this step or at the end.")


def data_flows(translated: AttentionResult, source: str, layer: int) -> None:
    st.subheader("3 · Teacher forcing (training) versus inference")
    st.markdown("In **training** the decoder reads the correct translation shifted by one (`<bos>` + the gold "
                "words) and predicts every next word at once. At **inference** it reads its own previous outputs, "
                "one step at a time. Type a reference translation to compare the two flows.")
    reference = text("Reference translation (teacher forcing)", "encdec_reference", translation_of(translated),
                     max_chars=MAX_TEXT)
    if not reference.strip():
        return
    try:
        forced = cache.run(translated.model, source, reference)
        greedy = cache.run(translated.model, source, None)
    except ModelError as error:
        plain.error(error)
        return
    left, right = st.columns(2)
    for column, run, name in ((left, forced, "teacher forcing"), (right, greedy, "inference (greedy)")):
        cross = run.stack("pattern", *CROSS)[layer].mean(axis=0)
        with drawn_from(run.provenance):
            chart(column, cache.figure(attention_heatmap, cross, list(run.target_tokens.labels),
                                       list(run.tokens.labels), title=f"{name}: layer {layer}, mean of heads",
                                       dark=dark()),
                  key=f"encdec_{name}")
    predicted = forced.meta.get("predicted")
    if not predicted:  # hf: models hand out attention only, not their predictions
        return
    gold = reference.split()
    hits = sum(p == g for p, g in zip(predicted, gold))
    st.caption(f"With teacher forcing the model predicts {hits} of {len(gold)} reference words correctly at "
               "their position, each from the gold prefix.")


def beside_rnn(translated: AttentionResult, source: str, layer: int) -> None:
    if translated.model not in (TRANSFORMER, RNN):
        return
    st.subheader("4 · The Transformer's alignment beside the Bahdanau RNN's")
    other = RNN if translated.model == TRANSFORMER else TRANSFORMER
    if other not in MODELS or not availability(other)[0]:
        st.info(f"{other} is not available.")
        return
    try:
        theirs = cache.run(other, source, None)
    except ModelError as error:
        plain.error(error)
        return
    left, right = st.columns(2)
    for column, run in ((left, translated), (right, theirs)):
        stack = run.stack("pattern", *CROSS)
        chosen = min(layer, len(stack) - 1)
        with drawn_from(run.provenance):
            chart(column, cache.figure(attention_heatmap, stack[chosen].mean(axis=0), list(run.target_tokens.labels),
                                       list(run.tokens.labels), title=f"{run.model}: layer {chosen}, mean",
                                       dark=dark()),
                  key=f"encdec_align_{run.model}")
    st.caption("The RNN (Bahdanau et al. 2015) scores every encoder state against the decoder state with "
               "vᵀ tanh(W_q q + W_k k); the Transformer with scaled dot products in several heads and layers. "
               f"Their translations: “{literal(translation_of(translated))}” and “{literal(translation_of(theirs))}”.")
