"""One row per head of a cross-attention (decoder queries × encoder keys): the statistics of
:mod:`.stats` that still mean something when query and key positions are different sentences.

Previous token, self, next token and fixed offsets compare query and key *positions*; in
cross-attention target position i and source position i are unrelated, so those are left out.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .checks import as_stack, normalize_rows, token_flags
from .stats import BROAD_ENTROPY, ROLE_SHARE


def cross_head_stats(P: np.ndarray, key_special: Sequence[bool] | None = None) -> list[dict]:
    """``P`` [layers, heads, target, source] → one dict per head, sortable as a table:

    - ``entropy``: mean row entropy in bits; ``entropy_norm``: divided by log2(source tokens).
    - ``top_weight``: mean of each row's largest weight (1 = every row picks one source token).
    - ``special``: mean share on special source tokens; ``first``: on the first source token.
    - ``role``: "special-token sink" (≥ ROLE_SHARE on special tokens, or on the first token when
      there are none), "focused" (mean top weight ≥ ROLE_SHARE: an alignment-like head), "broad"
      (entropy_norm ≥ BROAD_ENTROPY), else "mixed"; "none" when there is nothing to classify.
    """
    arr = as_stack(P, square=False)
    layers, heads, _, n = arr.shape
    special = token_flags(key_special, n)
    table: list[dict] = []
    for layer in range(layers):
        for head in range(heads):
            w = arr[layer, head].astype(np.float64)
            w = normalize_rows(w[w.sum(axis=1) > 1e-6])  # (rows, n)
            if not len(w) or n < 2:
                table.append({"layer": layer, "head": head, "entropy": 0.0, "entropy_norm": 0.0,
                              "top_weight": 0.0, "special": 0.0, "first": 0.0, "role": "none"})
                continue
            entropy = -(w * np.log2(w, out=np.zeros_like(w), where=w > 0)).sum(axis=1)
            row = {
                "layer": layer, "head": head,
                "entropy": float(entropy.mean()),
                "entropy_norm": float(np.clip(entropy.mean() / np.log2(n), 0.0, 1.0)),
                "top_weight": float(w.max(axis=1).mean()),
                "special": float(w[:, special].sum(axis=1).mean()),
                "first": float(w[:, 0].mean()),
            }
            table.append({**row, "role": _role(row, special.any())})
    return table


def _role(row: dict, has_special: bool) -> str:
    if (row["special"] if has_special else row["first"]) >= ROLE_SHARE:
        return "special-token sink"
    if row["top_weight"] >= ROLE_SHARE:
        return "focused"
    if row["entropy_norm"] >= BROAD_ENTROPY:
        return "broad"
    return "mixed"
