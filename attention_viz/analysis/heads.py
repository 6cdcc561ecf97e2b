"""One picture per layer (mean or max over heads), and hiding special tokens."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .checks import as_pattern, normalize_rows, token_flags


def head_mean(pattern: np.ndarray) -> np.ndarray:
    """Average over heads: ``[heads, q, k] → [q, k]`` (or ``[layers, heads, q, k] → [layers, q, k]``).

    The mean of row-stochastic rows is row-stochastic, so this is itself an attention pattern: what
    the layer does "on average", which is what rollout and flow build on.
    """
    arr = as_pattern(pattern, 3)
    return arr.mean(axis=-3)


def head_max(pattern: np.ndarray) -> np.ndarray:
    """Elementwise maximum over heads: ``[heads, q, k] → [q, k]`` (or per layer for a stack).

    Shows a link that *any* head makes, even if the other heads ignore it (the mean dilutes a
    single sharp head by 1/heads). It is **not** an attention pattern: rows do not sum to 1 (they
    sum to between 1 and the number of heads), so label its colour scale "max weight", not
    "probability".
    """
    arr = as_pattern(pattern, 3)
    return arr.max(axis=-3)


def drop_special(
    pattern: np.ndarray, special: Sequence[bool], key_special: Sequence[bool] | None = None, renormalize: bool = True
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Remove special-token rows *and* columns, then renormalize each row to sum to 1.

    [CLS]/[SEP] often take most of the weight (a "no-op" sink, Clark et al. 2019), which squeezes
    everything else into the bottom of the colour scale. Renormalizing answers "among the real
    tokens, where does this one look?". A row whose remaining weights are all 0 stays 0.

    ``pattern`` is ``[..., q, k]``; ``special`` flags the queries and, for self-attention, the keys
    too; cross-attention passes the keys' own flags as ``key_special``. ``renormalize=False`` only
    removes them (for values that are not shares of a row, e.g. value-weighted norms). Returns the new pattern
    (same dtype) and the original positions of the kept queries and keys (to pick labels).
    """
    arr = as_pattern(pattern, 2)
    rows = np.flatnonzero(~token_flags(special, arr.shape[-2]))
    cols = np.flatnonzero(~token_flags(special if key_special is None else key_special, arr.shape[-1]))
    sub = arr[..., rows[:, None], cols[None, :]]
    return (normalize_rows(sub) if renormalize else sub).astype(arr.dtype, copy=False), rows, cols
