"""The small synthetic examples of the basics page, as numpy: random queries and keys scored both
ways (scaled dot product, additive), and one query against keys of growing size d_k. The formulas
are those of :mod:`attention_viz.core.attention`; the page gets plain arrays."""

from __future__ import annotations

import numpy as np
import torch

from .attention import additive_attention, scaled_dot_product_attention

N_QUERIES, N_KEYS, HIDDEN = 3, 5, 8
WEIGHT_SEED = 2015  # the additive scorer's W_q, W_k, w_v: random, fixed, never trained


def scoring_example(draw: int, q_size: int, k_size: int) -> dict[str, np.ndarray | None]:
    """Random queries and keys (random draw ``draw``), scored by scaled dot product (None when the
    sizes differ) and by the additive scorer with fixed random weights."""
    data = torch.Generator().manual_seed(draw)
    q = torch.randn(N_QUERIES, q_size, generator=data)
    k = torch.randn(N_KEYS, k_size, generator=data)
    weights = torch.Generator().manual_seed(WEIGHT_SEED)
    w_q = torch.randn(HIDDEN, q_size, generator=weights) / q_size**0.5
    w_k = torch.randn(HIDDEN, k_size, generator=weights) / k_size**0.5
    w_v = torch.randn(HIDDEN, generator=weights)
    additive = additive_attention(q, k, k, w_q, w_k, w_v)
    out: dict[str, np.ndarray | None] = {
        "q": q.numpy(), "k": k.numpy(),
        "additive_scores": additive.scores.numpy(), "additive_pattern": additive.pattern.numpy(),
        "dot_scores": None, "dot_pattern": None,
    }
    if q_size == k_size:
        dot = scaled_dot_product_attention(q, k, k)
        out.update(dot_scores=dot.scores.numpy(), dot_pattern=dot.pattern.numpy())
    return out


def dk_example(d_k: int, n_keys: int = 8) -> tuple[np.ndarray, float, float]:
    """One random query against ``n_keys`` random keys of size ``d_k`` (drawn from ``d_k``): the
    raw scores q·k, and the largest softmax weight without and with the ÷√d_k."""
    rng = np.random.default_rng(d_k)
    q, k = rng.standard_normal(d_k), rng.standard_normal((n_keys, d_k))
    scores = k @ q
    return scores, float(_softmax(scores).max()), float(_softmax(scores / np.sqrt(d_k)).max())


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max())
    return e / e.sum()
