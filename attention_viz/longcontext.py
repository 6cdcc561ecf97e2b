"""Long inputs (thousands of tokens) through our decoder without any (T, T) tensor.

:func:`queries_and_keys` runs a decoder-only model layer by layer with PyTorch's fused attention
(which never materializes the softmax) and keeps what the patterns can be rebuilt from: each
layer's queries and keys after rotation, ``q`` (h, T, d_k) and ``k`` (h_kv, T, d_k). The patterns
themselves are then computed block by block on demand by :mod:`attention_viz.analysis.blockwise`.
Memory: layers × (h + h_kv) × T × d_k floats (2 layers, 4 heads, 32k tokens, d_k 16: 17 MB) instead
of layers × h × T² (34 GB).

The wiring follows ``DecoderLayer.forward`` (pre-/post-LN, parallel residual); a test checks that
every layer's q/k equal those of the model's own forward. Nothing reads the last layer's output, so
that layer stops at its q and k projections: its attention and feed-forward (half the forward of a
2-layer model at 32k tokens, the attention being T²/2 logits per head) are never run. The other
layers' fused attention also returns its softmax normalizers (``lse``): kept, they spare every
head's overview of that layer its exps (:func:`attention_viz.analysis.blockwise.overview`).
"""

from __future__ import annotations

import numpy as np
import torch

from .analysis.blockwise import QueriesKeys
from .errors import ModelError
from .model import MultiHeadAttention, Transformer


def _queries_keys(attn: MultiHeadAttention, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The layer's projections, rotated: q (1, h, T, d_k), k (1, h_kv, T, d_k)."""
    q = attn.split_heads(attn.w_q(x))  # (1, h, T, d_k)
    k = attn.split_heads(attn.w_k(x), attn.h_kv)  # (1, h_kv, T, d_k)
    if attn.rotary is not None:
        q, k = attn.rotary(q, k)
    return q, k


# PyTorch's CPU flash-attention kernel (the one scaled_dot_product_attention runs here), called
# directly: beside its output it returns the softmax normalizers it computed anyway, which every
# head's overview of this layer then reuses instead of summing T²/2 exps again.
_FLASH_CPU = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu


def _attention(
    attn: MultiHeadAttention, x: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Causal self-attention with the fused kernel; returns (output, q, k, lse (1, h, T))."""
    q, k = _queries_keys(attn, x)
    v = attn.split_heads(attn.w_v(x), attn.h_kv)
    keys = k
    if attn.h_kv != attn.h:  # the kernel reads one K/V head per query head: repeat each for its group
        keys, v = k.repeat_interleave(attn.h // attn.h_kv, 1), v.repeat_interleave(attn.h // attn.h_kv, 1)
    context, lse = _FLASH_CPU(q, keys, v, 0.0, True)
    batch, _, length, _ = context.shape
    return attn.w_o(context.transpose(1, 2).reshape(batch, length, attn.h * attn.d_k)), q, k, lse


@torch.inference_mode()
def normalizers(q: np.ndarray, k: np.ndarray) -> np.ndarray:
    """A layer's softmax normalizers (h, T) from its kept q (h, T, d_k) and k (h_kv, T, d_k), by the
    fused kernel (for the last layer, whose attention the forward skips). They do not depend on the
    values, so the keys stand in for them."""
    queries, keys = torch.from_numpy(q)[None], torch.from_numpy(k)[None]
    if keys.shape[1] != queries.shape[1]:
        keys = keys.repeat_interleave(queries.shape[1] // keys.shape[1], 1)
    return _FLASH_CPU(queries, keys, keys, 0.0, True)[1][0].float().numpy().copy()


@torch.inference_mode()
def queries_and_keys(model: Transformer, ids: torch.Tensor) -> QueriesKeys:
    """ids (1, T) through a decoder-only model; ModelError for what this path cannot run."""
    config = model.config
    if config.shape != "decoder-only" or model.decoder is None:
        raise ModelError("long inputs need a decoder-only model")
    if config.sliding_window is not None:
        raise ModelError("long inputs with a sliding window are not supported yet")
    decoder = model.decoder
    x = decoder.embed(ids)  # (1, T, d_model)
    qs, ks, lses = [], [], []
    for i, layer in enumerate(decoder.layers):
        attn_sub, ffn_sub = layer.sublayers[0], layer.sublayers[-1]
        attn_in = attn_sub.norm(x) if attn_sub.pre_norm else x  # parallel residual is pre-LN too
        if i == len(decoder.layers) - 1:  # the last layer's output is never read: its q and k are all we keep
            q, k = _queries_keys(layer.self_attn, attn_in)
            lse = None
        else:
            out, q, k, lse = _attention(layer.self_attn, attn_in)
            if layer.parallel_residual:
                x = x + out + layer.feed_forward(ffn_sub.norm(x))
            elif attn_sub.pre_norm:
                x = x + out
                x = x + layer.feed_forward(ffn_sub.norm(x))
            else:
                x = attn_sub.norm(x + out)
                x = ffn_sub.norm(x + layer.feed_forward(x))
        qs.append(q[0].float().numpy().copy())
        ks.append(k[0].float().numpy().copy())
        lses.append(None if lse is None else lse[0].float().numpy().copy())
    return QueriesKeys(qs, ks, lses)
