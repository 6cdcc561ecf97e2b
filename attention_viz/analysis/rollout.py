"""Attention rollout (Abnar & Zuidema 2020, "Quantifying Attention Flow in Transformers"): raw
attention of a deep layer says little about the *input* tokens, because every layer mixes tokens
again and the residual stream carries each token forward; rollout multiplies the layers."""

from __future__ import annotations

import numpy as np

from .checks import as_stack, normalize_rows


def layer_attention(P: np.ndarray, add_residual: bool = True) -> np.ndarray:
    """Per layer: heads averaged, plus the residual connection, rows renormalized → ``[layers, q, k]``.

    A layer's output is ``x + attention(x)``, so each token keeps its own value alongside what it
    gathered; Abnar & Zuidema model that as ``A = 0.5·W + 0.5·I``. Rows sum to 1 (a fully masked
    row becomes the identity row: the token only carries itself). Float64, for the products that
    follow. With ``add_residual=False`` it is ``W`` alone and masked rows stay 0.
    """
    arr = as_stack(P)
    W = arr.astype(np.float64).mean(axis=1)  # (L, n, n)
    if add_residual:
        W = 0.5 * W + 0.5 * np.eye(W.shape[-1])
    return normalize_rows(W)


def rollout(P: np.ndarray, add_residual: bool = True) -> np.ndarray:
    """Attention rollout after every layer: ``R_l = A_l · R_{l-1}``, ``R_0 = A_0`` → ``[layers, q, k]``.

    ``R_l[q, k]`` estimates how much of token ``q``'s representation after layer ``l`` comes from
    input token ``k``, assuming attention mixes values linearly (it ignores the values and the
    MLPs). Rows sum to 1 (except rows that are masked everywhere when ``add_residual=False``).
    """
    A = layer_attention(P, add_residual)
    R = np.empty_like(A)
    acc = np.eye(A.shape[-1])
    for layer in range(A.shape[0]):
        acc = A[layer] @ acc  # (n, n)
        R[layer] = acc
    return R.astype(np.float32)
