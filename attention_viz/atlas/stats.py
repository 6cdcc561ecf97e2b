"""Per-sentence head statistics for the atlas (numpy only), and the fixed-offset baseline.

Every statistic is a mean over *all* query rows of a sentence, special tokens included, so the
corpus value is the token-weighted mean of the sentence values (``Atlas.aggregate`` in store.py):

- ``entropy``: row entropy in bits; ``distance``: Σ_k w·|q−k| in tokens;
- ``special``/``first``/``previous``/``self``/``punctuation``: weight on special tokens, on token 0,
  on k = q−1 (0 for the first row, which has no previous token), on k = q, on punctuation tokens.

Relations (Clark et al. 2019) are read at word level: a word's row is the mean of its tokens' rows,
a word's column the sum of its tokens' columns; the head's prediction for a dependent is its
most-attended-to *other* word (special tokens are not words).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

import numpy as np

STATS = ("entropy", "distance", "special", "first", "previous", "self", "punctuation")
WORD, SPECIAL, PUNCTUATION = 0, 1, 2  # token kinds, for colouring and the punctuation mass


def token_kinds(labels: Sequence[str], special: Sequence[bool]) -> np.ndarray:
    """0 = word piece, 1 = special token, 2 = punctuation (every character a Unicode P* category)."""
    kinds = np.zeros(len(labels), dtype=np.int8)
    for i, (label, is_special) in enumerate(zip(labels, special)):
        if is_special:
            kinds[i] = SPECIAL
        elif label and all(unicodedata.category(c).startswith("P") for c in label):
            kinds[i] = PUNCTUATION
    return kinds


def _entropy_bits(rows: np.ndarray) -> np.ndarray:
    logs = np.log2(rows, out=np.zeros_like(rows), where=rows > 0)
    return -(rows * logs).sum(axis=-1)


def sentence_stats(P: np.ndarray, kinds: np.ndarray) -> dict[str, np.ndarray]:
    """P ``[layers, heads, n, n]`` (rows sum to 1) → each statistic as ``[layers, heads]``."""
    P = P.astype(np.float64)
    n = P.shape[-1]
    pos = np.arange(n)
    previous = np.zeros((n, n))
    previous[pos[1:], pos[:-1]] = 1.0
    return {
        "entropy": _entropy_bits(P).mean(axis=-1),
        "distance": (P * np.abs(pos[None, :] - pos[:, None])).sum(axis=-1).mean(axis=-1),
        "special": P[..., kinds == SPECIAL].sum(axis=-1).mean(axis=-1),
        "first": P[..., 0].mean(axis=-1),
        "previous": (P * previous).sum(axis=(-2, -1)) / n,
        "self": np.diagonal(P, axis1=-2, axis2=-1).mean(axis=-1),
        "punctuation": P[..., kinds == PUNCTUATION].sum(axis=-1).mean(axis=-1),
    }


def js_divergences(P: np.ndarray) -> np.ndarray:
    """Mean over query rows of the Jensen–Shannon divergence (bits, in [0, 1]) between every pair of
    heads: ``[layers·heads, layers·heads]``, symmetric, zero diagonal (Clark et al. 2019, §6)."""
    A = P.shape[0] * P.shape[1]
    flat = P.reshape(A, P.shape[-2], P.shape[-1]).astype(np.float64)  # (A, n, n)
    own = _entropy_bits(flat)  # (A, n)
    out = np.zeros((A, A))
    for a in range(A):
        mixed = _entropy_bits((flat[a] + flat[a:]) / 2)  # (A−a, n): only the upper triangle
        out[a, a:] = (mixed - (own[a] + own[a:]) / 2).mean(axis=-1)
    out = np.maximum(out, 0.0)
    return np.triu(out, 1) + np.triu(out, 1).T


def upper(matrix: np.ndarray) -> np.ndarray:
    """The strict upper triangle, row by row (what a shard stores)."""
    return matrix[np.triu_indices(matrix.shape[0], 1)]


def from_upper(values: np.ndarray, size: int) -> np.ndarray:
    out = np.zeros((size, size), dtype=np.float64)
    out[np.triu_indices(size, 1)] = values
    return out + out.T


def word_attention(P: np.ndarray, word_ids: Sequence[int | None]) -> np.ndarray:
    """``[layers, heads, n, n]`` token attention → ``[layers, heads, W, W]`` word attention."""
    ids = np.array([-1 if w is None else w for w in word_ids])
    W = int(ids.max()) + 1 if (ids >= 0).any() else 0
    member = (ids[:, None] == np.arange(W)[None, :]).astype(np.float64)  # (n, W)
    rows = member / np.maximum(member.sum(axis=0, keepdims=True), 1)  # mean over a word's tokens
    # (W, n) @ (L, H, n, n) @ (n, W): two BLAS products, not one three-operand einsum that would sum
    # over every (query word, key word, query token, key token) at once and grow with its fourth power.
    return rows.T @ P.astype(np.float64) @ member


def relation_predictions(P: np.ndarray, word_ids: Sequence[int | None], dependents: Sequence[int]) -> np.ndarray:
    """For each dependent word, every head's most-attended-to other word: ``[relations, layers·heads]``."""
    if not len(dependents):
        return np.zeros((0, P.shape[0] * P.shape[1]), dtype=np.int16)
    Pw = word_attention(P, word_ids)
    rows = Pw[:, :, list(dependents), :].copy()  # (L, H, R, W)
    rows[:, :, np.arange(len(dependents)), list(dependents)] = -1.0  # never the word itself
    best = rows.argmax(axis=-1)  # (L, H, R)
    return best.reshape(-1, len(dependents)).T.astype(np.int16)


def offset_baseline(offset_counts: dict[int, int], total: int) -> tuple[int, float]:
    """The best fixed relative offset ("always the word d to the right", d ≠ 0) and its accuracy,
    from how often the gold head sits at each offset from its dependent."""
    candidates = {d: c for d, c in offset_counts.items() if d != 0}
    if not candidates or total == 0:
        return 0, 0.0
    offset = max(sorted(candidates), key=lambda d: candidates[d])
    return offset, candidates[offset] / total
