"""Head ablation: remove heads during the forward and measure what changed, per model kind —
an encoder's sentence embedding and token representations, an encoder–decoder's translation and
its words' log-probabilities, a decoder's next-token loss — beside the attention before and after,
the coreference study and the shipped per-head importance table (Michel et al. 2019)."""

from __future__ import annotations

import streamlit as st

from ...analysis.ablation import MODES
from ...analysis.ablation_view import (chosen_heads, following_labels, head_item, head_options, marked,
                                       shipped_importance, toggled)
from ...analysis.coreference import positions
from ...figures.ablation import log_prob_bars, movement_bars, pattern_pair, study_bars
from ...figures.grid import heads_grid
from ...backends.head_effects import Comparison
from ...core.result import AttentionResult
from ...analysis.selection import Choice, displayed
from .. import ablation_cache, cache, plain
from ..controls import attention_picker, layer_head_picker, token_picker
from ..state import take
from ..tables import clicked_tile
from ..widgets import choice, flag, integer
from .. import cache
from ..theme import dark
from ..export import chart

EXPLANATION = (
    "A large attention weight is no proof that a head matters: the vector it moves may be tiny, or later "
    "layers may ignore what it writes (“attention is not explanation”). **Ablation** asks the causal question: "
    "run the model again without the chosen heads and measure how far its output moves. *Zero* ablation "
    "replaces a head's output (its context, before the output projection) with zeros; *mean* ablation "
    "replaces it with the head's average output over a set of probe sentences, which keeps the next layers' "
    "input in its usual range. Everything else in the model is left as it was."
)
MODE_NAMES = {"zero": "zero", "mean": "mean over the probe set"}
STUDY_DRAWS = 20  # random sets of heads the top heads are compared with


def heads_picker(options: list[str], key: str) -> list[str]:
    """A multiselect of heads; the link carries them as the CLI's ``--ablate`` value. A head clicked
    in the grid (:func:`grid_picker`) is added or removed here, before the widget is drawn."""
    raw = take(key)
    wanted = raw.split(",") if raw is not None else st.session_state.get(key, [])
    wanted = toggled(wanted, st.session_state.pop(f"_{key}_toggle", None))
    st.session_state[key] = [item for item in dict.fromkeys(s.strip() for s in wanted) if item in options]
    return st.multiselect(
        # Enter takes the first option starting with what was typed: "3.1" is 3.1 alone, never 3.10 and 3.11
        # too (Streamlit's "Select all matches" row would come first and take them all)
        "Heads to remove", options, key=key, placeholder="layer.head, e.g. 3.1", filter_mode="prefix",
        select_all=False,
        help="layer.head, 0-indexed; cross:L.H and decoder:L.H name the other attentions of an encoder–decoder",
    )


def render(result: AttentionResult) -> dict:
    st.markdown(EXPLANATION)
    backend = cache.backend(result.model)
    if not backend.can_ablate:
        plain.info(f"{result.model} cannot have heads removed: this page needs a multi-head Transformer whose "
                   "forward we run ourselves (minilm, toy-translate, induction, or an hf: Llama, Qwen2, "
                   "Mistral, GPT-NeoX or GPT-2 folder).")
        return {}
    left, right = st.columns(2)
    with left:
        items = heads_picker(head_options(result), "ablation_ablate")
    with right:
        mode = choice("Replace the removed heads' output with", MODES, "ablation_ablation", widget="radio",
                      format_func=MODE_NAMES.get, horizontal=True)
    grid_picker(result, items, "ablation_ablate")  # the page's width: a thumbnail per head, large enough to hit
    if items:
        heads = chosen_heads(items, result)
        comparison = ablation_cache.comparison(result.model, result.tokens.text, result.meta.get("target"), heads, mode)
        effect(comparison)
        patterns(comparison)
    else:
        st.info("Pick one or more heads above, or click them in the grid, to see the model with and without them.")
    if backend.shape == "encoder-only":
        coreference(result, mode)
    importance(result.model)
    return {"ablate": ",".join(items), "ablation": mode}


def grid_picker(result: AttentionResult, items: list[str], key: str) -> None:
    """Every head of one attention as a thumbnail: a click puts that head in the set of ``key``'s
    multiselect, or takes it out. The multiselect is already drawn in this run, so the click is
    applied on a rerun (by :func:`heads_picker`); the grid comes back under a new key, with no
    selection left in it, so the next click on any head (the same one too) counts."""
    group = attention_picker(result, key="ablation_pick_group")
    clicks = st.session_state.setdefault(f"_{key}_clicks", 0)
    figure = heads_grid(result.stack("pattern", *group), marked=marked(items, result, group),
                        title="or click heads: red = removed, click again to put one back",
                        click="click to remove it (or put it back)")
    event = chart(st, figure, key=f"ablation_pick_{clicks}", on_select="rerun", selection_mode="points")
    clicked = clicked_tile(event, result.pattern(group, 0).shape[0])
    if clicked is not None:
        st.session_state[f"_{key}_toggle"] = head_item(result, group, *clicked)
        st.session_state[f"_{key}_clicks"] = clicks + 1
        st.rerun()


def effect(comparison: Comparison) -> None:
    """The model's output before and after, in the terms of its kind."""
    summary = comparison.summary()
    st.subheader("What changed")
    plain.caption(comparison.ablation.describe())
    if "embedding_cosine" in summary:  # encoder
        st.metric("Cosine of the sentence embeddings, before and after", f"{summary['embedding_cosine']:.6f}")
        chart(st, cache.figure(movement_bars, list(comparison.before.tokens.labels), summary["token_movement_list"],
                                      "how far each token's final representation moved"), key="ablation_movement")
        st.caption("Sentence embedding: the mean of the final token states (all-MiniLM-L6-v2's pooling); "
                   "1 − cosine per token: 0 = the token's representation points the same way as before.")
        return
    left, middle, right = st.columns(3)
    left.metric("Loss before (nats per token)", f"{summary['loss_before']:.4f}")
    middle.metric("Loss after", f"{summary['loss_after']:.4f}")
    right.metric("Change", f"{summary['change']:+.4f}")
    if "translation_before" in summary:  # encoder–decoder, greedy
        before, after = st.columns(2)
        with before:
            st.markdown("**Translation before**")
            st.text(summary["translation_before"])
        with after:
            st.markdown("**Translation after**")
            st.text(summary["translation_after"])
        labels = summary["words"]
        st.caption("Log-probabilities of the words of the original translation, read by the model with and "
                   "without the heads (teacher-forced), so each word is compared with itself.")
    else:
        labels = following_labels(comparison.before, len(summary["log_prob_before"]))
        st.caption("Each bar is the log-probability the model gave the token that actually came next.")
    chart(st, cache.figure(log_prob_bars, labels, summary["log_prob_before"], summary["log_prob_after"],
                                  "log p(next token), before and after"), key="ablation_log_probs")


def patterns(comparison: Comparison) -> None:
    st.subheader("Attention before and after")
    group = attention_picker(comparison.before, key="ablation_group")
    n_layers = comparison.before.n_layers(*group)
    layer, head = layer_head_picker(comparison.before, group, key="ablation", layer=n_layers - 1)
    picked = Choice(group, layer, head)
    before, after = displayed(comparison.before, picked), displayed(comparison.after, picked)
    chart(st, cache.figure(pattern_pair, before.matrix, after.matrix, (before.query_labels, before.key_labels),
                                 (after.query_labels, after.key_labels), ("before", "after"), dark=dark()),
                    key="ablation_patterns")
    st.caption("One colour range for both maps. A removed head's own weights do not change (only its output is "
               "dropped); heads in later layers read a changed input, and their weights can move.")


def coreference(result: AttentionResult, mode: str) -> None:
    """Do the heads where the query token attends most to the key token matter more than any heads?"""
    st.subheader("Coreference: the top heads against random heads")
    labels = list(result.tokens.labels)
    found = positions(labels)
    st.caption("Remove the heads where the first token attends most to the second (“it” → “animal” in the "
               f"coreference example), then {STUDY_DRAWS} random sets of as many other heads, and compare how far "
               "the first token's final representation moves.")
    left, middle, right = st.columns(3)
    with left:
        query = token_picker("Token", labels, "ablation_query", found["it"] if found else 0)
    with middle:
        key = token_picker("attending to", labels, "ablation_key", found["animal"] if found else 0)
    with right:
        count = integer("Heads removed", 1, 6, "ablation_count", 3)
    if not flag("Run the study", "ablation_study", default=found is not None):
        return
    outcome = ablation_cache.study(result.model, result.tokens.text, query, key, count, mode)
    chart(st, cache.figure(study_bars, outcome["top_heads"], outcome["top_movement"], outcome["random_movements"]),
                    key="ablation_study_chart")
    plain.caption(f"Top heads ({mode} ablation): {', '.join(outcome['top_heads'])}, weights "
                  f"{', '.join(f'{w:.2f}' for w in outcome['top_weights'])}. Without them the token moved "
                  f"{outcome['top_movement']:.5f}; random sets moved it {outcome['random_mean']:.5f} on average, "
                  f"and {100 * outcome['random_at_least_as_large']:.0f} % of them at least as much.")


def importance(model: str) -> None:
    """The shipped table: each head removed alone over the held-out set."""
    table = shipped_importance(model)
    if table is None:
        return
    st.subheader("Each head alone (Michel et al. 2019)")
    st.caption(f"Each head removed on its own ({table.ablation}) over {table.pairs} held-out sentence pairs; the "
               f"drop is from exact match {100 * table.baseline['exact_match']:.1f} % and alignment accuracy "
               f"{100 * table.baseline['alignment']:.1f} % with every head. Measured by {table.command}.")
    st.dataframe(table.rows, key="ablation_importance", hide_index=True, on_select="ignore")
