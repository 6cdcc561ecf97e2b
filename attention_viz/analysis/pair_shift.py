"""Coreference for any pair of sentences: follow one token (e.g. "it") from sentence A to sentence B
and rank the heads by how far its attention row moved.

A move is the total variation distance between the token's two rows, ½·Σ|a − b| over the keys both
sentences share, each row taken as shares of its weight on those keys (so 0 = the same row, 1 = no
weight in common). When the sentences differ in a word or two at the same places (a minimal pair such
as tired / wide), keys line up by position; otherwise only the tokens present in both are compared,
matched in order by :class:`difflib.SequenceMatcher` over the token labels."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher

import numpy as np

from .checks import as_stack, normalize_rows, token_flags
from .selection import merged_labels, misalignment

# the pronouns a followed token defaults to: the words whose referent a Winograd pair changes
PRONOUNS = frozenset(("it", "he", "she", "they", "him", "her", "them", "his", "its", "their", "hers", "theirs"))


@dataclass(frozen=True)
class Alignment:
    """Which token of A stands for which token of B."""

    pairs: tuple[tuple[int, int], ...]  # (position in A, position in B), in order
    labels: tuple[str, ...]  # one per pair: "tired/wide" where the lined-up words differ
    by_position: bool  # True: positions line up; False: only the tokens present in both


@dataclass(frozen=True)
class Shift:
    """The followed token's rows in A and B over the compared keys, and the heads ranked by their move."""

    rows: list[dict]  # one per head, largest move first: layer, head, move, gained_b, gained_a
    a: np.ndarray  # [layers, heads, compared keys]: shares of A's row, each summing to 1 (0 where it has none)
    b: np.ndarray  # the same for B
    labels: tuple[str, ...]  # the compared keys


def align(labels_a: Sequence[str], labels_b: Sequence[str]) -> Alignment:
    """Positions line up when the sentences have as many tokens and differ in a few places only
    (:func:`misalignment`); otherwise the longest runs of equal labels are paired in order."""
    a, b = list(labels_a), list(labels_b)
    if misalignment(a, b) is None:
        return Alignment(tuple((i, i) for i in range(len(a))), tuple(merged_labels(a, b)), True)
    blocks = SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks()
    pairs = tuple((block.a + n, block.b + n) for block in blocks for n in range(block.size))
    return Alignment(pairs, tuple(a[i] for i, _ in pairs), False)


def followable(labels_a: Sequence[str], labels_b: Sequence[str], alignment: Alignment) -> list[tuple[int, int]]:
    """The lined-up pairs that hold the same token in both sentences: the tokens one can follow."""
    return [(i, j) for i, j in alignment.pairs if labels_a[i] == labels_b[j]]


def default_follow(labels_a: Sequence[str], labels_b: Sequence[str], alignment: Alignment,
                   special_a: Sequence[bool] | None = None) -> tuple[int, int] | None:
    """The token to follow when the user has not picked one: the first pronoun present in both;
    else the first shared token after the place where the sentences start to differ (its context
    changed); else the last shared one. Special tokens ([CLS], [SEP]) are skipped; None when the
    sentences share no other token."""
    special = token_flags(special_a, len(labels_a))
    shared = [(i, j) for i, j in followable(labels_a, labels_b, alignment) if not special[i]]
    if not shared:
        return None
    pronoun = next(((i, j) for i, j in shared if labels_a[i].strip().lower() in PRONOUNS), None)
    if pronoun is not None:
        return pronoun
    paired = dict(alignment.pairs)
    differ = next((i for i in range(len(labels_a)) if not special[i] and
                   (i not in paired or labels_a[i] != labels_b[paired[i]])), None)
    after = [(i, j) for i, j in shared if differ is not None and i > differ]
    return after[0] if after else shared[-1]


def pair_shift(stack_a: np.ndarray, stack_b: np.ndarray, follow: tuple[int, int], keys: Alignment) -> Shift:
    """How far the followed token's attention moved between A and B, in every head.

    ``stack_a``/``stack_b``: ``[layers, heads, query, key]`` of the same model; ``follow``: the
    token's (query position in A, in B); ``keys``: how A's keys line up with B's. For each head, the
    key that gained most in B (largest rise of its share) and the one that gained most in A."""
    a_all, b_all = as_stack(stack_a, square=False), as_stack(stack_b, square=False)
    if a_all.shape[:2] != b_all.shape[:2]:
        raise ValueError(f"the two runs have {a_all.shape[:2]} and {b_all.shape[:2]} (layers, heads): "
                         "compare sentences of the same model")
    qa, qb = follow
    if not (0 <= qa < a_all.shape[2] and 0 <= qb < b_all.shape[2]):
        raise IndexError(f"followed token ({qa}, {qb}) out of range for {a_all.shape[2]} and {b_all.shape[2]} queries")
    if not keys.pairs:
        raise ValueError("the two sentences share no token: nothing to compare")
    keys_a = [i for i, _ in keys.pairs]
    keys_b = [j for _, j in keys.pairs]
    a = normalize_rows(a_all[:, :, qa, keys_a].astype(np.float64))  # (layers, heads, compared keys)
    b = normalize_rows(b_all[:, :, qb, keys_b].astype(np.float64))
    change = b - a
    move = 0.5 * np.abs(change).sum(axis=-1)  # (layers, heads)
    heads = move.shape[1]
    rows = []
    for index in np.argsort(-move.ravel(), kind="stable"):  # ties keep (layer, head) order
        layer, head = divmod(int(index), heads)
        delta = change[layer, head]
        rows.append({
            "layer": layer, "head": head, "move": float(move[layer, head]),
            "gained_b": keys.labels[int(delta.argmax())] if delta.max() > 0 else "",
            "gained_a": keys.labels[int(delta.argmin())] if delta.min() < 0 else "",
        })
    return Shift(rows, a.astype(np.float32), b.astype(np.float32), keys.labels)
