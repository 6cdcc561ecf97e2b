"""Long inputs (thousands of tokens) through our decoder without any (T, T) tensor.

:func:`queries_and_keys` runs a decoder-only model layer by layer with PyTorch's fused attention
(which never materializes the softmax) and keeps what the patterns can be rebuilt from: each
layer's queries and keys after rotation, ``q`` (h, T, d_k) and ``k`` (h_kv, T, d_k), and each
head's softmax normalizers (``lse``, which the kernel returns with its output: they spare the head's
overview its exps, :func:`attention_viz.analysis.blockwise.overview`). The patterns themselves are
then computed block by block on demand by :mod:`attention_viz.analysis.blockwise`.
Memory: layers × (h + h_kv) × T × d_k floats (2 layers, 4 heads, 32k tokens, d_k 16: 17 MB) instead
of layers × h × T², plus the residual stream (T, d_model) while a later layer may still be asked for.

Layers run when a view first asks for them: the head view opens on one head of layer 0, which needs
layer 0's q/k and that head's pass of the kernel, not the other heads (at 32k tokens with 4 heads, a
quarter of the forward of a 2-layer model). Nothing reads the last layer's output, so that layer
stops at its q and k projections; its heads' normalizers come from the kernel with the keys standing
in for the values. The wiring follows ``DecoderLayer.forward`` (pre-/post-LN, parallel residual); a
test checks that every layer's q/k equal those of the model's own forward.

A layer with a sliding window of W positions (Mistral; not those in ``config.full_attention_layers``)
runs the same kernel a block of queries at a time over the band of keys that block can see,
[r0 − W + 1, r1), with an additive mask of that band: B × (B + W − 1) logits per block, O(T·W) in
all, and the normalizers come back over the band only, as the patterns need them.

A layer is made only where it fits: before making one, the long path asks its ``room`` (the memory
plan's :func:`attention_viz.runtime.memory_plan.layer_room`) how many bytes of the q/k kept on a GPU
must leave first, and moves the lowest layers to host memory until they have; a view reading one of
their heads copies that head's q and k back (8B shape, 128k tokens: 64 MB a head).

On a GPU (``on_device``, the default when the model's weights are not on the CPU) the q/k stay
there, in the model's dtype, for :mod:`attention_viz.core.blockwise_torch`, the layer's output comes from
PyTorch's public fused attention, and the normalizers from a blockwise row pass on the device
(:func:`attention_viz.core.blockwise_torch.every_normalizer`): the CPU kernel above is the only one
that hands them back.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np
import torch

from ..errors import ModelError
from .blockwise_torch import every_normalizer
from .model import MultiHeadAttention, Transformer


def _queries_keys(attn: MultiHeadAttention, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The layer's projections, rotated: q (1, h, T, d_k), k (1, h_kv, T, d_k)."""
    q = attn.split_heads(attn.w_q(x))  # (1, h, T, d_k)
    k = attn.split_heads(attn.w_k(x), attn.h_kv)  # (1, h_kv, T, d_k)
    if attn.rotary is not None:
        q, k = attn.rotary(q, k)
    return q, k


# PyTorch's CPU flash-attention kernel (the one scaled_dot_product_attention runs here), called
# directly: beside its output it returns the softmax normalizers it computed anyway, which the
# head's overview then reuses instead of summing T²/2 exps again.
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


def _fused_on_device(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`_fused` on any device: the context from the public fused attention (a block of
    queries over its band of keys with a window), each head's normalizers from a row pass."""
    sdpa = torch.nn.functional.scaled_dot_product_attention
    if window is None:
        context = sdpa(q, k, v, is_causal=True)
    else:
        length, contexts = q.shape[2], []
        for r0 in range(0, length, WINDOW_BLOCK):
            r1, c0 = min(length, r0 + WINDOW_BLOCK), max(0, r0 - window + 1)
            offset = (torch.arange(r0, r1, device=q.device)[:, None]
                      - torch.arange(c0, r1, device=q.device)[None, :])  # fmt: skip
            band = (offset >= 0) & (offset < window)  # True: the query sees the key
            contexts.append(sdpa(q[:, :, r0:r1], k[:, :, c0:r1], v[:, :, c0:r1], attn_mask=band))
        context = torch.cat(contexts, 2)
    lse = torch.stack([every_normalizer(q[0, i], k[0, i], window) for i in range(q.shape[1])])
    return context, lse[None]


class DecoderQueriesKeys:
    """A decoder-only model's q/k and normalizers on one input, each layer run when a view first asks
    (:class:`attention_viz.analysis.blockwise.QueriesKeys`). The layers below the *frontier* have
    run whole; the frontier's q/k and the heads of it run so far are kept with the residual stream
    entering it, (T, d_model) floats, from which the forward continues when a later layer is asked.
    Every value is the kernel's own over the same q, k, v whatever the order of asking (a head's rows
    never depend on the other heads in the call). One lock: sessions sharing the input never run a
    layer twice nor see one half made. It holds the (shared) model: the page keeps a few inputs only.

    ``on_device`` (default: the weights are not on the CPU): q/k kept as tensors in the model's dtype
    where the model runs, for the torch passes, instead of float32 numpy on the host. ``room``: asked
    before each layer's q/k are made, with the layer and the bytes of q/k kept on the device, how many
    of those bytes must move to host memory first (it raises where even that would not do)."""

    def __init__(self, model: Transformer, ids: torch.Tensor, on_device: bool | None = None,
                 room: Callable[[int, int], int] | None = None) -> None:  # fmt: skip
        config = model.config
        if config.shape != "decoder-only" or model.decoder is None:
            raise ModelError("long inputs need a decoder-only model")
        self._decoder = model.decoder
        self.device = next(model.parameters()).device
        self.on_device = self.device.type != "cpu" if on_device is None else on_device
        ids = ids.to(self.device)
        length = ids.shape[1]
        # each layer's window; None where it restricts nothing (full-attention layers, or W ≥ T)
        self.window = [None if w is None or w >= length else w for w in self._decoder.windows]
        self.n_layers, self.n_heads = len(self._decoder.layers), config.h
        # our decoder's families neither soft-cap their logits nor have sinks
        self.softcap: list[float | None] = [None] * self.n_layers
        self.sinks: list[np.ndarray | None] = [None] * self.n_layers
        # (h, T, d_k) and (h_kv, T, d_k) once made: numpy, or tensors on the device
        self._q: list[np.ndarray | torch.Tensor | None] = [None] * self.n_layers
        self._k: list[np.ndarray | torch.Tensor | None] = [None] * self.n_layers
        self._lse: list[dict[int, np.ndarray]] = [{} for _ in range(self.n_layers)]  # head → (T,)
        self._room = room
        self.moved: list[int] = []  # layers whose q/k were moved to host memory to make room, in order
        self._lock = threading.Lock()
        with torch.inference_mode():
            self._x: torch.Tensor | None = self._decoder.embed(ids)  # (1, T, d_model) entering the frontier
        self._frontier = 0
        self._v: torch.Tensor | None = None  # the frontier's values (1, h_kv, T, d_k), once its q/k are made
        self._contexts: dict[int, torch.Tensor] = {}  # the frontier's heads run so far → (1, 1, T, d_k)

    def layer(self, layer: int) -> tuple[np.ndarray | torch.Tensor, np.ndarray | torch.Tensor]:
        if self._q[layer] is None:
            with self._lock:
                self._reach(layer)
        return self._q[layer], self._k[layer]

    def head(self, layer: int, head: int) -> tuple[np.ndarray | torch.Tensor, np.ndarray | torch.Tensor]:
        q, k = self.layer(layer)
        q, k = q[head], k[head // (q.shape[0] // k.shape[0])]
        if self.on_device:  # a layer moved to host memory: this head back on the device (else a no-op)
            return q.to(self.device, non_blocking=True), k.to(self.device, non_blocking=True)
        return q, k

    def normalizers(self, layer: int, head: int | None = None) -> np.ndarray:
        heads = range(self.n_heads) if head is None else [head]
        if any(h not in self._lse[layer] for h in heads):
            with self._lock:
                self._reach(layer)
                if layer == self._frontier:  # below it every head has run
                    self._run([h for h in heads if h not in self._lse[layer]])
        return self._lse[layer][head] if head is not None else np.stack([self._lse[layer][h] for h in heads])

    @torch.inference_mode()
    def _reach(self, layer: int) -> None:
        """Run the layers below ``layer`` whole and make its q/k (lock held)."""
        while self._frontier < layer:
            self._finish()
        if self._q[layer] is None:
            if self._room is not None:
                self._make_room(self._room(layer, self._on_device_bytes()))
            attn_sub, attn = self._decoder.layers[layer].sublayers[0], self._decoder.layers[layer].self_attn
            attn_in = attn_sub.norm(self._x) if attn_sub.pre_norm else self._x  # parallel residual is pre-LN too
            q, k = _queries_keys(attn, attn_in)
            self._k[layer] = self._kept(k[0])
            self._q[layer] = self._kept(q[0])  # last: a reader without the lock checks q
            if layer == self.n_layers - 1:  # the last layer's output is never read: q and k are all it gives
                self._x = None
            else:
                self._v = attn.split_heads(attn.w_v(attn_in), attn.h_kv)

    def _on_device_bytes(self) -> int:
        """Bytes of q/k kept on the device that could move to host memory (none when kept on the host)."""
        if not self.on_device:
            return 0
        return sum(self._q[i].nbytes + self._k[i].nbytes for i in range(self.n_layers)
                   if self._q[i] is not None and i not in self.moved)  # fmt: skip

    def _make_room(self, needed: int) -> None:
        """Move the lowest layers' q/k kept on the device to host memory (pinned: a head comes back at
        the bus's full speed) until ``needed`` bytes have left it (lock held)."""
        for i in range(self.n_layers):
            if needed <= 0:
                return
            if self._q[i] is None or i in self.moved or not self.on_device:
                continue
            needed -= self._q[i].nbytes + self._k[i].nbytes
            self._k[i], self._q[i] = self._to_host(self._k[i]), self._to_host(self._q[i])  # q last, as in _reach
            self.moved.append(i)

    @staticmethod
    def _to_host(x: torch.Tensor) -> torch.Tensor:
        host = torch.empty(x.shape, dtype=x.dtype, pin_memory=x.is_cuda)
        return host.copy_(x)

    def _kept(self, x: torch.Tensor) -> np.ndarray | torch.Tensor:
        """A copy of ``x`` the model's later layers cannot touch: on the device in the dtype the
        projections computed it in (a float32 copy of bfloat16 values would add bytes, not digits:
        the torch passes work in float32 a head at a time), or float32 numpy on the host."""
        return x.clone() if self.on_device else x.float().numpy().copy()

    @torch.inference_mode()
    def _run(self, heads: list[int]) -> None:
        """The fused kernel on ``heads`` of the frontier (q/k made, lock held): their normalizers and,
        below the last layer, their outputs."""
        if not heads:
            return
        layer = self._frontier
        q, k = (torch.as_tensor(self._q[layer])[None], torch.as_tensor(self._k[layer])[None])
        chosen = torch.tensor(heads, device=q.device)
        kv = chosen // (q.shape[1] // k.shape[1])  # the K/V head each query head reads
        keys = k[:, kv]
        # the last layer: no values (its output is never read); the normalizers do not depend on them
        values = keys if self._v is None else self._v[:, kv].to(keys.dtype)
        fused = _fused_on_device if self.on_device else _fused
        context, lse = fused(q[:, chosen], keys, values, self.window[layer])
        for i, head in enumerate(heads):
            self._lse[layer][head] = lse[0, i].float().cpu().numpy().copy()
            if self._v is not None:
                self._contexts[head] = context[:, i : i + 1].to(self._v.dtype)

    @torch.inference_mode()
    def _finish(self) -> None:
        """The frontier's attention (the heads not yet run), feed-forward and residual: the next layer's
        input (lock held)."""
        layer, i = self._decoder.layers[self._frontier], self._frontier
        self._reach(i)
        self._run([h for h in range(self.n_heads) if h not in self._contexts])
        attn_sub, ffn_sub, attn = layer.sublayers[0], layer.sublayers[-1], layer.self_attn
        context = torch.cat([self._contexts[h] for h in range(self.n_heads)], 1)  # (1, h, T, d_k)
        batch, _, length, _ = context.shape
        out = attn.w_o(context.transpose(1, 2).reshape(batch, length, attn.h * attn.d_k))
        x = self._x
        if layer.parallel_residual:
            x = x + out + layer.feed_forward(ffn_sub.norm(x))
        elif attn_sub.pre_norm:
            x = x + out
            x = x + layer.feed_forward(ffn_sub.norm(x))
        else:
            x = attn_sub.norm(x + out)
            x = ffn_sub.norm(x + layer.feed_forward(x))
        self._x, self._v, self._contexts, self._frontier = x, None, {}, i + 1


def queries_and_keys(model: Transformer, ids: torch.Tensor, on_device: bool | None = None,
                     room: Callable[[int, int], int] | None = None) -> DecoderQueriesKeys:  # fmt: skip
    """ids (1, T) through a decoder-only model, layer by layer as views ask; ModelError for what this
    path cannot run. ``on_device``: q/k kept as tensors where the model runs (default off the CPU);
    ``room``: see :class:`DecoderQueriesKeys`."""
    return DecoderQueriesKeys(model, ids, on_device, room)
