"""What the causal-mask page shows, computed without Streamlit or torch: the mask, the scores
before and after it, how exactly zero the future is, and what an edit of a later token changes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..core.names import CROSS, DECODER_SELF
from ..core.result import AttentionResult


def causal_mask(n: int) -> np.ndarray:
    """``[n, n]`` bool, True where query i may see key j (j ≤ i)."""
    return np.tril(np.ones((n, n), dtype=bool))


def scores_before_mask(q: np.ndarray, k: np.ndarray) -> np.ndarray:
    """One head's ``Q Kᵀ / √d_k`` ``[n, n]`` from its ``[n, d_k]`` queries and keys."""
    return (q @ k.T) / np.sqrt(q.shape[-1])


@dataclass(frozen=True)
class Future:
    largest: float  # the largest weight above the diagonal (0.0 exactly for a causal head)
    smallest_row_sum: float


def future_weight(pattern: np.ndarray) -> Future:
    """How much a ``[n, n]`` pattern gives to later keys, and whether its rows still sum to 1."""
    upper = pattern[np.triu_indices(pattern.shape[-1], 1)]
    return Future(float(upper.max()) if upper.size else 0.0, float(pattern.sum(-1).min()))


def edited_words(words: Sequence[str], position: int, replacement: str) -> list[str]:
    """``words`` with the ``position``-th (1-based: 0 is ``<bos>``) replaced."""
    edited = list(words)
    edited[position - 1] = replacement
    return edited


def row_change(original: AttentionResult, changed: AttentionResult) -> np.ndarray:
    """Per decoder query row: the largest |Δ weight| over every layer, head, and the decoder's
    self- and cross-attention, between two teacher-forced runs of the same length."""
    groups = [g for g in (DECODER_SELF, CROSS) if g in original.attentions()]
    per_row = [
        np.abs(original.pattern(group, layer) - changed.pattern(group, layer)).max(axis=(0, 2))
        for group in groups
        for layer in range(original.n_layers(*group))
    ]
    return np.max(per_row, axis=0)


@dataclass(frozen=True)
class PaddingCheck:
    padded_labels: list[str]  # the shorter sentence's tokens followed by <pad>
    pattern: np.ndarray  # [T, T] its attention in the batch, heads averaged
    shorter: int  # which sentence (0 or 1) is the shorter
    on_padding: float  # the largest weight any real query puts on a padding key
    versus_alone: float  # the largest |Δ| between its real rows in the batch and run alone


def padding_check(patterns: np.ndarray, alone: Sequence[np.ndarray], labels: Sequence[Sequence[str]]) -> PaddingCheck:
    """``patterns`` [B, heads, T, T] of a padded batch, each sentence's own run ``alone``
    [heads, n_b, n_b], and its token labels → what padding did to the shorter sentence."""
    length = patterns.shape[-1]
    shorter = int(np.argmin([len(row) for row in labels]))
    n = len(labels[shorter])
    own = patterns[shorter]
    return PaddingCheck(
        padded_labels=list(labels[shorter]) + ["<pad>"] * (length - n),
        pattern=own.mean(axis=0),
        shorter=shorter,
        on_padding=float(own[..., n:].max()) if n < length else 0.0,
        versus_alone=float(np.abs(own[:, :n, :n] - alone[shorter]).max()),
    )
