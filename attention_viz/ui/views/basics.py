"""Basics: the formulas on small synthetic data — why scores are divided by √d_k, dot-product versus
additive scoring, and attention pooling as Nadaraya–Watson kernel regression (the waist/weight
example)."""

from __future__ import annotations

import numpy as np
import streamlit as st

from ...core.basics_examples import HIDDEN, N_KEYS, N_QUERIES, dk_example, scoring_example
from ...figures.basics import (
    WAISTS,
    WEIGHTS,
    dk_softmax_figure,
    dot_product_stats,
    kernel_regression_figure,
    kernel_weights_figure,
    nadaraya_watson,
    score_pairs_figure,
    variance_figure,
)
from ...figures.heatmap import attention_heatmap
from ...core.result import AttentionResult
from ..widgets import choice, integer, number
from .. import cache
from ..export import SYNTHETIC, chart, drawn_from
from ..theme import dark

D_KS = [4, 8, 16, 32, 64, 128, 256, 512, 1024]


@st.cache_data(show_spinner=False)
def variance_stats() -> dict[str, np.ndarray]:
    return dot_product_stats(D_KS, samples=400, n_keys=8, seed=0)


@st.cache_data(max_entries=32, show_spinner=False)
def scoring_cached(draw: int, q_size: int, k_size: int) -> dict[str, np.ndarray | None]:
    return scoring_example(draw, q_size, k_size)


def _chart(figure, key: str) -> None:
    with drawn_from(SYNTHETIC):  # small made-up numbers: no model, no sentence, so no subtitle
        chart(st, figure, key=key, config={"displaylogo": False})


def render(result: AttentionResult | None = None) -> None:
    """Needs no model run: ``result`` is ignored."""
    st.markdown(
        "The formulas behind attention, on small made-up numbers rather than on the model: the sentence in the "
        "sidebar plays no part here. Attention gives each *key* a *score* against a *query*, turns the scores "
        "into weights with softmax (positive, summing to 1), and returns the weighted average of the *values*."
    )
    scaling()
    scoring()
    pooling()


def scaling() -> None:
    st.subheader("1 · Why divide by √d_k")
    st.caption(
        "Softmax reacts to differences between scores, not to their ratio. A classic example: with scores 51 "
        "and 49, softmax already gives 0.88/0.12; with 70 and 30 it gives essentially 1/0, so one key takes "
        "everything and learning stalls (the gradient through a saturated softmax is nearly zero). Divided by "
        "√64 = 8, 51/49 becomes 0.56/0.44 and 70/30 becomes 0.993/0.007. (Explanations often quote “0.51/0.49” and "
        "“0.7/0.3” are the proportions of the scores, not their softmax; the bars show the exact values.)"
    )
    _chart(cache.figure(score_pairs_figure, ), "basics_score_pairs")
    st.caption(
        "Why √d_k: if the d_k numbers of a query and a key are random with variance 1, their dot product adds "
        "d_k such products, so its variance is d_k (left, the points follow the dotted line). Dividing by √d_k "
        "brings it back to 1 whatever the size. Without it, the bigger the vectors, the closer softmax gets to "
        "putting all the weight on one key (right)."
    )
    _chart(cache.figure(variance_figure, variance_stats()), "basics_variance")
    d_k = choice("d_k", D_KS, "basics_dk", 64, widget="select_slider")
    scores, raw, scaled = dk_example(d_k)
    _chart(cache.figure(dk_softmax_figure, scores, d_k), "basics_dk_softmax")
    st.caption(f"d_k = {d_k}: the largest weight is {raw:.3f} unscaled and {scaled:.3f} after ÷√{d_k}.")


def scoring() -> None:
    st.subheader("2 · Dot product or additive scoring")
    st.caption(
        "Two ways to score a key against a query. The scaled dot product q·k/√d needs queries and keys of the "
        "same size. Additive (Bahdanau) scoring, wᵥᵀ tanh(W_q q + W_k k), first maps both to a common size "
        f"({HIDDEN} here), so the sizes may differ. The weights W_q, W_k, wᵥ below are **random and fixed, not "
        "trained**: this section is about the formulas, not about what a trained model would score."
    )
    cols = st.columns(3)
    with cols[0]:
        draw = integer("Random vectors: draw", 0, 100, "basics_draw", 0)
    with cols[1]:
        q_size = integer("Query size", 2, 16, "basics_q_size", 4)
    with cols[2]:
        k_size = integer("Key size", 2, 16, "basics_k_size", 4)
    example = scoring_cached(draw, q_size, k_size)
    queries = [f"q{i + 1}" for i in range(N_QUERIES)]
    keys = [f"k{i + 1}" for i in range(N_KEYS)]
    score_hover = "query %{y}<br>key %{x}<br>score %{z:.3f}<extra></extra>"
    left, right = st.columns(2)
    with left:
        st.markdown("**Scaled dot product**")
        if example["dot_scores"] is None:
            st.info(f"Queries of size {q_size} and keys of size {k_size}: a dot product needs equal sizes. "
                    "Additive scoring (right) still works.")
        else:
            _chart(cache.figure(attention_heatmap,
                                example["dot_scores"], queries, keys, title="scores q·k / √d", diverging=True,
                                colorbar_title="score", hover=score_hover, dark=dark()), "basics_dot_scores")
            _chart(cache.figure(attention_heatmap, example["dot_pattern"], queries, keys, title="softmax weights",
                                dark=dark()),
                   "basics_dot_pattern")
    with right:
        st.markdown("**Additive**")
        _chart(cache.figure(attention_heatmap,
                            example["additive_scores"], queries, keys, title="scores wᵥᵀ tanh(W_q q + W_k k)",
                            diverging=True, colorbar_title="score", hover=score_hover, dark=dark()), "basics_add_scores")
        _chart(cache.figure(attention_heatmap, example["additive_pattern"], queries, keys, title="softmax weights",
                            dark=dark()),
               "basics_add_pattern")
    st.caption(
        "Additive scores are bounded (tanh lies between −1 and 1, so a score is at most Σ|wᵥ|), which is why "
        "they need no scaling; the dot product is cheaper (one matrix product for all pairs), which is why "
        "Transformers use it."
    )


def pooling() -> None:
    st.subheader("3 · Attention as kernel regression (Nadaraya–Watson)")
    st.caption(
        "The waist/weight example: we know the weight of a few people from their waist size and want to guess the "
        "weight for a new waist (the query). Each known waist is a key, its weight the value. A Gaussian kernel "
        "scores each key by how close it is, −(q − k)²/2σ², softmax turns the scores into weights, and the "
        "guess "
        "is the weighted average of the values. That is attention, with closeness instead of a dot product. "
        "The numbers are illustrative."
    )
    left, right = st.columns(2)
    with left:
        query = number("Query: waist (cm)", 45.0, 80.0, "basics_waist", 57.0, step=0.5)
    with right:
        sigma = number("Bandwidth σ (cm)", 0.5, 15.0, "basics_sigma", 1.0, step=0.5)
    keys, values = np.array(WAISTS), np.array(WEIGHTS)
    weights, prediction = nadaraya_watson(query, keys, values, sigma)
    left, right = st.columns(2)
    with left:
        _chart(cache.figure(kernel_weights_figure, keys, values, weights), "basics_kernel_weights")
    with right:
        _chart(cache.figure(kernel_regression_figure, keys, values, query, sigma), "basics_kernel_regression")
    top = np.argsort(weights)[::-1][:2]
    terms = " + ".join(f"{values[i]:g}·{weights[i]:.2f}" for i in top)
    st.caption(
        f"Prediction {prediction:.2f} kg ≈ {terms} + …. A small σ listens only to the nearest keys (at 57 cm with "
        "σ = 1, K2 and K3 get about half each: 43·0.5 + 48·0.5 = 45.5, the original example's guess); a large σ averages "
        "over everyone and the curve flattens toward the mean weight."
    )
