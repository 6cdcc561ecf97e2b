"""The causal mask: why a decoder cannot look ahead, seen on a real decoder — the mask, the scores
before and after masking, the pattern's exactly-zero upper triangle, an edit of a later token that
leaves every earlier row unchanged, and the padding mask on a batch of two sentences."""

from __future__ import annotations

import numpy as np
import streamlit as st

from ...attention import causal_mask
from ...errors import ModelError
from ...figures.heatmap import attention_heatmap
from ...figures.masks import mask_heatmap, row_change_bars, scores_heatmap
from ...masking import padded_batch
from ...model import Transformer
from ...result import AttentionResult
from .. import cache
from ..controls import layer_head_picker
from ..fallback import result_with

GROUP = ("decoder", "self_attn")


def render(result: AttentionResult) -> dict:
    st.markdown(
        "A decoder writes one token at a time, so while learning it must not peek at the tokens that come "
        "after the one it is predicting. The **causal mask** enforces it: before the softmax, every score of a "
        "later key is set to −∞, and softmax turns −∞ into exactly 0."
    )
    decoded = result_with(result, GROUP, "is an encoder (it sees the whole sentence at once),")
    if decoded is None:
        return {}
    layer, head = layer_head_picker(decoded, GROUP, key="causal", reductions=False)
    labels = list((decoded.target_tokens or decoded.tokens).labels)
    target = decoded.meta.get("target")
    source = decoded.tokens.text
    kinds = cache.backend(decoded.model).kinds
    n = len(labels)

    st.subheader("1 · The mask")
    st.plotly_chart(mask_heatmap(causal_mask(n).numpy(), labels, labels, "causal mask: row i may see keys 0..i"),
                    key="causal_mask")

    st.subheader("2 · Scores before and after masking")
    if {"q", "k", "scores"} <= set(kinds):
        full = cache.run(decoded.model, source, target, ("q", "k", "scores", "pattern"))
        q = full.arrays[f"decoder.layers.{layer}.self_attn.q"][head]
        k = full.arrays[f"decoder.layers.{layer}.self_attn.k"][head]
        before = (q @ k.T) / np.sqrt(q.shape[-1])
        after = full.arrays[f"decoder.layers.{layer}.self_attn.scores"][head]
        left, right = st.columns(2)
        left.plotly_chart(scores_heatmap(before, labels, labels, "Q·Kᵀ/√d_k, before the mask"), key="causal_before")
        right.plotly_chart(scores_heatmap(after, labels, labels, "after the mask: −∞ above the diagonal"),
                           key="causal_after")
    else:
        st.info(f"{decoded.model} hands out attention weights only (no scores), so this step is not shown.")

    st.subheader("3 · The pattern")
    pattern = decoded.arrays[f"decoder.layers.{layer}.self_attn.pattern"][head]
    upper = pattern[np.triu_indices(n, 1)]
    st.plotly_chart(attention_heatmap(pattern, labels, title=f"softmax: layer {layer}, head {head}"),
                    key="causal_pattern")
    st.caption(f"Largest weight above the diagonal: {upper.max() if upper.size else 0.0:.1f} — exactly zero, "
               f"not merely small. Every row still sums to 1 (smallest row sum {pattern.sum(-1).min():.6f}).")

    if decoded.target_tokens is not None:
        edit_check(decoded, source, labels)
    if isinstance(getattr(cache.backend(decoded.model), "model", None), Transformer):
        padding(decoded, layer)
    return {"layer": layer, "head": head}


def edit_check(decoded: AttentionResult, source: str, labels: list[str]) -> None:
    """Replace one later target word; rows before it must not move at all."""
    st.subheader("4 · Edit a later token: the earlier rows do not change")
    words = labels[1:]  # the decoder reads <bos> + these words (teacher forcing)
    if len(words) < 2:
        st.info("The translation is too short to edit.")
        return
    left, right = st.columns(2)
    position = left.slider("Word to replace", 1, len(words), len(words) - 1, key="causal_edit_at")
    replacement = right.text_input("Replace it with", value="zone", key="causal_edit_word")
    if not replacement.strip() or len(replacement.split()) != 1:
        st.info("Type one word.")
        return
    edited = words.copy()
    edited[position - 1] = replacement.strip()
    try:
        original = cache.run(decoded.model, source, " ".join(words))
        changed = cache.run(decoded.model, source, " ".join(edited))
    except ModelError as error:
        st.error(str(error))
        return
    names = [f"decoder.layers.{i}.{attn}.pattern" for i in range(original.n_layers(*GROUP))
             for attn in ("self_attn", "cross_attn")]
    change = np.max([np.abs(original.arrays[n] - changed.arrays[n]).max(axis=(0, 2)) for n in names], axis=0)
    st.plotly_chart(row_change_bars(change, labels, position), key="causal_edit_bars")
    st.caption(f"Every layer, head, self- and cross-attention: rows 0..{position - 1} changed by at most "
               f"{change[:position].max():.1e} (exactly zero); from the edited row on they change.")


def padding(decoded: AttentionResult, layer: int) -> None:
    """Two sentences of different lengths in one batch: the shorter one's padding gets no attention."""
    st.subheader("5 · The padding mask")
    st.markdown("Sentences in a batch have different lengths, so the shorter ones are filled with padding. "
                "A second mask hides those keys, exactly like the causal mask hides the future.")
    backend = cache.backend(decoded.model)
    other = st.text_input("A second sentence", value="the law was signed .", key="causal_pad_text")
    first_tokens, _ = backend.tokenize(decoded.tokens.text)
    try:
        second_tokens, _ = backend.tokenize(other)
    except ModelError as error:
        st.error(str(error))
        return
    if not len(second_tokens):
        st.info("Type a second sentence.")
        return
    batch = padded_batch(backend.model, [list(first_tokens.ids), list(second_tokens.ids)], layer, pad_id=0)
    length = batch.ids.shape[1]
    rows = [list(first_tokens.labels), list(second_tokens.labels)]
    padded_labels = [r + ["<pad>"] * (length - len(r)) for r in rows]
    st.plotly_chart(mask_heatmap(batch.real, ["sentence 1", "sentence 2"], [str(i) for i in range(length)],
                                 "padding mask of the batch (1 = real token)"), key="causal_pad_mask")
    short = int(np.argmin([len(r) for r in rows]))
    n = len(rows[short])
    pattern = batch.patterns[short].mean(axis=0)
    st.plotly_chart(attention_heatmap(pattern, padded_labels[short],
                                      title=f"sentence {short + 1} in the batch: encoder layer {layer}, mean of heads"),
                    key="causal_pad_pattern")
    padded_share = float(batch.patterns[short][..., n:].max()) if n < length else 0.0
    same = float(np.abs(batch.patterns[short][:, :n, :n] - batch.alone[short]).max())
    st.caption(f"Largest weight on a padding key: {padded_share:.1f}. The real tokens' attention differs from "
               f"running the sentence alone by at most {same:.1e}: padding changes nothing.")
