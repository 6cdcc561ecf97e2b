"""Which heads link two tokens, and what changed between two sentences."""

from __future__ import annotations

import numpy as np

from .checks import as_pattern, as_stack


def _check_index(index: int, n: int, what: str) -> int:
    index = int(index)
    if not 0 <= index < n:
        raise IndexError(f"{what} index {index} out of range for {n} tokens")
    return index


def focus_matrix(P: np.ndarray, query_index: int, key_index: int) -> np.ndarray:
    """``[layers, heads]``: the weight from one query token to one key token in every head.

    Answers "which heads link *these* two tokens" at a glance (e.g. a pronoun and its referent).
    Works for cross-attention too (query and key indices then refer to different sequences).
    """
    arr = as_stack(P, square=False)
    q = _check_index(query_index, arr.shape[2], "query")
    k = _check_index(key_index, arr.shape[3], "key")
    return arr[:, :, q, k].copy()


def query_top(P: np.ndarray, query_index: int) -> float:
    """The largest value one query token gives any key in any head: the top of the focus heatmap's
    colour range, the same whichever key is picked, so two keys' screens compare by eye."""
    arr = as_stack(P, square=False)
    q = _check_index(query_index, arr.shape[2], "query")
    return max(float(arr[:, :, q, :].max()), 1e-6)


def top_heads(P: np.ndarray, query_index: int, key_index: int, n: int = 5) -> list[tuple[int, int, float]]:
    """The ``n`` heads with the largest weight from query to key: ``(layer, head, weight)``, largest first.

    Ties keep (layer, head) order, so the list is stable between runs.
    """
    focus = focus_matrix(P, query_index, key_index)
    flat = focus.ravel()
    order = np.argsort(-flat, kind="stable")[: max(int(n), 0)]
    H = focus.shape[1]
    return [(int(i // H), int(i % H), float(flat[i])) for i in order]


def difference(P_a: np.ndarray, P_b: np.ndarray) -> np.ndarray:
    """``P_a − P_b`` for two runs with the same shape (e.g. "The cat sat" vs "The dog sat").

    Positive where sentence A attends more. Only position-by-position comparison is meaningful, so
    sentences must tokenize to the same number of tokens; aligning different tokenizations is out
    of scope and refused.
    """
    a = as_pattern(P_a, 1, "P_a")
    b = as_pattern(P_b, 1, "P_b")
    if a.shape != b.shape:
        raise ValueError(
            f"cannot compare patterns of shapes {a.shape} and {b.shape}: the two sentences must have "
            "the same number of tokens (and the same model)"
        )
    return (a.astype(np.float32) - b.astype(np.float32)).astype(np.float32)
