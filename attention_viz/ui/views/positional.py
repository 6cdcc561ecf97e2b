"""Positional encoding: the paper's sinusoids, why simpler codes (an integer, a fraction, binary
digits) fail, the loaded model's own learned position embeddings, rotary embedding (RoPE) beside
both, and the sentence's attention with and without positions."""

from __future__ import annotations

import numpy as np
import streamlit as st

from ...runtime.byte_cache import cached
from ...analysis.positions import same_token_rows
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
from ...figures.rotary import decay_figure, pair_rotation_figure, relative_scores_figure, spread_figure
from ...core.position_codes import (
    SameOffset,
    decay_curves,
    encoding_scores,
    pair_rotation,
    rotary_points,
    same_offset,
    simple_codes,
    sinusoidal_table,
    wavelengths,
)
from ...core.names import ENCODER_SELF
from ...core.result import AttentionResult
from .. import cache
from ..controls import layer_head_picker, pair_scale
from ..plain import literal
from ..widgets import choice, integer, several
from ..export import SYNTHETIC, chart, drawn_from

GROUP = ENCODER_SELF
D_MODELS = [16, 32, 64, 128, 256, 384, 512]
ALT_POSITIONS, ALT_DIMS = 50, 16
ROTARY_DIMS = [8, 16, 32, 64, 128]  # per head: Llama's heads have 128, small models 64
DECAY_DISTANCE = 4096


@st.cache_data(max_entries=16, show_spinner=False)
def sinusoids_cached(n_positions: int, d_model: int) -> np.ndarray:
    return sinusoidal_table(n_positions, d_model)


@cached(lambda: st.spinner("Running the model without positions…"))  # results: the byte budget of ui/cache.py
def run_without_positions(model: str, text: str) -> AttentionResult:
    """The same sentence with the position embeddings switched off; one forward per (model, text)."""
    return cache.backend(model).run_without_positions(text)


@st.cache_data(max_entries=16, show_spinner=False)
def rotary_scores_cached(d: int, n_positions: int, draw: int, model: str) -> dict[str, np.ndarray]:
    return encoding_scores(d, n_positions, draw, position_table(model))


@st.cache_data(max_entries=8, show_spinner=False)
def decay_cached(d: int) -> tuple[np.ndarray, np.ndarray]:
    return decay_curves(DECAY_DISTANCE, d)


@st.cache_data(max_entries=16, show_spinner=False)
def same_offset_cached(d: int, offset: int, draw: int) -> SameOffset:
    return same_offset(d, offset, draw)  # a sinusoidal table 10,000 positions long: cached, not redrawn per slider step


@st.cache_data(max_entries=8, show_spinner=False)
def position_table(model: str) -> np.ndarray | None:
    return cache.backend(model).position_table()


def _chart(figure, key: str) -> None:
    chart(st, figure, key=key, config={"displaylogo": False})


def render(result: AttentionResult) -> None:
    st.markdown(
        "Attention compares every token with every other token, and nothing in that comparison says *where* "
        "a token stands: “dog bites man” and “man bites dog” would look the same. So each position gets a "
        "vector of its own, added to the token's embedding. This page shows the paper's choice (sines and "
        "cosines), the simpler codes it improves on, and what the model you loaded actually learned."
    )
    with drawn_from(SYNTHETIC):  # codes computed from their formulas: no model, no sentence
        sinusoids()
        alternatives()
    learned(result)
    rotary(result)
    with_and_without(result)


def sinusoids() -> None:
    st.subheader("The sinusoidal code of the paper")
    left, right = st.columns(2)
    with left:
        n = integer("Positions", 16, 512, "positional_n", 128, step=16)
    with right:
        d = choice("Dimensions (d_model)", D_MODELS, "positional_d", 128, widget="select_slider")
    pe = sinusoids_cached(n, d)
    st.caption(
        "PE[pos, 2i] = sin(pos·ωᵢ), PE[pos, 2i+1] = cos(pos·ωᵢ) with ωᵢ = 1/10000^(2i/d). Each row is one "
        "position's code. The first dimensions change fast (short waves), the last ones very slowly, so "
        "together they work like the hands of a clock running at many speeds."
    )
    _chart(cache.figure(encoding_heatmap, pe, f"sinusoidal code: {n} positions × {d} dimensions"), "positional_pe")

    dims = several("Dimensions to plot", range(d), "positional_dims", (0, 1, 10, 11, 40, 41))
    _chart(cache.figure(dimension_curves, pe, dims), "positional_curves")

    _chart(cache.figure(similarity_heatmap, pe, title=f"PE · PEᵀ: how alike two positions' codes are ({n}×{n})"),
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
    with left:  # fewer pairs after a smaller d_model: the choice is clamped
        pair = integer("Frequency pair i", 0, d // 2 - 1, "positional_pair", 4)
    with right:
        k = integer("Shift k", 1, 15, "positional_shift", 3)  # < the fewest positions (16)
    rotation = pair_rotation(k, d, pair)
    _chart(cache.figure(shift_figure, pe, pair, k, rotation), "positional_shift_chart")
    error = rotation_error(pe, rotation, pair, k)
    st.caption(
        f"ω_{pair} = {omega(pair, d):.4g} rad per position, so a shift of {k} turns every point by "
        f"{k * omega(pair, d):.4g} rad. The crosses are R(k)·PE(t); they land on PE(t+{k}) for all {n - k} "
        f"positions (largest difference {error:.1e})."
    )


def alternatives() -> None:
    st.subheader("Why not something simpler?")
    st.caption(
        f"Four ways to write a position as a vector, each for {ALT_POSITIONS} positions × {ALT_DIMS} dimensions, "
        "with the plot that shows its weak point. A good code is bounded, means the same thing in short and "
        "long sentences, changes smoothly from one position to the next, and works for lengths never seen."
    )
    codes = simple_codes(ALT_POSITIONS, ALT_DIMS)
    top = st.columns(2)
    bottom = st.columns(2)
    with top[0]:
        _chart(cache.figure(integer_figure, codes["integer"]), "positional_alt_integer")
        st.caption("**Integer** (1, 2, 3, …): the values grow without bound as sentences get longer, and a "
                   "longer sentence than any seen in training brings values the model never saw.")
    with top[1]:
        _chart(cache.figure(normalized_figure, simple_codes(5, ALT_DIMS)["normalized"], codes["normalized"]),
               "positional_alt_normalized")
        st.caption("**[0, 1]** (first = 0, last = 1): bounded, but the same position means a different value "
                   "in a 5-token and a 50-token sentence, and the step between neighbours depends on the length.")
    with bottom[0]:
        _chart(cache.figure(binary_figure, codes["binary"]), "positional_alt_binary")
        st.caption("**Binary** (the bits of the position): bounded, but not continuous: going to the next "
                   "position flips a varying number of bits, so neighbours are sometimes close, sometimes far.")
    with bottom[1]:
        _chart(cache.figure(sinusoidal_figure, sinusoids_cached(ALT_POSITIONS, ALT_DIMS)),
               "positional_alt_sinusoidal")
        st.caption("**Sinusoidal**: bounded (between −1 and 1), smooth, defined for any length, and the dot "
                   "product of two codes depends only on how far apart they are, not where they are.")


def learned(result: AttentionResult) -> None:
    st.subheader(f"What {literal(result.model)} uses: learned position embeddings")
    table = position_table(result.model)
    if table is None:
        st.info("This page reads the learned position table of our own encoders (such as minilm); this model "
                "has none, or runs elsewhere.")
        return
    shown = table.shape[0]
    if shown > 16:
        shown = integer("Positions to show", 16, table.shape[0], "positional_learned_n", min(128, table.shape[0]),
                        step=16)
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
        _chart(cache.figure(encoding_heatmap, table[:shown], f"learned positions: first {shown} × {table.shape[1]}",
                            robust=True),
               "positional_learned")
    with right:
        _chart(cache.figure(similarity_heatmap, table[:shown], cosine=True,
                            title="cosine similarity between positions"),
               "positional_learned_similarity")


def rotary(result: AttentionResult) -> None:
    st.subheader("Rotary (RoPE): rotate the query and the key instead of adding a code")
    st.markdown(
        "Llama, Qwen, Mistral and GPT-NeoX add nothing to the embeddings. Inside every attention they turn "
        "the query and the key by an angle proportional to their position, before the dot product: pairs of "
        "dimensions, each pair at its own speed θᵢ = 10000^(−2i/d), like the sinusoids' clock hands. A query at "
        "position m is turned by m·θᵢ, a key at n by n·θᵢ; the dot product of two turned vectors only sees the "
        "angle between them, (m − n)·θᵢ. So the score depends on the two vectors and on their distance, never "
        "on where in the text the pair sits."
    )
    left, middle, right = st.columns(3)
    with left:
        d = choice("Dimensions per head (d)", ROTARY_DIMS, "positional_rope_d", 64, widget="select_slider")
    with middle:
        n = integer("Positions", 16, 128, "positional_rope_n", 48, step=8)
    with right:
        draw = integer("Random query and key", 0, 9, "positional_rope_draw", 0,
                       help="Another random pair of vectors: the properties below hold for every pair.")

    pairs = several("Pairs of dimensions to draw", range(d // 2), "positional_rope_pairs", (0, 4, d // 2 - 1))
    if pairs:
        with drawn_from(SYNTHETIC):  # a random vector turned by the formula: no model
            _chart(cache.figure(pair_rotation_figure, rotary_points(d, pairs, n, draw), pairs, wavelengths(d)[pairs]),
                   "positional_rope_pairs_chart")
    st.caption(
        f"Each panel is one pair (dimension i and i + {d // 2}) of the same query vector, placed at positions "
        f"0 to {n - 1} (the colour goes from dark to light with the position). The length of the pair never "
        "changes, only its angle: pair 0 turns one radian per position, the last pair so slowly that it "
        "barely moves over thousands of tokens."
    )

    scores = rotary_scores_cached(d, n, draw, result.model)
    _chart(cache.figure(relative_scores_figure, scores), "positional_rope_scores")
    table = position_table(result.model)
    learned_note = (
        f" The learned panel adds the first {n} rows of {literal(result.model)}'s own position table to a query "
        f"and key of its width ({table.shape[1]} dimensions)." if table is not None else
        " This model has no learned position table of ours to compare."
    )
    st.caption(
        "The same query and key at every pair of positions: query position down, key position across. With "
        "rotary the picture is made of stripes parallel to the diagonal: along each stripe m − n is fixed and "
        "so is the score. With a code added to the vectors, (q + P_m)·(k + P_n) has the terms q·P_n and P_m·k, "
        "which depend on where the tokens are, so the stripes break up." + learned_note
    )
    _chart(cache.figure(spread_figure, scores), "positional_rope_spread")
    st.caption(
        "The same check as one number per distance: the largest minus the smallest score over all pairs at "
        "that distance. Rotary stays at the size of rounding errors (1e-15 to 1e-13); for the added codes it "
        "is of the size of the scores themselves."
    )

    offset = integer("Offset m − n", 0, 64, "positional_rope_offset", 3)
    table = same_offset_cached(d, offset, draw)
    st.dataframe(table.rows(), key="positional_rope_table", hide_index=True, on_select="ignore",
                 column_config={name: st.column_config.NumberColumn(name, format="%.6f")
                                for name in ("rotary q·k", "sinusoidal (q+PE)·(k+PE)")})
    st.caption(
        f"The same query and key, {offset} positions apart, placed at the start of a text and 10,000 tokens in. "
        f"Rotary gives the same score everywhere (largest difference {table.rotary_spread:.1e}, rounding); the "
        f"sinusoidal code added to the vectors gives scores that differ by up to {table.sinusoidal_spread:.3f}."
    )

    bound, products = decay_cached(d)
    with drawn_from(SYNTHETIC):
        _chart(cache.figure(decay_figure, bound, products), "positional_rope_decay")
    st.caption(
        "Long-range decay: the RoFormer paper bounds how large q_m·k_n can be by a sum over the pairs' "
        "rotations, and that bound shrinks, with wiggles, as m − n grows: far-apart tokens tend to score "
        "less, a mild preference for nearby words built into the code. The sinusoids' PE(t)·PE(t+k) (dotted) "
        "falls in a similar way; a learned table has no such rule, only what training left in it."
    )


def with_and_without(result: AttentionResult) -> None:
    st.subheader("The same sentence with and without positions")
    if not cache.backend(result.model).can_run_without_positions or GROUP not in result.attentions():
        st.info("Switching positions off needs our own encoder (such as minilm); choose it in the sidebar.")
        return
    layer, head = layer_head_picker(result, GROUP, key="positional", reductions=False)
    bare = run_without_positions(result.model, result.tokens.text)
    labels = list(result.tokens.labels)
    with_pos, without = result.pattern(GROUP, layer, head), bare.pattern(GROUP, layer, head)
    top = pair_scale("positional_separate", with_pos, without)
    left, right = st.columns(2)
    with left:
        _chart(cache.figure(attention_heatmap, with_pos, labels, title=f"with positions: layer {layer}, head {head}",
                            zmax=top),
               "positional_with")
    with right, drawn_from(bare.provenance):
        _chart(cache.figure(attention_heatmap, without, labels,
                            title=f"positions switched off: layer {layer}, head {head}",
                                 zmax=top),
               "positional_without")
    st.caption(
        "Without positions, self-attention is *permutation equivariant*: shuffle the words and every token keeps "
        "exactly the same weights, just moved along with it. The model then reads a bag of words. Heads that "
        "look at the previous or next token lose their pattern; heads that match words by meaning change less."
    )
    twins = same_token_rows(result.tokens.ids, result.tokens.special, with_pos, without)
    if twins is not None:
        st.caption(
            f"Tokens {twins.first} and {twins.second} are the same vocabulary item (id {twins.token_id}). Without "
            f"positions their rows are identical (largest difference {twins.gap_without:.1e}): the model cannot "
            f"tell them apart. With positions they differ by up to {twins.gap_with:.3f}."
        )
