"""Head detector: for every head, the share of its attention that lands where a known mechanism
would put it (previous token, duplicate token, induction, sink, self, a fixed offset, the user's
own pattern), averaged over the built-in probe set plus the user's sentence."""

from __future__ import annotations

import numpy as np
import streamlit as st

from ...analysis.detector import SCORES, top
from ...analysis.long_detector import ROWS, long_scores
from ...analysis.long_input import LongInput
from ...analysis.detector_view import (
    MEANINGS,
    NAMES,
    OFFSET,
    format_pairs,
    long_detector_scores,
    parse_pairs,
    pattern_scores,
    repeated_sequence_of,
    self_attentions,
)
from ...figures.detector import pairs_figure, score_heatmap
from ...core.names import DECODER_SELF, Group
from ...core.result import AttentionResult
from ...analysis.selection import GROUP_NAMES, GROUP_URL_NAMES, group_tokens
from .. import ablation_cache, cache, plain
from ..controls import token_picker
from ..state import take
from ..widgets import choice, integer
from .. import cache
from ..export import chart, with_setting
from ..heavy import heavy
from .long_head import applies, read_whole

EXPLANATION = (
    "Where a head looks on one sentence can be chance; the detector asks where it looks in general. Each "
    "score is the share of a head's attention that lands where one mechanism would put it, averaged over "
    "every query row of a built-in probe set (template sentences and random sequences typed twice) plus your "
    "sentence, so it lies between 0 and 1. *Previous token*: on the token just before. *Duplicate token*: on "
    "an earlier copy of the same token. *Induction*: on the token *after* an earlier copy — having seen "
    "[A][B] … [A], it looks at [B] to predict it next (Olsson et al. 2022). *Sink*: on the special tokens "
    "([CLS], [SEP], <bos>). *Self*: on itself. *Fixed offset d*: on the token d places away. *Your pattern*: "
    "on the query → key pairs you mark below. A high score says where a head looks, not that it matters: "
    "the Head ablation page measures that."
)
PAIRS = "detector_marked"  # session key of the user's marked (query, key) pairs
LINK_PAIRS = "detector_pairs"  # ...and their widget-style key: ``pairs=5-2,7-1`` in the link


def new_repeated_sequence(model: str) -> None:
    """Button callback: put a fresh repeated random sequence from the model's probe maker in the sidebar."""
    draw = st.session_state.get("detector_draw", 0) + 1
    st.session_state["detector_draw"] = draw
    text = repeated_sequence_of(cache.backend(model).probe_texts(2, seed=draw))
    if text is not None:
        st.session_state["text"] = text


def mark_pair() -> None:
    pair = (st.session_state["detector_query"], st.session_state["detector_key"])
    if pair not in st.session_state[PAIRS]:
        st.session_state[PAIRS].append(pair)


def clear_pairs() -> None:
    st.session_state[PAIRS] = []


def render(result: AttentionResult) -> dict:
    if applies(result):  # past the capture limit: the long text's rows scored from scattered cells
        render_whole(result.model, result.tokens.text)
        return {}
    st.markdown(EXPLANATION)
    groups = self_attentions(result)
    if not groups:
        plain.info(f"{result.model} has only cross-attention (target → source); the detector needs a "
                   "self-attention, whose queries and keys are positions of one sentence.")
        return {}
    group = groups[0]
    if len(groups) > 1:
        group = choice("Attention", groups, "detector_group", widget="radio", name=GROUP_URL_NAMES.get,
                       format_func=GROUP_NAMES.get, horizontal=True)
    offset = offset_and_sequence(result.model)
    score_charts(ablation_cache.scores(result.model, cache.identity(result), group, offset, result), offset)
    pairs = marked_pattern(result, group)
    return {"pairs": format_pairs(pairs)}


@st.cache_resource(max_entries=8, show_spinner="Scoring every head on the whole text…")
def long_sums(_long: LongInput, identity: tuple, offset: int) -> dict[str, tuple[np.ndarray, int]]:
    """Each score's row shares summed over the long text, per (``identity`` = (model, text), offset):
    every layer run and every head's target cells, heavy work."""
    with heavy("the detector's scores on the whole text"):
        return long_scores(_long, offset)


def render_whole(model: str, text: str) -> dict:
    """The detector on a text past the model's capture limit (a decoder's), from the model's name and
    the text: the text's rows scored from their target cells alone, with the probe set's."""
    st.markdown(EXPLANATION)
    long = read_whole(model, text, f"each score adds up the exact weights of its target cells in every head, on "
                      f"up to {ROWS:,} of the text's rows evenly spaced, never a whole table.")
    offset = offset_and_sequence(model)
    summed = long_sums(long, (model, text), offset)
    score_charts(long_detector_scores(ablation_cache.probe_runs(model), summed, DECODER_SELF, offset), offset)
    st.subheader("Your pattern")
    st.caption("Marking query → key pairs picks them from the text's tokens: for a text this long, paste the "
               "passage you mean alone and mark them there.")
    return {}


def offset_and_sequence(model: str) -> int:
    """The fixed offset d (a slider) beside the button that types a repeated random sequence in."""
    left, right = st.columns([2, 1])
    with left:
        offset = integer("Fixed offset d (key = query + d)", -8, 8, "detector_offset", -2)
    with right:
        st.button("Random repeated sequence", key="detector_repeat", on_click=new_repeated_sequence,
                  args=(model,), help="Fills the sentence with a random sequence typed twice, as in the probes.")
    return offset


def score_charts(scores: dict[str, np.ndarray], offset: int) -> None:
    """Every score's layers × heads heatmap, two a row, each with what it measures and its top head."""
    names = [*SCORES, OFFSET]
    titles = {**NAMES, OFFSET: f"fixed offset {offset:+d}"}
    meanings = {**MEANINGS, OFFSET: f"share on the token {abs(offset)} place(s) {'after' if offset > 0 else 'before'}"
                if offset else "share on the token itself (d = 0)"}
    columns = st.columns(2)
    for index, name in enumerate(names):
        with columns[index % 2], with_setting("with the built-in probe set"):  # averaged over the probes too
            chart(st, cache.figure(score_heatmap, scores[name], titles[name]), key=f"detector_chart_{name}")
            layer, head, value = top(scores[name], 1)[0]
            st.caption(f"{meanings[name]}. Highest: layer {layer}, head {head} ({value:.2f}).")


def marked_pattern(result: AttentionResult, group: Group) -> list[tuple[int, int]]:
    """The user's own pattern: query → key pairs marked on their sentence, and each head's share on them."""
    st.subheader("Your pattern")
    labels = list(group_tokens(result, group)[0].labels)
    raw = take(LINK_PAIRS)
    if raw is not None:
        st.session_state[PAIRS] = parse_pairs(raw, len(labels))
    marked = st.session_state.setdefault(PAIRS, [])
    kept = [(q, k) for q, k in marked if q < len(labels) and k < len(labels)]
    if len(kept) < len(marked):
        st.caption("Pairs beyond the end of this sentence were dropped.")
        st.session_state[PAIRS] = kept
    query_col, key_col, buttons = st.columns([2, 2, 1])
    with query_col:
        token_picker("Query", labels, "detector_query", min(1, len(labels) - 1))
    with key_col:
        token_picker("attends to key", labels, "detector_key", 0)
    with buttons:
        st.button("Mark pair", key="detector_mark", on_click=mark_pair)
        st.button("Clear", key="detector_clear", on_click=clear_pairs)
    if not kept:
        st.caption("Mark query → key pairs on your sentence; each head's score is then its share of attention on "
                   "them, averaged over the marked query rows (of your sentence only: the positions are yours).")
        return kept
    left, right = st.columns(2)
    with left:
        chart(st, cache.figure(score_heatmap,
                               pattern_scores(result, group, kept), "your pattern"), key="detector_pattern")
    with right:
        chart(st, cache.figure(pairs_figure, labels, kept), key="detector_pairs_chart")
    return kept
