"""The logit lens (nostalgebraist 2020): what the decoder would predict next if its residual stream
stopped after each layer. The computation is :func:`attention_viz.backends.logit_lens.logit_lens`,
cached here at the page edge; the page lays out the answer box and the heatmap."""

from __future__ import annotations

import streamlit as st

from ...analysis.logit_lens import LogitLens
from ...core.result import AttentionResult
from ...figures.logit_lens import logit_lens_heatmap
from .. import cache, plain
from ..export import chart
from ..heavy import heavy
from ..widgets import text

EXPLANATION = (
    "A decoder predicts the next token from the residual stream after its last layer, through a final norm "
    "and the unembedding. The **logit lens** applies that same norm and unembedding to the stream after *every* "
    "layer (and to the embeddings alone): each row shows what the model would say if it stopped there. Each "
    "cell names the most likely next token at that depth and position; hover for the top five. Name an answer "
    "to colour the cells by its probability instead."
)
PAGE_TOKENS = 256  # a (positions × vocabulary) softmax per depth on a shared server; the API takes any length


@st.cache_resource(max_entries=32, show_spinner="Reading every layer through the unembedding…")
def lens(model: str, sentence: str, answer: str) -> LogitLens:
    from ...backends.logit_lens import logit_lens  # the model's forward (torch) behind the page edge

    with heavy("the logit lens"):
        return logit_lens(cache.backend(model), sentence, answer or None)


def render(result: AttentionResult) -> dict:
    st.markdown(EXPLANATION)
    backend = cache.backend(result.model)
    if backend.shape != "decoder-only" or not backend.can_ablate:
        plain.info(f"{result.model} has no next-token head this page can read layer by layer: the logit lens runs "
                   "on decoders in our own Transformer (induction, or an hf: Llama, Qwen2, Mistral, GPT-NeoX or "
                   "GPT-2 folder).")
        return {}
    if len(result.tokens) > PAGE_TOKENS:
        plain.info(f"The text has {len(result.tokens)} tokens: this page reads up to {PAGE_TOKENS}.")
        return {}
    answer = text("Answer to follow (one token; empty: colour by the top token's probability)", "logit_lens_answer", "",
                  max_chars=80).strip()
    chart(st, cache.figure(logit_lens_heatmap, lens(result.model, result.tokens.text, answer)), key="logit_lens_map")
    st.caption("Top row: the embeddings alone; bottom row: the model's own prediction. Darker: more probable.")
    return {}
