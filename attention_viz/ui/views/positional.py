"""Positional encoding: the paper's sinusoids, why the simpler codes of seed 004 fail, the loaded
model's own learned position embeddings, and the sentence's attention with and without positions."""

from __future__ import annotations

import numpy as np
import streamlit as st

from ...backends.scratch import ScratchEncoderBackend
from ...figures.heatmap import attention_heatmap
from ...figures.positional import (
    binary_figure,
    dimension_curves,
    encoding_heatmap,
    integer_figure,
    normalized_figure,
    omega,
    rotation_error,
    shift_figure,
    similarity_heatmap,
    sinusoidal_figure,
)
from ...positional import (
    LearnedEncoding,
    binary_positions,
    integer_positions,
    normalized_positions,
    shift_rotation,
    sinusoidal,
)
from ...result import AttentionResult
from .. import cache
from ..controls import layer_head_picker

GROUP = ("encoder", "self_attn")
D_MODELS = [16, 32, 64, 128, 256, 384, 512]
ALT_POSITIONS, ALT_DIMS = 50, 16


@st.cache_data(max_entries=16, show_spinner=False)
def sinusoidal_table(n_positions: int, d_model: int) -> np.ndarray:
    return sinusoidal(n_positions, d_model).numpy()


@st.cache_resource(max_entries=24, show_spinner="Running the model without positions…")
def run_without_positions(model: str, text: str) -> AttentionResult:
    """The same sentence with the position embeddings switched off; one forward per (model, text)."""
    return cache.backend(model).run(text, use_positions=False)


def _chart(figure, key: str) -> None:
    st.plotly_chart(figure, key=key, config={"displaylogo": False})


def render(result: AttentionResult) -> dict:
    st.markdown(
        "Attention compares every token with every other token, and nothing in that comparison says *where* "
        "a token stands: “dog bites man” and “man bites dog” would look the same. So each position gets a "
        "vector of its own, added to the token's embedding. This page shows the paper's choice (sines and "
        "cosines), the simpler codes it improves on, and what the model you loaded actually learned."
    )
    sinusoids()
    alternatives()
    learned(result)
    return with_and_without(result)


def sinusoids() -> None:
    st.subheader("The sinusoidal code of the paper")
    left, right = st.columns(2)
    n = left.slider("Positions", 16, 512, 128, 16, key="positional_n")
    d = right.select_slider("Dimensions (d_model)", D_MODELS, value=128, key="positional_d")
    pe = sinusoidal_table(n, d)
    st.caption(
        "PE[pos, 2i] = sin(pos·ωᵢ), PE[pos, 2i+1] = cos(pos·ωᵢ) with ωᵢ = 1/10000^(2i/d). Each row is one "
        "position's code. The first dimensions change fast (short waves), the last ones very slowly, so "
        "together they work like the hands of a clock running at many speeds."
    )
    _chart(encoding_heatmap(pe, f"sinusoidal code: {n} positions × {d} dimensions"), "positional_pe")

    default = [dim for dim in (0, 1, 10, 11, 40, 41) if dim < d]
    chosen = [dim for dim in st.session_state.get("positional_dims", default) if dim < d]
    st.session_state["positional_dims"] = chosen or default
    dims = st.multiselect("Dimensions to plot", list(range(d)), key="positional_dims")
    _chart(dimension_curves(pe, dims), "positional_curves")

    _chart(similarity_heatmap(pe, title=f"PE · PEᵀ: how alike two positions' codes are ({n}×{n})"),
           "positional_similarity")
    st.caption(
        f"Every code has the same length (the diagonal is d/2 = {d // 2}), and the similarity of two positions "
        "falls off with their distance, the same way everywhere along the sentence (the bands run parallel "
        "to the diagonal)."
    )

    st.markdown("**A shift is a rotation.** Take one sine/cosine pair: its values for a position are a point on a "
                "circle. Moving k positions further turns that point by the same angle k·ωᵢ, whatever the "
                "starting position, so “k tokens later” is one fixed linear map that attention can learn.")
    left, right = st.columns(2)
    st.session_state.setdefault("positional_pair", 4)
    if st.session_state["positional_pair"] > d // 2 - 1:  # fewer pairs after a smaller d_model
        st.session_state["positional_pair"] = d // 2 - 1
    pair = left.slider("Frequency pair i", 0, d // 2 - 1, key="positional_pair")
    k = right.slider("Shift k", 1, 15, 3, key="positional_shift")  # < the fewest positions (16)
    rotation = shift_rotation(k, d)[pair].numpy()
    _chart(shift_figure(pe, pair, k, rotation), "positional_shift_chart")
    error = rotation_error(pe, rotation, pair, k)
    st.caption(
        f"ω_{pair} = {omega(pair, d):.4g} rad per position, so a shift of {k} turns every point by "
        f"{k * omega(pair, d):.4g} rad. The crosses are R(k)·PE(t); they land on PE(t+{k}) for all {n - k} "
        f"positions (largest difference {error:.1e})."
    )


def alternatives() -> None:
    st.subheader("Why not something simpler? (seed 004)")
    st.caption(
        f"Four ways to write a position as a vector, each for {ALT_POSITIONS} positions × {ALT_DIMS} dimensions, "
        "with the plot that shows its weak point. A good code is bounded, means the same thing in short and "
        "long sentences, changes smoothly from one position to the next, and works for lengths never seen."
    )
    top = st.columns(2)
    bottom = st.columns(2)
    with top[0]:
        _chart(integer_figure(integer_positions(ALT_POSITIONS, ALT_DIMS).numpy()), "positional_alt_integer")
        st.caption("**Integer** (1, 2, 3, …): the values grow without bound as sentences get longer, and a "
                   "longer sentence than any seen in training brings values the model never saw.")
    with top[1]:
        _chart(normalized_figure(normalized_positions(5, ALT_DIMS).numpy(),
                                 normalized_positions(ALT_POSITIONS, ALT_DIMS).numpy()), "positional_alt_normalized")
        st.caption("**[0, 1]** (first = 0, last = 1): bounded, but the same position means a different value "
                   "in a 5-token and a 50-token sentence, and the step between neighbours depends on the length.")
    with bottom[0]:
        _chart(binary_figure(binary_positions(ALT_POSITIONS, ALT_DIMS).numpy()), "positional_alt_binary")
        st.caption("**Binary** (the bits of the position): bounded, but not continuous: going to the next "
                   "position flips a varying number of bits, so neighbours are sometimes close, sometimes far.")
    with bottom[1]:
        _chart(sinusoidal_figure(sinusoidal_table(ALT_POSITIONS, ALT_DIMS)), "positional_alt_sinusoidal")
        st.caption("**Sinusoidal**: bounded (between −1 and 1), smooth, defined for any length, and the dot "
                   "product of two codes depends only on how far apart they are, not where they are.")


def learned(result: AttentionResult) -> None:
    st.subheader(f"What {result.model} uses: learned position embeddings")
    backend = cache.backend(result.model)
    model = getattr(backend, "model", None) if isinstance(backend, ScratchEncoderBackend) else None
    positions = getattr(getattr(model, "encoder", None), "embed", None)
    positions = getattr(positions, "positions", None)
    if not isinstance(positions, LearnedEncoding):
        st.info("This page reads the position table of our own encoders (such as minilm); this model's table is "
                "not available here.")
        return
    table = positions.weight.detach().float().cpu().numpy()
    shown = table.shape[0]
    if shown > 16:
        shown = st.slider("Positions to show", 16, table.shape[0], min(128, table.shape[0]), 16,
                          key="positional_learned_n")
    st.caption(
        f"BERT-style models do not use sines: they learn one vector per position ({table.shape[0]} positions × "
        f"{table.shape[1]} dimensions here) during training. Showing the first {shown}; a few dimensions hold much "
        "larger values than the rest, so the colours stop at the 99th percentile (hover shows exact values). "
        "The cosine similarity on the "
        "right shows how much of the sinusoids' structure training rediscovered: nearby positions have similar "
        "vectors, and the stripes parallel to the diagonal mean the similarity depends mostly on the distance "
        "between two positions, rising and falling periodically as the sinusoids' does."
    )
    left, right = st.columns(2)
    with left:
        _chart(encoding_heatmap(table[:shown], f"learned positions: first {shown} × {table.shape[1]}", robust=True),
               "positional_learned")
    with right:
        _chart(similarity_heatmap(table[:shown], cosine=True, title="cosine similarity between positions"),
               "positional_learned_similarity")


def with_and_without(result: AttentionResult) -> dict:
    st.subheader("The same sentence with and without positions")
    backend = cache.backend(result.model)
    if not isinstance(backend, ScratchEncoderBackend) or GROUP not in result.attentions():
        st.info("Switching positions off needs our own encoder (such as minilm); choose it in the sidebar.")
        return {}
    layer, head = layer_head_picker(result, GROUP, key="positional", reductions=False)
    bare = run_without_positions(result.model, result.tokens.text)
    labels = list(result.tokens.labels)
    name = f"encoder.layers.{layer}.self_attn.pattern"
    with_pos, without = result.arrays[name][head], bare.arrays[name][head]
    left, right = st.columns(2)
    with left:
        _chart(attention_heatmap(with_pos, labels, title=f"with positions: layer {layer}, head {head}"),
               "positional_with")
    with right:
        _chart(attention_heatmap(without, labels, title=f"positions switched off: layer {layer}, head {head}"),
               "positional_without")
    st.caption(
        "Without positions, self-attention is *permutation equivariant*: shuffle the words and every token keeps "
        "exactly the same weights, just moved along with it. The model then reads a bag of words. Heads that "
        "look at the previous or next token lose their pattern; heads that match words by meaning change less."
    )
    ids = result.tokens.ids
    for i in range(len(ids)):
        twins = [j for j in range(i + 1, len(ids)) if ids[j] == ids[i] and not result.tokens.special[i]]
        if twins:
            j = twins[0]
            gap_without = float(np.abs(without[i] - without[j]).max())
            gap_with = float(np.abs(with_pos[i] - with_pos[j]).max())
            st.caption(
                f"Tokens {i} and {j} are the same vocabulary item (id {ids[i]}). Without positions their rows "
                f"are identical (largest difference {gap_without:.1e}): the model cannot tell them apart. "
                f"With positions they differ by up to {gap_with:.3f}."
            )
            break
    return {"layer": layer, "head": head}
