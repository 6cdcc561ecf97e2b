"""Value-weighted attention norms (Kobayashi et al. 2020, "Attention is not only a weight").

Head h adds to query i the sum Σ_j α_ij f_h(x_j) with f_h(x) = (x W_V^h + b_V^h) W_O^h, where
W_O^h is the head's slice of the output projection. A weight α_ij on a vector f_h(x_j) that is
nearly zero moves nothing (BERT's heavy attention on [SEP] is mostly of this kind), so
‖α_ij f_h(x_j)‖ says how much token j actually contributes to i through the head.

Computed from what a run captured, never by re-running: the captured ``v`` already is
x W_V^h + b_V^h, so only the product with W_O^h is left, once per key (not per query–key pair).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..core.names import Group, hook_name
from ..core.result import AttentionResult
from .checks import normalize_rows


def transformed_norms(v: np.ndarray, w_o: np.ndarray) -> np.ndarray:
    """``[heads, keys]``: ‖f_h(x_j)‖ = ‖v_j^h W_O^h‖ for every head and key.

    ``v``: ``[heads, keys, d_k]`` (the captured values, bias included); ``w_o``: ``(heads·d_k, d_model)``
    in ``x W_O`` orientation, head h's rows at ``h·d_k .. (h+1)·d_k``.
    """
    heads, keys, d_k = v.shape
    if w_o.ndim != 2 or w_o.shape[0] != heads * d_k:
        raise ValueError(f"W_O of shape {w_o.shape} does not fit {heads} heads of size {d_k}")
    per_head = np.asarray(w_o, np.float64).reshape(heads, d_k, w_o.shape[1])  # (h, d_k, d_model)
    norms = np.empty((heads, keys))
    for head in range(heads):  # one head's f at a time: (keys, d_model), memory the allocator reuses
        f = np.asarray(v[head], np.float64) @ per_head[head]
        norms[head] = np.sqrt(np.einsum("ke,ke->k", f, f))  # the sum of squares in one pass, no f² array
    return norms


def value_norms(pattern: np.ndarray, v: np.ndarray, w_o: np.ndarray) -> np.ndarray:
    """``[heads, query, key]`` float32: ‖α_ij f_h(x_j)‖ = α_ij ‖f_h(x_j)‖ (α ≥ 0).

    Under grouped-query attention ``v`` has fewer heads than ``pattern``: query head i reads value
    head i // (heads / kv_heads), and applies its own slice of W_O to it.
    The per-key norms are computed in float64 and rounded once; the product over every (query, key)
    pair is made in float32 straight into the result (in float64 it needed two temporaries of twice
    the pattern's size)."""
    if pattern.ndim != 3 or v.ndim != 3 or pattern.shape[0] % v.shape[0] or pattern.shape[2] != v.shape[1]:
        raise ValueError(f"pattern {pattern.shape} and values {v.shape} do not belong together")
    per_query_head = np.repeat(v, pattern.shape[0] // v.shape[0], axis=0)  # (heads, keys, d_k)
    norms = transformed_norms(per_query_head, w_o).astype(np.float32)
    return np.multiply(pattern, norms[:, None, :], dtype=np.float32)


def value_norm_arrays(
    result: AttentionResult, output_projection: Callable[[Group, int], np.ndarray | None]
) -> dict[str, np.ndarray]:
    """For every captured pattern, its value-weighted norms under the same name with ``value_norm``
    in place of ``pattern``. ``result`` must hold ``v`` beside every pattern; ``output_projection``
    is the backend's (None for an attention whose W_O is unknown: refused with a ValueError)."""
    out = {}
    for group in result.attentions():
        for layer in range(result.n_layers(*group)):
            if not result.has(group, layer, "pattern"):
                continue
            if not result.has(group, layer, "v"):
                raise ValueError(f"{hook_name(group, layer, 'v')} was not captured: value norms need the values")
            w_o = output_projection(group, layer)
            if w_o is None:
                raise ValueError(f"{result.model} does not expose the output projection of {'.'.join(group)}")
            pattern, v = result.array(group, layer, "pattern"), result.array(group, layer, "v")
            out[hook_name(group, layer, "value_norm")] = value_norms(pattern, v, w_o)
    return out


def normalized_rows(norms: np.ndarray) -> np.ndarray:
    """Each query row divided by its sum, so value norms can be drawn on the same [0, 1] scale as
    attention weights (rows that are all 0 stay 0)."""
    return normalize_rows(norms).astype(np.float32)
