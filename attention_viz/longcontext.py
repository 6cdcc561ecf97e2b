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

A layer with a sliding window of W positions (Mistral; not those in ``config.full_attention_layers``)
runs the same kernel a block of queries at a time over the band of keys that block can see,
[r0 − W + 1, r1), with an additive mask of that band: B × (B + W − 1) logits per block, O(T·W) in
all, and the normalizers come back over the band only, as the patterns need them.
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
WINDOW_BLOCK = 512  # queries per block of a windowed layer: a mask of 512 × (512 + W − 1) floats


def _fused(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Causal attention, each query limited to its last ``window`` keys (None: the whole past), by
    the fused kernel: (context (1, h, T, d_k), lse (1, h, T)). q, k, v (1, h, T, d_k)."""
    if window is None:
        return _FLASH_CPU(q, k, v, 0.0, True)
    length = q.shape[2]
    # query i of a block and key j of its band [r0 − W + 1, r1): visible iff 0 ≤ i − j + W − 1 < W,
    # whatever r0 — one mask serves every block (made once: making it per block was half the cost)
    offset = torch.arange(WINDOW_BLOCK)[:, None] - torch.arange(WINDOW_BLOCK + window - 1)[None, :] + window - 1
    band = torch.zeros(offset.shape).masked_fill((offset < 0) | (offset >= window), float("-inf"))
    contexts, lses = [], []
    for r0 in range(0, length, WINDOW_BLOCK):
        r1, c0 = min(length, r0 + WINDOW_BLOCK), max(0, r0 - window + 1)
        skip = c0 - (r0 - window + 1)  # the band's keys before key 0 (the first blocks)
        mask = band[: r1 - r0, skip : skip + r1 - c0]
        context, lse = _FLASH_CPU(q[:, :, r0:r1], k[:, :, c0:r1], v[:, :, c0:r1], 0.0, False, attn_mask=mask)
        contexts.append(context)
        lses.append(lse)
    return torch.cat(contexts, 2), torch.cat(lses, 2)


def _attention(
    attn: MultiHeadAttention, x: torch.Tensor, window: int | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Causal self-attention with the fused kernel; returns (output, q, k, lse (1, h, T))."""
    q, k = _queries_keys(attn, x)
    v = attn.split_heads(attn.w_v(x), attn.h_kv)
    keys = k
    if attn.h_kv != attn.h:  # the kernel reads one K/V head per query head: repeat each for its group
        keys, v = k.repeat_interleave(attn.h // attn.h_kv, 1), v.repeat_interleave(attn.h // attn.h_kv, 1)
    context, lse = _fused(q, keys, v, window)
    batch, _, length, _ = context.shape
    return attn.w_o(context.transpose(1, 2).reshape(batch, length, attn.h * attn.d_k)), q, k, lse


@torch.inference_mode()
def normalizers(q: np.ndarray, k: np.ndarray, window: int | None = None) -> np.ndarray:
    """A layer's softmax normalizers (h, T) from its kept q (h, T, d_k) and k (h_kv, T, d_k), over
    each query's last ``window`` keys (None: all it sees), by the fused kernel (for the last layer,
    whose attention the forward skips). They do not depend on the values: the keys stand in for them."""
    queries, keys = torch.from_numpy(q)[None], torch.from_numpy(k)[None]
    if keys.shape[1] != queries.shape[1]:
        keys = keys.repeat_interleave(queries.shape[1] // keys.shape[1], 1)
    return _fused(queries, keys, keys, window)[1][0].float().numpy().copy()


@torch.inference_mode()
def queries_and_keys(model: Transformer, ids: torch.Tensor) -> QueriesKeys:
    """ids (1, T) through a decoder-only model; ModelError for what this path cannot run."""
    config = model.config
    if config.shape != "decoder-only" or model.decoder is None:
        raise ModelError("long inputs need a decoder-only model")
    decoder = model.decoder
    x = decoder.embed(ids)  # (1, T, d_model)
    length = ids.shape[1]
    # each layer's window; None where it restricts nothing (full-attention layers, or W ≥ T)
    windows = [None if w is None or w >= length else w for w in decoder.windows]
    qs, ks, lses = [], [], []
    for i, (layer, window) in enumerate(zip(decoder.layers, windows)):
        attn_sub, ffn_sub = layer.sublayers[0], layer.sublayers[-1]
        attn_in = attn_sub.norm(x) if attn_sub.pre_norm else x  # parallel residual is pre-LN too
        if i == len(decoder.layers) - 1:  # the last layer's output is never read: its q and k are all we keep
            q, k = _queries_keys(layer.self_attn, attn_in)
            lse = None
        else:
            out, q, k, lse = _attention(layer.self_attn, attn_in, window)
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
    return QueriesKeys(qs, ks, lses, windows)
