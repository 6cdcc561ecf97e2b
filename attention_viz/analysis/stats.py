"""One row per head: entropy, distance, where the weight goes, and a role label, so a table can be
sorted to find the previous-token heads, the [SEP] sinks, ..."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .checks import as_stack, token_flags


# Role thresholds, applied in this order to the means over ordinary (non-special) query rows:
# 1. the largest of the shares on the previous token, the token itself, the next token and the
#    special tokens (the first token when there are none), if it is ≥ ROLE_SHARE: "previous-token",
#    "self", "next-token", "special-token sink" (the "more than half" criterion Clark et al. 2019
#    use for BERT's positional and [SEP] heads);
# 2. "positional" if one fixed relative offset other than −1/0/+1 gets ≥ ROLE_SHARE;
# 3. "broad" if the normalized entropy is ≥ BROAD_ENTROPY (uniform over the visible keys = 1);
# 4. otherwise "mixed".
ROLE_SHARE = 0.5
BROAD_ENTROPY = 0.8
ROLES = ("previous-token", "next-token", "self", "special-token sink", "positional", "broad", "mixed", "none")


def head_stats(P: np.ndarray, special: Sequence[bool] | None = None) -> list[dict]:
    """One row per (layer, head) with what the head does and a role label; sortable as a table.

    Statistics are means over the *ordinary* query rows (not special tokens; all-zero rows skipped),
    because special tokens' own rows behave differently and would blur the labels. Each row is
    divided by its sum first. Keys of every dict:

    - ``layer``, ``head``: 0-indexed.
    - ``entropy``: mean row entropy in **bits** (uniform over n keys = log2 n).
    - ``entropy_norm``: mean of entropy / log2(keys the row may see), in [0, 1]; in a causal stack
      (everything above the diagonal exactly 0) row q may see q+1 keys, otherwise n.
    - ``distance``: mean attention distance Σ_k w·|q−k|, in tokens.
    - ``special``, ``previous``, ``self``, ``next``: mean share of weight on special tokens, on
      k = q−1, k = q and k = q+1 (previous/next over the rows that have such a neighbour).
    - ``first``: mean share on the first token (GPT-2 has no [CLS] and parks weight on token 0).
    - ``offset``, ``offset_share``: the relative offset k−q with the largest mean share, and that
      share (for |offset| ≥ 2, rows where q+offset falls outside the sentence count as 0, so a
      single row cannot make a fixed-offset head).
    - ``role``: one of :data:`ROLES`, see :data:`ROLE_SHARE`; "none" when there is nothing to
      classify (fewer than 2 tokens, or no ordinary row with any weight).
    """
    arr = as_stack(P)
    L, H, n, _ = arr.shape
    special_flags = token_flags(special, n)
    pos = np.arange(n)
    causal = not np.any(np.triu(arr, 1))
    visible = (pos + 1) if causal else np.full(n, n)  # keys row q may see
    rel = pos[None, :] - pos[:, None]  # rel[q, k] = k − q
    offsets = np.arange(-(n - 1), n)  # index d + n − 1 holds offset d

    keys = ("entropy", "entropy_norm", "distance", "special", "first", "previous", "self", "next")

    table: list[dict] = []
    for layer in range(L):
        for head in range(H):
            W = arr[layer, head].astype(np.float64)
            total = W.sum(axis=1)
            rows = np.flatnonzero((total > 1e-6) & ~special_flags)
            stats = dict.fromkeys(keys, 0.0)
            stats.update(offset=0, offset_share=0.0)
            far = 0.0  # best share at a fixed offset other than −1, 0, +1
            if rows.size:
                w = W[rows] / total[rows, None]  # (r, n)
                logs = np.log2(w, out=np.zeros_like(w), where=w > 0)
                entropy = -(w * logs).sum(axis=1)
                vis = visible[rows]
                norm = entropy[vis > 1] / np.log2(vis[vis > 1])
                d = rel[rows].ravel() + n - 1
                summed = np.bincount(d, weights=w.ravel(), minlength=offsets.size)
                counted = np.bincount(d, minlength=offsets.size)
                near = summed / np.maximum(counted, 1)  # mean over rows that have that neighbour
                share = np.where(np.abs(offsets) <= 1, near, summed / rows.size)
                best = int(np.argmax(share))
                if n > 2:
                    far = float(share[np.abs(offsets) >= 2].max())
                stats.update(
                    entropy=float(entropy.mean()),
                    entropy_norm=float(np.clip(norm.mean(), 0.0, 1.0)) if norm.size else 0.0,
                    distance=float((w * np.abs(rel[rows])).sum(axis=1).mean()),
                    special=float(w[:, special_flags].sum(axis=1).mean()),
                    first=float(w[:, 0].mean()),
                    previous=float(near[n - 2]) if n > 1 else 0.0,
                    self=float(near[n - 1]),
                    next=float(near[n]) if n > 1 else 0.0,
                    offset=int(offsets[best]),
                    offset_share=float(share[best]),
                )
            role = _role(stats, far, special_flags.any()) if n >= 2 and rows.size else "none"
            table.append({"layer": layer, "head": head, **stats, "role": role})
    return table


def _role(stats: dict, far: float, has_special: bool) -> str:
    shares = {
        "previous-token": stats["previous"],
        "self": stats["self"],
        "next-token": stats["next"],
        # without special tokens (GPT-2) the first token plays the sink (Xiao et al. 2023)
        "special-token sink": stats["special"] if has_special else stats["first"],
    }
    role, best = max(shares.items(), key=lambda kv: kv[1])
    if best >= ROLE_SHARE:
        return role
    if far >= ROLE_SHARE:
        return "positional"
    if stats["entropy_norm"] >= BROAD_ENTROPY:
        return "broad"
    return "mixed"
