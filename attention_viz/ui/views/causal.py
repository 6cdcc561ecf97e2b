"""The causal mask: why a decoder cannot look ahead, seen on a real decoder — the mask, the scores
before and after masking, the pattern's exactly-zero upper triangle, an edit of a later token that
leaves every earlier row unchanged, and the padding mask on a batch of two sentences."""

from __future__ import annotations

import streamlit as st

from ...analysis.causal import (
    PaddingCheck,
    causal_mask,
    edited_words,
    future_weight,
    padding_check,
    row_change,
    scores_before_mask,
)
from ...errors import ModelError
from ...figures.heatmap import attention_heatmap
from ...figures.masks import mask_heatmap, row_change_bars, scores_heatmap
from ...figures.numbers import exact
from ...backends.padding import PaddedBatch
from ...core.names import DECODER_SELF
from ...core.result import AttentionResult
from .. import cache, plain
from ..controls import layer_head_picker
from ..fallback import result_with
from ..widgets import integer, text
from ..theme import dark
from ..export import chart, drawn_from

FULL = ("q", "k", "scores", "pattern")


@st.cache_resource(max_entries=16, show_spinner="Running the padded batch…")
def padded(model: str, first: str, second: str, layer: int) -> tuple[PaddedBatch, PaddingCheck]:
    """The two sentences as one padded batch (and each alone): once per (model, texts, layer), so
    moving any other widget of the page never runs the model again."""
    backend = cache.backend(model)
    tokens = [backend.tokenize(first)[0], backend.tokenize(second)[0]]
    batch = backend.padded_batch([list(t.ids) for t in tokens], layer)
    return batch, padding_check(batch.patterns, batch.alone, [list(t.labels) for t in tokens])


def render(result: AttentionResult) -> None:
    st.markdown(
        "A decoder writes one token at a time, so while learning it must not peek at the tokens that come "
        "after the one it is predicting. The **causal mask** enforces it: before the softmax, every score of a "
        "later key is set to −∞, and softmax turns −∞ into exactly 0."
    )
    decoded = result_with(result, DECODER_SELF)
    if decoded is None:
        return
    with drawn_from(decoded.provenance):  # the demo model's run when the sidebar's model has no decoder
        sections(decoded)


def sections(decoded: AttentionResult) -> None:
    layer, head = layer_head_picker(decoded, DECODER_SELF, key="causal", reductions=False)
    labels = list((decoded.target_tokens or decoded.tokens).labels)
    n = len(labels)

    st.subheader("1 · The mask")
    chart(st, cache.figure(mask_heatmap, causal_mask(n), labels, labels, "causal mask: row i may see keys 0..i",
                           dark=dark()), key="causal_mask")
    before_and_after(decoded, layer, head, labels)

    st.subheader("3 · The pattern")
    pattern = decoded.pattern(DECODER_SELF, layer, head)
    future = future_weight(pattern)
    chart(st, cache.figure(attention_heatmap, pattern, labels, title=f"softmax: layer {layer}, head {head}",
                           dark=dark()), key="causal_pattern")
    st.caption(f"Largest weight above the diagonal: {exact(future.largest)} — not merely small. Every row still "
               f"sums to 1 (smallest row sum {future.smallest_row_sum:.6f}).")

    if decoded.target_tokens is not None:
        edit_check(decoded, labels)
    if cache.backend(decoded.model).can_batch_with_padding:
        padding(decoded, layer)


def before_and_after(decoded: AttentionResult, layer: int, head: int, labels: list[str]) -> None:
    st.subheader("2 · Scores before and after masking")
    if not set(FULL) <= set(cache.backend(decoded.model).kinds):
        st.info(f"{plain.literal(decoded.model)} hands out attention weights only (no scores), so this step is "
                "not shown.")
        return
    full = cache.run(decoded.model, decoded.tokens.text, decoded.meta.get("target"), FULL)
    before = scores_before_mask(full.array(DECODER_SELF, layer, "q")[head], full.array(DECODER_SELF, layer, "k")[head])
    after = full.array(DECODER_SELF, layer, "scores")[head]
    left, right = st.columns(2)
    chart(left, cache.figure(scores_heatmap, before, labels, labels, "Q·Kᵀ/√d_k, before the mask", dark=dark(),
                             across=2),
          key="causal_before")
    chart(right, cache.figure(scores_heatmap, after, labels, labels, "after the mask: −∞ above the diagonal",
                              dark=dark(), across=2), key="causal_after")


def edit_check(decoded: AttentionResult, labels: list[str]) -> None:
    """Replace one later target word; rows before it must not move at all."""
    st.subheader("4 · Edit a later token: the earlier rows do not change")
    words = labels[1:]  # the decoder reads <bos> + these words (teacher forcing)
    if len(words) < 2:
        st.info("The translation is too short to edit.")
        return
    left, right = st.columns(2)
    with left:
        position = integer("Word to replace", 1, len(words), "causal_edit_at", len(words) - 1)
    with right:
        replacement = text("Replace it with", "causal_edit_word", "zone", max_chars=100)
    if not replacement.strip() or len(replacement.split()) != 1:
        st.info("Type one word.")
        return
    source = decoded.tokens.text
    try:
        original = cache.run(decoded.model, source, " ".join(words))
        changed = cache.run(decoded.model, source, " ".join(edited_words(words, position, replacement.strip())))
        change = row_change(original, changed)
    except (ModelError, ValueError) as error:  # e.g. the new word tokenizes into several tokens
        plain.info(f"This edit cannot be compared row by row: {error}")
        return
    chart(st, cache.figure(row_change_bars, change, labels, position), key="causal_edit_bars")
    st.caption(f"Every layer, head, self- and cross-attention: rows 0..{position - 1} changed by at most "
               f"{exact(float(change[:position].max()))}; from the edited row on they change.")


def padding(decoded: AttentionResult, layer: int) -> None:
    """Two sentences of different lengths in one batch: the shorter one's padding gets no attention."""
    st.subheader("5 · The padding mask")
    st.markdown("Sentences in a batch have different lengths, so the shorter ones are filled with padding. "
                "A second mask hides those keys, exactly like the causal mask hides the future.")
    other = text("A second sentence", "causal_pad_text", "the law was signed .", max_chars=2_000)
    if not other.strip():
        st.info("Type a second sentence.")
        return
    try:
        batch, check = padded(decoded.model, decoded.tokens.text, other, layer)
    except ModelError as error:
        plain.error(error)
        return
    length = batch.ids.shape[1]
    chart(st, cache.figure(mask_heatmap, batch.real, ["sentence 1", "sentence 2"], [str(i) for i in range(length)],
                                 "padding mask of the batch (1 = real token)", dark=dark()), key="causal_pad_mask")
    chart(st, cache.figure(attention_heatmap, check.pattern, check.padded_labels,
                                      title=f"sentence {check.shorter + 1} in the batch: encoder layer {layer}, "
                                            "mean of heads", dark=dark()),
                    key="causal_pad_pattern")
    st.caption(f"Largest weight on a padding key: {exact(check.on_padding)}. The real tokens' attention differs "
               f"from running the sentence alone by at most {exact(check.versus_alone)}: padding changes nothing.")
