"""From a result and the user's choices to the one matrix a view draws (pure numpy).

The choices: which attention (encoder self, decoder self, cross), layer, head or a reduction over
heads (mean, max), word-level grouping, hiding special tokens, and a display threshold.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import drop_special, head_max, head_mean, head_stats
from .cross_stats import cross_head_stats
from ..core.names import CROSS, DECODER_SELF, ENCODER_SELF, Group
from ..core.result import AttentionResult
from ..inputs.tokens import Tokens, group_words

GROUP_NAMES = {
    ENCODER_SELF: "encoder self-attention",
    DECODER_SELF: "decoder self-attention (causal)",
    CROSS: "cross-attention (target → source)",
}
GROUP_URL_NAMES = {ENCODER_SELF: "encoder", DECODER_SELF: "decoder", CROSS: "cross"}  # in links
REDUCTIONS = ("mean", "max")


@dataclass(frozen=True)
class Choice:
    group: Group = ENCODER_SELF
    layer: int = 0
    head: int | str = 0  # a head index, or "mean" / "max" over heads
    words: bool = False
    hide_special: bool = False
    threshold: float = 0.0
    kind: str = "pattern"  # or "value_norm": the value-weighted norms (analysis/weighting.py)


@dataclass
class Displayed:
    matrix: np.ndarray  # [query, key]
    query_labels: list[str]
    key_labels: list[str]
    notes: list[str] = field(default_factory=list)  # what the page must tell the user


def group_tokens(result: AttentionResult, group: Group) -> tuple[Tokens, Tokens]:
    """(query tokens, key tokens) of an attention: cross-attention reads target → source."""
    target = result.target_tokens if result.target_tokens is not None else result.tokens
    if group == ENCODER_SELF:
        return result.tokens, result.tokens
    if group == DECODER_SELF:
        return target, target
    return target, result.tokens


def reduce_heads(layer_patterns: np.ndarray, head: int | str) -> np.ndarray:
    """[heads, q, k] → [q, k]: one head, or the mean / max over heads."""
    if head == "mean":
        return head_mean(layer_patterns)
    if head == "max":
        return head_max(layer_patterns)
    return layer_patterns[int(head)]


def unit_special(tokens: Tokens, words: bool) -> np.ndarray:
    """Which display units are special tokens (units are tokens, or words when grouped)."""
    if not words:
        return np.array(tokens.special, dtype=bool)
    return np.array([len(g) == 1 and tokens.special[g[0]] for g in tokens.word_groups()], dtype=bool)


def displayed(result: AttentionResult, choice: Choice) -> Displayed:
    patterns = result.array(choice.group, choice.layer, choice.kind)  # [heads, q, k]
    weights = choice.kind == "pattern"  # value-weighted norms are no distribution: nothing to renormalize
    matrix = reduce_heads(patterns, choice.head)
    query_tokens, key_tokens = group_tokens(result, choice.group)
    notes = []
    if choice.head == "max" and weights:
        notes.append("Max over heads: each cell is its strongest head, so rows no longer sum to 1.")
    if choice.words:
        matrix, query_labels = group_words(matrix, query_tokens, key_tokens=key_tokens)
        key_labels = key_tokens.words()
        notes.append("Word level: a word's pieces are summed as keys and averaged as queries"
                     + (" (rows still sum to 1)." if weights else "."))
    else:
        query_labels, key_labels = list(query_tokens.labels), list(key_tokens.labels)
    if choice.hide_special:
        q_special, k_special = unit_special(query_tokens, choice.words), unit_special(key_tokens, choice.words)
        if (~q_special).any() and (~k_special).any():
            matrix, rows, cols = drop_special(matrix, q_special, k_special, renormalize=weights)
            query_labels = [query_labels[i] for i in rows]
            key_labels = [key_labels[i] for i in cols]
            notes.append("Special tokens hidden: each row is renormalized over the remaining tokens." if weights
                         else "Special tokens hidden (the norms of the remaining tokens are unchanged).")
        else:
            notes.append("Nothing left once special tokens are hidden, so they are shown.")
    if choice.threshold > 0:
        notes.append(f"{'Weights' if weights else 'Norms'} below {choice.threshold:.2f} are left blank.")
    return Displayed(matrix.astype(np.float32), query_labels, key_labels, notes)


def head_table(result: AttentionResult, group: Group) -> list[dict]:
    """One row per head of ``group`` with its statistics and role. Cross-attention relates two
    different sentences, so the statistics that compare query and key positions are left out."""
    stack = result.stack("pattern", *group)
    _, key_tokens = group_tokens(result, group)
    if group == CROSS:
        return cross_head_stats(stack, key_tokens.special)
    return head_stats(stack, key_tokens.special)


def default_token(labels: list[str], wanted: str, fallback: int) -> int:
    """The position of ``wanted`` (case-insensitive) among ``labels``, else ``fallback``."""
    lowered = [label.lower() for label in labels]
    return lowered.index(wanted) if wanted in lowered else fallback


def merged_labels(a: list[str], b: list[str]) -> list[str]:
    """Axis labels for a difference of two sentences: "tired/wide" where they differ."""
    return [x if x == y else f"{x}/{y}" for x, y in zip(a, b)]


def misalignment(a: list[str], b: list[str]) -> str | None:
    """Why a position-by-position difference of two sentences would mislead, or None when it is
    fair: the same number of tokens, differing in a few positions only (a minimal pair such as
    "tired" / "wide"), so each row and column compares the same word in both."""
    if len(a) != len(b):
        return (f"The sentences have {len(a)} and {len(b)} tokens, so their positions do not line up: "
                "a cell-by-cell difference needs sentences that differ in a word or two at the same place.")
    differing = sum(x != y for x, y in zip(a, b))
    if differing > max(1, len(a) // 4):
        return (f"The sentences differ in {differing} of {len(a)} positions: a cell-by-cell difference would "
                "subtract different words from each other. Change a word or two of the first sentence "
                "(as in the tired / wide pair) to see a difference.")
    return None


COLOUR_SCALES = ("linear", "row", "log")
LOG_FLOOR = 1e-4  # weights below this share one colour on the log scale


def rescaled(matrix: np.ndarray, scale: str, quantity: str = "weight") -> tuple[np.ndarray, str]:
    """What the colours show and the colour bar's title (``quantity`` names a cell: "attention
    weight", "value-weighted norm"). ``row``: each row divided by its largest value (a long row's
    peak is dark even when it is 0.02); ``log``: log10 of the value, so small values are told apart.
    NaN (blanked) cells stay NaN."""
    if scale == "row":
        top = np.nanmax(np.where(np.isfinite(matrix), matrix, -np.inf), axis=1, keepdims=True)
        return (matrix / np.where(top > 0, top, 1.0)).astype(np.float32), "÷ row's largest"
    if scale == "log":
        return np.log10(np.maximum(matrix, LOG_FLOOR)).astype(np.float32), f"log10 {quantity}"
    return matrix, quantity


def log_range(matrix: np.ndarray) -> tuple[float, float]:
    """The colour range of the log scale: from the floor to the largest value (at least 1, so
    weights keep their fixed 10⁻⁴…1 range; norms can exceed 1)."""
    finite = matrix[np.isfinite(matrix)]
    top = float(finite.max()) if finite.size else 1.0
    return float(np.log10(LOG_FLOOR)), max(0.0, float(np.log10(max(top, LOG_FLOOR))))


def window(shown: Displayed, query_start: int, key_start: int, size: int) -> Displayed:
    """``size`` × ``size`` of ``shown`` from the given query and key positions (long inputs)."""
    rows, cols = slice(query_start, query_start + size), slice(key_start, key_start + size)
    return Displayed(shown.matrix[rows, cols], shown.query_labels[rows], shown.key_labels[cols], shown.notes)
