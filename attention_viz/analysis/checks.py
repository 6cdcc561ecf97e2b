"""Input checks shared by the analyses: finite float arrays of the right shape, token flags."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def as_pattern(pattern: np.ndarray, min_ndim: int, name: str = "pattern") -> np.ndarray:
    """Float array of at least ``min_ndim`` dims with finite values (NaN in → ValueError, not NaN out)."""
    arr = np.asarray(pattern)
    if arr.ndim < min_ndim:
        raise ValueError(f"{name} needs at least {min_ndim} dimensions, got shape {arr.shape}")
    if not np.issubdtype(arr.dtype, np.floating):
        arr = arr.astype(np.float32)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values")
    return arr


def as_stack(P: np.ndarray, square: bool = True) -> np.ndarray:
    """A ``[layers, heads, query, key]`` stack; self-attention (query == key) when ``square``."""
    arr = as_pattern(P, 4, "P")
    if arr.ndim != 4:
        raise ValueError(f"expected [layers, heads, query, key], got shape {arr.shape}")
    if square and arr.shape[-1] != arr.shape[-2]:
        raise ValueError(
            f"needs self-attention (query = key tokens), got {arr.shape[-2]} queries × {arr.shape[-1]} keys"
        )
    return arr


def token_flags(special: Sequence[bool] | None, n: int) -> np.ndarray:
    if special is None:
        return np.zeros(n, dtype=bool)
    flags = np.asarray(list(special), dtype=bool)
    if flags.shape != (n,):
        raise ValueError(f"special has {flags.size} entries for {n} tokens")
    return flags


def normalize_rows(x: np.ndarray) -> np.ndarray:
    """Rows divided by their sum; rows summing to 0 stay 0 (no 0/0)."""
    total = x.sum(axis=-1, keepdims=True)
    return np.divide(x, total, out=np.zeros_like(x), where=total > 0)
