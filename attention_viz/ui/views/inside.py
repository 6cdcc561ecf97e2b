"""Inside one head: X → Q, K, V → QKᵀ → ÷√d_k → mask → softmax → × V → concat → W_O, every
matrix on the real model and the user's sentence, plus self-attention without any learned weight,
softmax(X Xᵀ) X, beside it."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from ...figures.heatmap import attention_heatmap
from ...figures.inside import matrix_heatmap, saturation_figure
from ...backends.inside import InsideHead
from ...core.names import ENCODER_SELF
from ...core.result import AttentionResult
from .. import cache
from ..controls import layer_head_picker, pair_scale
from ..widgets import flag, integer
from ..theme import dark
from ..export import chart, drawn_from
from ..fallback import runs_another_model
from ..plain import literal
from ...backends.registry import DEFAULT_MODEL

GROUP = ENCODER_SELF
WINDOW = 96  # tokens drawn at most per axis: 17 charts of 512 tokens would send ~13 MB


@st.cache_resource(max_entries=24, show_spinner="Computing the head step by step…")
def compute(model: str, ids: tuple[int, ...], layer: int, head: int, scale: bool) -> InsideHead:
    """Cached per (model, sentence, layer, head, scale); shared and never mutated."""
    return cache.backend(model).inside_head(ids, layer, head, scale)


@dataclass(frozen=True)
class Shown:
    ih: InsideHead  # the head as the switch asks (scaled or not)
    real: InsideHead  # the head as the model computes it (scaled)
    window: slice  # the tokens drawn
    labels: list[str]  # their labels


def _chart(figure, key: str) -> None:
    chart(st, figure, key=key, config={"displaylogo": False})


def _figure(builder, *args, **kwargs):
    """The cached figure, in the page's theme."""
    return cache.figure(builder, *args, dark=dark(), **kwargs)


def token_window(n: int) -> slice:
    """All tokens, or for long inputs a window of WINDOW tokens the user slides along."""
    if n <= WINDOW:
        return slice(0, n)
    start = integer("First token shown", 0, n - WINDOW, "inside_window", 0)
    st.caption(f"Long input: the figures show tokens {start}…{start + WINDOW - 1} of {n} (rows, and columns of the "
               f"{n}×{n} matrices); every number was computed on all {n} tokens.")
    return slice(start, start + WINDOW)


def render(result: AttentionResult) -> None:
    if not cache.backend(result.model).can_open_heads or GROUP not in result.attentions():
        # a head recomputed by hand needs an encoder of ours: minilm, on the same sentence
        runs_another_model(DEFAULT_MODEL, f"this view recomputes a head by hand from our own encoder's weights, and "
                                          f"{literal(result.model)} is not one of them; here is {DEFAULT_MODEL} on the "
                                          "same sentence.")
        result = cache.run(DEFAULT_MODEL, result.tokens.text)
        with drawn_from(result.provenance):
            steps(result)
        return
    steps(result)


def steps(result: AttentionResult) -> None:
    """Every step of one head of ``result``'s encoder (a model that can open its heads)."""
    layer, head = layer_head_picker(result, GROUP, key="inside", reductions=False)
    scale = flag("Divide the scores by √d_k (as the model does)", "inside_scale", True, toggle=True)
    ids = tuple(result.tokens.ids)
    ih = compute(result.model, ids, layer, head, scale)
    real = ih if scale else compute(result.model, ids, layer, head, True)
    w = token_window(ih.n)
    shown = Shown(ih, real, w, list(result.tokens.labels)[w])
    n, d, dk = ih.n, ih.d_model, ih.d_k

    st.markdown(
        f"One attention head, computed by hand from the weights of layer {layer} and checked against the "
        f"model. Each of the {n} tokens enters as a row of X, a vector of {d} numbers. The head multiplies X "
        f"by three learned matrices to get a *query*, a *key* and a *value* of {dk} numbers per token. "
        "Comparing each query with every key gives the scores, softmax turns each row of scores into "
        "weights that sum to 1, and each token's output is the weighted average of the values."
    )

    # the steps folded, the first open, so the page is short; a folded step still draws its charts, so
    # opening one shows them at once
    for number, (step, draw) in enumerate(STEPS.items(), start=1):
        with st.expander(f"{number} · {step}", expanded=number == 1, key=f"inside_step_{number}"):
            draw(shown)


def projections(shown: Shown) -> None:
    ih, w, labels, eq = shown.ih, shown.window, shown.labels, shown.ih.equations()
    layer, head, n, d, dk, hk = ih.layer, ih.head, ih.n, ih.d_model, ih.d_k, f"head {ih.head}"
    st.caption(
        f"X is the input of layer {layer}: " + ("the embeddings of the tokens with their positions added (BERT "
        "also adds a segment embedding and normalizes the sum)." if layer == 0 else f"the output of layer {layer - 1}.")
        + f" Rows are tokens, columns the {d} dimensions. Red is positive, blue negative."
    )
    _chart(_figure(matrix_heatmap, ih.x[w], f"X ({n}×{d}), input of layer {layer}", row_labels=labels), "inside_x")
    columns = st.columns(3)
    for column, name, weight in zip(columns, ("Q", "K", "V"), (ih.w_q, ih.w_k, ih.w_v)):
        with column:
            _chart(_figure(matrix_heatmap, weight, f"W_{name} of {hk} ({d}×{dk})", row_title="input dimension",
                                          col_title="output dimension", height=420), f"inside_w_{name.lower()}")
    st.caption(
        f"The head's three weight matrices, learned in training: {d} rows (one per input dimension) × {dk} "
        f"columns. The layer's W_Q is {d}×{d}; this head uses its {dk} columns {head * dk}…{(head + 1) * dk - 1}."
    )
    columns = st.columns(3)
    for column, name, matrix in zip(columns, ("q", "k", "v"), (ih.q[w], ih.k[w], ih.v[w])):
        with column:
            _chart(_figure(matrix_heatmap, matrix, name.upper(), row_labels=labels), f"inside_{name}")
            st.caption(eq[name])


def scores_and_softmax(shown: Shown) -> None:
    ih, real, w, labels, eq = shown.ih, shown.real, shown.window, shown.labels, shown.ih.equations()
    layer, n, dk, hk, scale = ih.layer, ih.n, ih.d_k, f"head {ih.head}", ih.scale
    left, right = st.columns(2)
    with left:
        _chart(_figure(attention_heatmap,
                      ih.scores_raw[w, w], labels, title="Q Kᵀ: every query · every key", diverging=True,
                      colorbar_title="q·k", hover="query %{y}<br>key %{x}<br>q·k %{z:.3f}<extra></extra>"),
               "inside_scores_raw")
        st.caption(eq["scores_raw"] + ". A large value means the query and the key point the same way.")
    with right:
        title = f"QKᵀ ÷ √{dk}" if scale else "QKᵀ, not scaled (the switch is off)"
        _chart(_figure(attention_heatmap,
                      ih.scores[w, w], labels, title=title, diverging=True, colorbar_title="score",
                      hover="query %{y}<br>key %{x}<br>score %{z:.3f}<extra></extra>"), "inside_scores")
        st.caption(eq["scores"] + ". Dividing keeps the scores in a range where softmax still spreads weight.")
    st.info(
        f"Mask: none. Masks hide keys a query must not see: padding when several sentences of different lengths "
        f"share a batch, or future tokens in a decoder. One sentence in an encoder has no padding, so all "
        f"{n}×{n} query–key pairs are allowed (the mask is all True) and nothing is set to −∞."
    )
    if scale:
        _chart(_figure(attention_heatmap,
                      ih.pattern[w, w], labels, title=f"softmax: layer {layer}, {hk}"), "inside_pattern")
        st.caption(eq["pattern"] + ". This is the head's attention pattern, as in the head heatmap view.")
    else:
        top = pair_scale("inside_separate", real.pattern[w, w], ih.pattern[w, w])
        left, right = st.columns(2)
        with left:
            _chart(_figure(attention_heatmap,
                          real.pattern[w, w], labels, title=f"softmax(QKᵀ / √{dk}): the model", zmax=top),
                   "inside_pattern_scaled")
        with right:
            _chart(_figure(attention_heatmap,
                          ih.pattern[w, w], labels, title="softmax(QKᵀ): not scaled", zmax=top),
                   "inside_pattern")
        _chart(cache.figure(saturation_figure, real.pattern[w], ih.pattern[w], labels, dk), "inside_saturation")
        st.caption(
            f"Without ÷√{dk} the scores are {dk ** 0.5:.2g}× larger, and softmax exaggerates differences: most "
            "rows put nearly all their weight on one key (largest weight near 1, entropy near 0 bits). Such a "
            "saturated softmax has almost no gradient, which is why the paper scales. From here on the "
            "numbers are those of this hypothetical unscaled layer."
        )


def heads_and_output(shown: Shown) -> None:
    ih, w, labels, eq = shown.ih, shown.window, shown.labels, shown.ih.equations()
    n, d, dk, hk = ih.n, ih.d_model, ih.d_k, f"head {ih.head}"
    _chart(_figure(matrix_heatmap,
                  ih.context[w], f"{hk} = weights · V ({n}×{dk})", row_labels=labels), "inside_context")
    st.caption(eq["context"] + ": each token's row is the weighted average of the value rows.")
    cols = (ih.columns.start, ih.columns.stop)
    _chart(_figure(matrix_heatmap,
                  ih.concat[w], f"Concat of the {ih.h} heads ({n}×{d}); {hk} outlined", row_labels=labels,
                  highlight_cols=cols), "inside_concat")
    st.caption(eq["concat"] + ". Every head works on its own; their outputs are laid side by side.")
    full = flag(f"Show the whole W_O ({d}×{d}, about 0.8 MB to draw)", "inside_full_w_o", toggle=True)
    left, right = st.columns(2)
    with left:
        if full:
            _chart(_figure(matrix_heatmap,
                          ih.w_o, f"W_O ({d}×{d}); rows of {hk} outlined", row_title="concat dimension",
                          col_title="output dimension", height=520, highlight_rows=cols), "inside_w_o")
        else:
            _chart(_figure(matrix_heatmap, ih.w_o[ih.columns], f"the {dk} rows of W_O that {hk} feeds ({dk}×{d})",
                                          row_title="row of W_O (head dimension)", col_title="output dimension",
                                          height=520), "inside_w_o")
            st.caption(f"{hk} ({n}×{dk}) · these rows ({dk}×{d}) is its share of the output; the output is the "
                       f"sum of the {ih.h} heads' shares plus the bias b_O.")
    with right:
        _chart(_figure(matrix_heatmap, ih.output[w], f"attention output ({n}×{d})", row_labels=labels, height=520),
               "inside_output")
    st.caption(
        eq["output"] + ". W_O mixes the heads back into one vector per token; the layer then adds this to X "
        "(the residual connection), normalizes, and applies the feed-forward network."
    )


def without_weights(shown: Shown) -> None:
    ih, w, labels, eq = shown.ih, shown.window, shown.labels, shown.ih.equations()
    n, d = ih.n, ih.d_model
    st.markdown(
        "Before learned projections, self-attention was simply softmax(X Xᵀ) X: each token scores every token "
        "by the dot product of their vectors (their similarity), and takes the weighted average of the vectors "
        "themselves. Here it runs on the same X as the head. A token's vector is most similar to itself, so the "
        "raw version mostly looks at the token itself (or at copies of the same word); W_Q and W_K let a real "
        "head look for something *other* than itself, such as the previous word or the subject."
    )
    left, right = st.columns(2)
    with left:
        _chart(_figure(attention_heatmap,
                      ih.raw_pattern[w, w], labels, title="softmax(X Xᵀ): no W, no scaling"), "inside_raw")
        st.caption(eq["raw"])
    with right:
        _chart(_figure(attention_heatmap, shown.real.pattern[w, w], labels,
                                         title=f"the real head {ih.head} of layer {ih.layer}"), "inside_real")
    _chart(_figure(matrix_heatmap,
                  ih.raw_context[w], f"softmax(X Xᵀ) X ({n}×{d}): each row a weighted average of X's rows",
                  row_labels=labels), "inside_raw_context")


STEPS = {  # each step's title → what draws it
    "X → Q, K, V": projections,
    "Scores, scaling, mask, softmax": scores_and_softmax,
    "Weighted sum of V, concatenation of the heads, W_O": heads_and_output,
    "Self-attention without learned weights: softmax(X Xᵀ) X": without_weights,
}
