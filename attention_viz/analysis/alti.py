"""ALTI (Ferrando, Gállego & Costa-jussà 2022, "Measuring the Mixing of Contextual Information in
the Transformer", EMNLP): how much each input token of a layer makes up each token's output of the
attention block — multi-head attention, residual connection and layer normalization together.

The paper's decomposition of the attention block, with f^h(x) = (x W_V^h + b_V^h) W_O^h the head's transformed value
(Kobayashi et al. 2020):

* the block's sum before its LayerNorm is  z̃_i = Σ_j Σ_h α^h_ij f^h(x_j) + b_O + x_i ;
* the LayerNorm is linear once the row's statistics are fixed:  LN(z̃_i) = L_i(z̃_i) + β with
  L_i(u) = (u − μ(u)) ⊙ γ / σ(z̃_i), so it distributes over the summands;
* hence the block's output is  x̃_i = Σ_j T_i(x_j) + L_i(b_O) + β  with
  T_i(x_j) = L_i(Σ_h α^h_ij f^h(x_j))            for j ≠ i,
  T_i(x_i) = L_i(Σ_h α^h_ii f^h(x_i) + x_i)      (the residual belongs to the token itself);
* the contribution of x_j to x̃_i, from the Manhattan (L1) distance between x̃_i and T_i(x_j):
  c_ij = max(0, −‖x̃_i − T_i(x_j)‖₁ + ‖x̃_i‖₁) / Σ_k max(0, −‖x̃_i − T_i(x_k)‖₁ + ‖x̃_i‖₁);
* ALTI itself aggregates the layers' matrices by rollout: ``C^{1..l} = C^l · C^{1..l−1}``, with
  no identity added (unlike attention rollout) because each C^l already holds the residual.

Pre-LN blocks (GPT-2, Llama, our decoders) normalize *inside* the sublayer, x̃_i = x_i +
Σ_j Σ_h α^h_ij f^h(LN(x_j)) + b_O: the norm acts on each input token alone, so T_i(x_j) =
Σ_h α^h_ij f^h(LN(x_j)) (+ x_i when j = i) with nothing to linearize; the captured values already are
LN(x_j) W_V^h + b_V^h. RMSNorm (no centring, no β) linearizes the same way without μ.

Everything is computed from what a run captured (the layer's input, its values and its attention
weights) plus W_O, b_O and the norm's parameters: no second forward. Float64 throughout.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .checks import normalize_rows

BLOCK_ELEMENTS = 1 << 22  # query rows per step: (rows, keys, d_model) float64 of at most 32 MB


@dataclass(frozen=True)
class PostNorm:
    """The LayerNorm after the residual of a post-LN block (BERT), as plain arrays."""

    gamma: np.ndarray  # (d_model,)
    beta: np.ndarray | None  # (d_model,); None for RMSNorm
    eps: float
    centred: bool = True  # LayerNorm subtracts the mean; RMSNorm does not


def transformed_values(v: np.ndarray, w_o: np.ndarray, heads: int) -> np.ndarray:
    """``(heads, keys, d_model)``: f^h(x_j) = v_j^h W_O^h for every query head, float64.

    ``v``: ``[kv_heads, keys, d_k]`` (the captured values, bias included; under grouped-query
    attention query head h reads value head h // (heads / kv_heads)); ``w_o``: ``(heads·d_k, d_model)``.
    """
    kv_heads, keys, d_k = v.shape
    if heads % kv_heads or w_o.shape[0] != heads * d_k:
        raise ValueError(f"values {v.shape} and W_O {w_o.shape} do not fit {heads} heads")
    per_head = np.asarray(w_o, np.float64).reshape(heads, d_k, -1)  # (h, d_k, d_model)
    v64 = np.repeat(np.asarray(v, np.float64), heads // kv_heads, axis=0)  # (h, keys, d_k)
    return np.einsum("hjk,hkd->hjd", v64, per_head)


def alti(
    x: np.ndarray,
    pattern: np.ndarray,
    v: np.ndarray,
    w_o: np.ndarray,
    b_o: np.ndarray | None,
    post_norm: PostNorm | None,
    attention_norm: PostNorm | None = None,
) -> np.ndarray:
    """``[query, key]`` float64: c_ij of one attention block, rows summing to 1 (module docstring).

    ``x``: ``(T, d_model)`` the block's input (the residual stream entering the layer);
    ``pattern``: ``[heads, query, key]`` α; ``v``: ``[kv_heads, key, d_k]``; ``w_o``: ``(heads·d_k,
    d_model)``, ``b_o``: ``(d_model,)`` or None; ``post_norm``: the LayerNorm after the residual, or
    None for a pre-LN block (its norm is already inside the captured values); ``attention_norm``: an
    RMSNorm on the attention's output before the residual joins (Gemma 2/3's sandwich, OLMo 2),
    linearized with its row's statistics as the post-LN one is: T_i(x_j) = L_i(Σ_h α^h_ij f^h(x_j))
    (+ x_i when j = i).
    """
    if attention_norm is not None and attention_norm.centred:
        raise ValueError("a norm on the attention's output is an RMSNorm in every family that has one")
    x64 = np.asarray(x, np.float64)
    alpha = np.asarray(pattern, np.float64)
    heads, queries, keys = alpha.shape
    if x64.shape[0] != queries or queries != keys:
        raise ValueError(f"a self-attention block: input {x.shape} and pattern {pattern.shape} do not fit")
    f = transformed_values(v, w_o, heads)  # (h, keys, d_model)
    bias = np.zeros(f.shape[-1]) if b_o is None else np.asarray(b_o, np.float64)
    # Under a LayerNorm only the centred f^h, x and b_O enter L_i: centring is linear, so do it once per vector
    if post_norm is not None and post_norm.centred:
        f, x64, bias = _centre(f), _centre(x64), _centre(bias)
    out = np.empty((queries, keys))
    rows = max(1, BLOCK_ELEMENTS // (keys * f.shape[-1]))
    for start in range(0, queries, rows):
        block = slice(start, min(start + rows, queries))
        # (rows, keys, d): Σ_h α^h_ij f^h(x_j), as one small matrix product per key (BLAS, not einsum's loop)
        mixed = np.matmul(alpha[:, block].transpose(2, 1, 0), f.transpose(1, 0, 2)).transpose(1, 0, 2)
        index = np.arange(block.start, block.stop)
        attended = mixed.sum(axis=1) + bias  # (rows, d): the attention's output
        if attention_norm is not None:  # N(u) = u ⊙ γ / √(mean(u²) + ε), its statistics fixed per row
            scale = np.asarray(attention_norm.gamma, np.float64) / np.sqrt(
                (attended * attended).mean(axis=-1, keepdims=True) + attention_norm.eps)
            mixed *= scale[:, None, :]
            attended = attended * scale
        mixed[index - start, index] += x64[block]  # the residual joins the token itself
        summed = attended + x64[block]  # (rows, d): z̃_i (centred under a LayerNorm)
        if post_norm is None:
            output = summed  # x̃_i = z̃_i: pre-LN, the block ends with the residual sum
        else:
            # σ(z̃_i) as the norm computes it: √(Var(z̃_i) + ε) (biased), or √(mean(z̃_i²) + ε) for RMSNorm
            sigma = np.sqrt((summed * summed).mean(axis=-1, keepdims=True) + post_norm.eps)
            scale = np.asarray(post_norm.gamma, np.float64) / sigma
            mixed *= scale[:, None, :]  # T_i(x_j) = L_i(·)
            output = summed * scale + (0.0 if post_norm.beta is None else np.asarray(post_norm.beta, np.float64))
        distance = np.abs(output[:, None, :] - mixed).sum(axis=-1)  # ‖x̃_i − T_i(x_j)‖₁
        out[block] = np.maximum(0.0, np.abs(output).sum(axis=-1, keepdims=True) - distance)
    return normalize_rows(out)


def _centre(u: np.ndarray) -> np.ndarray:
    return u - u.mean(axis=-1, keepdims=True)


def rollout_maps(maps: np.ndarray) -> np.ndarray:
    """``[layers, query, key]`` → the same shape, ``R_l = C_l · R_{l−1}`` with ``R_0 = C_0`` (Ferrando et
    al.'s aggregation; Mohebbi et al. roll value zeroing out the same way). Each C_l already counts the residual,
    so no identity is added; rows stay summing to 1 when every C_l's rows do."""
    maps = np.asarray(maps, np.float64)
    out = np.empty_like(maps)
    acc = np.eye(maps.shape[-1])
    for layer, layer_map in enumerate(maps):
        acc = layer_map @ acc
        out[layer] = acc
    return out
