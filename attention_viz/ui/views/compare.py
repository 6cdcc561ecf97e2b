"""Compare: two heads one above the other; two sentences with the heads where a followed token's attention
moved most between them (coreference for any pair), one head of both and their
difference; the coreference preset, which fills the two sentences ("it" → "animal" with "tired",
→ "street" with "wide")."""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from ...analysis import difference
from ...analysis.pair_shift import align, default_follow, followable, pair_shift
from ...analysis.weighting import Weighted
from ...errors import ModelError
from ...figures.heatmap import attention_heatmap
from ...core.names import Group
from ...core.result import AttentionResult
from ...analysis.selection import Choice, Displayed, displayed, group_tokens, merged_labels, misalignment
from .. import cache, plain
from ..controls import attention_picker, for_group, layer_head_picker, pair_scale, weigh, weighting_picker, where_title
from ..tables import follow, head_table
from ..inputs import EXAMPLES, MAX_TEXT
from ..widgets import choice, forget, text
from ..export import chart, drawn_from
from ..theme import dark
from . import long_compare, long_head

TIRED = EXAMPLES["Coreference — tired (it → animal)"]
WIDE = EXAMPLES["Coreference — wide (it → street)"]
MODES = ("heads", "sentences", "coreference")
MODE_NAMES = {"heads": "two heads", "sentences": "two sentences", "coreference": "coreference preset"}


def render(result: AttentionResult) -> None:
    if long_head.applies(result):  # past the capture limit: two heads of the whole text
        long_compare.render(result)
        return
    mode = choice("Compare", MODES, "compare_mode", widget="radio", format_func=MODE_NAMES.get, horizontal=True)
    weighting = weighting_picker()
    if mode == "heads":
        two_heads(weigh(result, weighting))
    elif mode == "sentences":
        text_b = text("Sentence B (A is the sidebar's sentence)", "compare_text_b", WIDE, max_chars=MAX_TEXT)
        two_sentences(weigh(result, weighting), text_b, "compare_pair")
    else:
        coreference_preset(result.model, weighting)


def heatmap(shown: Displayed, weighed: Weighted, title: str, top: float | None,
            starts: tuple[int, int] = (0, 0)) -> go.Figure:
    """One of a pair: ``top`` is the pair's shared colour range; the title and colour bar name the
    weighting; ``starts``: the positions of the first query and key drawn (a single row)."""
    return attention_heatmap(shown.matrix, shown.query_labels, shown.key_labels, zmax=top, starts=starts,
                             title=f"{title}{weighed.suffix}", colorbar_title=weighed.quantity, dark=dark(),
                             hover=f"query %{{y}}<br>key %{{x}}<br>{weighed.quantity} %{{z:.4f}}<extra></extra>")


def two_heads(weighed: Weighted) -> None:
    result = weighed.result
    group = attention_picker(result, key="compare_group")
    weighed = for_group(weighed, group)
    columns = st.columns(2)
    last = result.n_layers(*group) - 1
    shown = []
    for column, side, start in zip(columns, "ab", (0, last)):  # start on two different heads
        with column:
            layer, head = layer_head_picker(result, group, key=f"compare_{side}", layer=start)
            shown.append((side, layer, head, displayed(result, Choice(group, layer, head, kind=weighed.kind))))
    top = pair_scale("compare_separate", *(s.matrix for *_, s in shown))
    for side, layer, head, one in shown:  # one above the other, each the page's width: every token labelled
        chart(st, heatmap(one, weighed, where_title(layer, head, weighed.layer_level), top), key=f"compare_chart_{side}")


def two_sentences(weighed: Weighted, text_b: str, key: str) -> None:
    """Sentence A (``weighed``) against ``text_b``: the heads where a followed token's attention moved
    most, then one head of both side by side on one colour range. ``key`` prefixes the widgets."""
    result = weighed.result
    if not text_b.strip():
        st.info("Type a second sentence to compare.")
        return
    try:
        other = weigh(cache.run(result.model, text_b, None), weighed.weighting, quiet=True).result
    except ModelError as error:
        plain.error(error)
        return
    group = attention_picker(result, key=f"{key}_group")
    weighed = for_group(weighed, group)
    moved = moved_heads(weighed, other, group, key)
    followed, (top_layer, top_head) = moved if moved is not None else (None, (0, 0))
    follow_the_table(key, (text_b, followed, top_layer, top_head))
    layer, head = layer_head_picker(result, group, key=key, layer=top_layer, head=top_head)
    picked = Choice(group, layer, head, kind=weighed.kind)
    a, b = displayed(result, picked), displayed(other, picked)
    top = pair_scale("compare_separate", a.matrix, b.matrix)  # one range for the rows and the patterns
    where = where_title(layer, head, weighed.layer_level)
    if followed is not None:  # the followed token's row in each sentence: what the table measured
        qa, qb = followed
        row_a = heatmap(Displayed(a.matrix[qa][None, :], [a.query_labels[qa]], a.key_labels), weighed,
                        f"A: “{a.query_labels[qa]}”, {where}", top, starts=(qa, 0))
        row_b = heatmap(Displayed(b.matrix[qb][None, :], [b.query_labels[qb]], b.key_labels), weighed,
                        f"B: “{b.query_labels[qb]}”, {where}", top, starts=(qb, 0))
        chart(st, row_a, key=f"{key}_row_a")
        with drawn_from(other.provenance):
            chart(st, row_b, key=f"{key}_row_b")
    # one above the other, each the page's width: every token labelled
    chart(st, heatmap(a, weighed, f"sentence A, {where}", top), key=f"{key}_a")
    with drawn_from(other.provenance):
        chart(st, heatmap(b, weighed, f"sentence B, {where}", top), key=f"{key}_b")
    reason = misalignment(a.query_labels, b.query_labels) or misalignment(a.key_labels, b.key_labels)
    if reason is not None:
        st.info(reason)
        return
    chart(st,
        attention_heatmap(difference(a.matrix, b.matrix), merged_labels(a.query_labels, b.query_labels),
                          merged_labels(a.key_labels, b.key_labels), diverging=True, dark=dark(),
                          title=f"A − B (red: A attends more){weighed.suffix}", colorbar_title="A − B"),
        key=f"{key}_diff",
    )


def follow_the_table(key: str, ranking: tuple) -> None:
    """A new sentence B (or token followed) ranks the heads anew: the pickers go back to its top head, so
    the figures show the head the table puts first (a link's own layer and head hold on its first run)."""
    last = st.session_state.get(f"_{key}_ranking")
    st.session_state[f"_{key}_ranking"] = ranking
    if last is not None and last != ranking:
        forget(f"{key}_layer")
        forget(f"{key}_head")


def moved_heads(weighed: Weighted, other: AttentionResult, group: Group,
                key: str) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """The token to follow (a token of A that B has too), and the table of heads ranked by how far its
    row moved from A to B; a clicked row points the layer and head pickers (drawn next) at that head.
    The followed token's (position in A, position in B) and the (layer, head) that moved most; None
    when the sentences share no token."""
    query_tokens, key_tokens = group_tokens(weighed.result, group)
    queries_a, keys_a = list(query_tokens.labels), list(key_tokens.labels)
    queries_b, keys_b = (list(tokens.labels) for tokens in group_tokens(other, group))
    queries = align(queries_a, queries_b)
    pairs = dict(followable(queries_a, queries_b, queries))
    if not pairs:
        st.info("The two sentences share no token, so there is none to follow from A to B.")
        return None
    start = default_follow(queries_a, queries_b, queries, query_tokens.special)
    qa = choice("Token to follow", list(pairs), f"{key}_follow", None if start is None else start[0],
                format_func=lambda i: f"{i}: {queries_a[i]}" + ("" if pairs[i] == i else f" (B: {pairs[i]})"),
                help="A token present in both sentences (a pronoun such as “it”, by default): the table ranks "
                     "the heads by how far its attention moved from A to B.")
    keys = align(keys_a, keys_b)
    shift = pair_shift(weighed.stack(group), other.stack(weighed.kind, *group), (qa, pairs[qa]), keys)
    word = plain.literal(queries_a[qa])
    st.markdown(f"Heads ranked by how far the attention of “{word}” moved from A to B: half the summed "
                "|A − B| of its two rows (total variation), each row as shares over the keys compared "
                "(0 = the same row, 1 = nothing in common). Click a row to open that head.")
    if not keys.by_position:
        st.caption(f"The sentences do not line up position by position: only the tokens present in both are "
                   f"compared ({len(keys.pairs)} of A's {len(keys_a)} and B's {len(keys_b)} tokens).")
    follow(head_table(shift.rows, f"{key}_shift"), f"{key}_shift", f"{key}_layer", f"{key}_head")
    return (qa, pairs[qa]), (shift.rows[0]["layer"], shift.rows[0]["head"])


def coreference_preset(model: str, weighting: str) -> None:
    """The Winograd pair as a preset that fills both sentences: "it" is the animal with *tired*, the
    street with *wide*."""
    st.markdown(f"**A:** {TIRED}  \n**B:** {WIDE}  \n*Your own pair: pick* two sentences *(A is the sidebar's "
                "sentence, B the box).*")
    tired = weigh(cache.run(model, TIRED, None), weighting)
    with drawn_from(tired.result.provenance):  # the preset's sentences, not the sidebar's
        two_sentences(tired, WIDE, "coref")
