"""The attention math as pure functions: tensors in, tensors out, no modules, no state.

Every function returns an :class:`Attention` triple so that the views can show each step:
``scores`` (the logits after scaling and masking, before softmax), ``pattern`` (the softmax
weights) and ``context`` (the weighted sum of the values).

Masks are boolean and say where attention is *allowed* (True = may attend). They broadcast
against the scores ``(..., query, key)``. Masked positions are ``-inf`` in ``scores`` and exactly
``0`` in ``pattern``; a row with every key masked gives a zero row, never NaN.

Scores and patterns are float32 even in a model whose weights are bfloat16 or float16: the softmax's
normalizer and the weights the views show keep float32's precision; only the context goes back to
the values' dtype.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextvars import ContextVar
from typing import NamedTuple

import torch

Allocate = Callable[[tuple[int, ...], torch.dtype], torch.Tensor]
HALF = (torch.bfloat16, torch.float16)  # computed in float32 before any softmax
CAUSAL_BLOCK = 128  # query rows per block of causal_attention: a block's scores stay in the cache
CAUSAL_SCRATCH = 16 << 20  # bytes of a block's scores at most: fewer rows at long lengths, so that glibc
# reuses the block's memory from layer to layer instead of mapping it afresh (it maps blocks past 32 MB anew)


def fresh(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    return torch.empty(shape, dtype=dtype)


# Where a call's (query × key) tensors come from: plain torch.empty unless the caller opts in, for its
# own calls only, to recycled memory (attention_viz.runtime.memory.recycling()). Per call, as capture() is.
scratch_allocator: ContextVar[Allocate] = ContextVar("scratch_allocator", default=fresh)


class Attention(NamedTuple):
    context: torch.Tensor  # (..., Tq, d_v)
    pattern: torch.Tensor  # (..., Tq, Tk), rows sum to 1 (or 0 where fully masked)
    scores: torch.Tensor | None  # (..., Tq, Tk), -inf where masked; None if the pattern overwrote them


def masked_softmax(
    scores: torch.Tensor, mask: torch.Tensor | None, overwrite: bool = False
) -> tuple[torch.Tensor | None, torch.Tensor]:
    """Apply ``mask`` (-inf where False) and softmax over keys; returns ``(masked scores, pattern)``.

    ``overwrite=True``: ``scores`` is the caller's scratch tensor: the mask and then the softmax are
    written over it, so a head makes one (Tq, Tk) tensor instead of two; the returned scores are
    then None.
    """
    if scores.dtype in HALF:
        scores = scores.float()
    # softmax's out= records no gradient, so a model being trained always gets fresh tensors
    grad = scores.requires_grad
    if mask is not None:
        fits = torch.broadcast_shapes(scores.shape, mask.shape) == scores.shape
        if overwrite and fits and not grad and scores.is_contiguous():
            scores.masked_fill_(~mask, float("-inf"))
        else:
            scores = scores.masked_fill(~mask, float("-inf"))
    in_place = overwrite and not grad and scores.is_contiguous()
    if in_place:
        pattern = torch.softmax(scores, dim=-1, out=scores)
    elif not grad and scores.device.type == "cpu":
        pattern = torch.softmax(scores, dim=-1, out=scratch_allocator.get()(tuple(scores.shape), scores.dtype))
    else:
        pattern = torch.softmax(scores, dim=-1)
    if mask is not None:
        # softmax of an all -inf row is NaN; zeroing the masked entries afterwards turns it into 0s and
        # leaves partially masked rows untouched (exp(-inf) is already exactly 0 there).
        pattern = pattern.masked_fill(~mask, 0.0) if grad else pattern.masked_fill_(~mask, 0.0)
    return (None if in_place else scores), pattern


def query_key_products(query: torch.Tensor, key: torch.Tensor, factor: float = 1.0) -> torch.Tensor:
    """factor · Q Kᵀ (..., Tq, Tk). Without gradients it is written into memory from
    :data:`scratch_allocator` (recycled where the caller opted in: at long lengths mapping fresh pages
    costs as much as the product), with the factor applied inside the matrix product rather than in a
    pass over Q."""
    batch = query.shape[:-2]
    if query.requires_grad or key.requires_grad or query.device.type != "cpu" or key.shape[:-2] != batch:
        return (query * factor if factor != 1.0 else query) @ key.transpose(-2, -1)
    (tq, d_k), tk, n = query.shape[-2:], key.size(-2), math.prod(batch)
    scores = scratch_allocator.get()((*batch, tq, tk), query.dtype)
    flat = scores.view(n, tq, tk)  # beta=0: the uninitialized input is ignored, NaNs included
    torch.baddbmm(flat, query.reshape(n, tq, d_k), key.reshape(n, tk, d_k).transpose(1, 2), beta=0, alpha=factor,
                  out=flat)
    return scores


def scaled_dot_product_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor | None = None,
    scale: bool = True,
    dropout: torch.nn.Dropout | None = None,
    keep_scores: bool = True,
) -> Attention:
    """softmax(Q Kᵀ / √d_k) V  (Vaswani et al. 2017, eq. 1); ``scale=False`` drops the 1/√d_k.

    ``dropout`` (training only) acts on the weights used for the context; the returned pattern is
    the one before dropout, which is what the views show.

    Grouped-query attention: ``key`` and ``value`` may have fewer heads than ``query``
    ``(..., h_kv, Tk, d)`` with h divisible by h_kv; each serves a group of consecutive query heads
    (see :func:`repeat_kv`).

    ``keep_scores=False`` (nobody looks at them) lets the pattern overwrite the scores: at 512
    tokens each is 1 MB per head, and writing and paging in a second one costs more than the
    arithmetic.
    """
    d_k = query.size(-1)
    if query.dtype in HALF:  # the products in float32 too, not rounded to 8 or 11 bits before the softmax
        query, key = query.float(), key.float()
    factor = 1.0 / math.sqrt(d_k) if scale else 1.0
    if not keep_scores and dropout is None and sees_no_later_key(query, key, mask):
        return causal_attention(query, key, value, mask, factor)  # grouped key/value heads read as they are
    if key.dim() > 2 and key.size(-3) != query.size(-3):  # grouped-query: fewer K/V heads than query heads
        groups = kv_groups(query.size(-3), key.size(-3))
        key, value = repeat_kv(key, groups), repeat_kv(value, groups)
    # 1/√d_k applied with the product (or on the (Tq, d_k) queries), never in a pass over (Tq, Tk)
    scores = query_key_products(query, key, factor)  # (..., Tq, Tk)
    scores, pattern = masked_softmax(scores, mask, overwrite=not keep_scores)
    weights = dropout(pattern) if dropout is not None else pattern
    return Attention(weights.to(value.dtype) @ value, pattern, scores)


def sees_no_later_key(query: torch.Tensor, key: torch.Tensor, mask: torch.Tensor | None,
                       causal: bool = False) -> bool:
    """Whether :func:`causal_attention` computes this call: self-attention of more than one block of
    queries on the CPU, no gradient, and a mask that :func:`_hides_later_keys` (``mask`` None: the
    plain causal mask where ``causal`` says so, as transformers passes it; else no mask at all). (A GPU
    keeps the whole square: a block's checks would each wait for the device, and nobody has measured
    it there yet.)"""
    length = query.size(-2)
    if length <= CAUSAL_BLOCK or key.size(-2) != length or query.requires_grad:
        return False
    if query.device.type != "cpu":
        return False
    return causal if mask is None else _hides_later_keys(mask, length)


def _hides_later_keys(mask: torch.Tensor, length: int) -> bool:
    """Whether ``mask`` is one (length, length) mask for every head that lets each query see itself and
    hides every later key (causal, with or without a sliding window)."""
    if mask.shape[-2:] != (length, length) or mask.numel() != length * length:
        return False
    square = mask.reshape(length, length)
    return bool(square.diagonal().all()) and not bool(square.triu(1).any())


def causal_attention(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor | None, factor: float,
    softcap: float | None = None, sinks: torch.Tensor | None = None, eager_rounding: bool = False,
) -> Attention:
    """softmax(factor · Q Kᵀ) V under a mask that hides every later key (``mask`` None: the plain
    causal mask, never built), a block of query rows at a time: a block's products only with the keys
    up to its last row (the rest of its rows are 0 and written as such), the mask applied where it
    hides something, the softmax in a scratch block that stays in the cache, then copied into the
    pattern. About half the products of the whole (T, T), and the pattern's memory is written once
    instead of in five passes. The numbers are those of the whole square (tests/test_attention.py);
    the scores are not kept (the pattern is what is asked).

    Grouped-query key/value heads ``(..., h_kv, T, d)`` are read as they are: the queries of a group
    share one product with their key head instead of a copy of it per query head. ``softcap`` and
    ``sinks`` as in :func:`family_scores` and :func:`softmax_with_sinks`. ``eager_rounding``: the float32
    bits of transformers' eager code: the factor multiplies the rounded products (instead of scaling
    inside the matrix product) and the context is one product of the whole pattern with the values
    after the blocks (a product over fewer keys sums in another order)."""
    *lead, heads, length, d_k = query.shape
    groups = kv_groups(heads, key.size(-3))
    n = math.prod(lead) * key.size(-3)  # key heads in the batch; each serves ``groups`` query heads
    q = query.reshape(n, groups, length, d_k)
    k, v = key.reshape(n, length, d_k), value.reshape(n, length, -1)
    square = None if mask is None else mask.reshape(length, length)
    pattern = scratch_allocator.get()((*lead, heads, length, length), query.dtype) if query.device.type == "cpu" \
        else torch.empty((*lead, heads, length, length), dtype=query.dtype, device=query.device)  # fmt: skip
    rows = pattern.view(n, groups, length, length)
    context = None if eager_rounding else torch.empty((*lead, heads, length, v.size(-1)), dtype=value.dtype,
                                                      device=value.device)  # fmt: skip
    step = max(32, min(CAUSAL_BLOCK, CAUSAL_SCRATCH // (query.element_size() * n * groups * length)) // 32 * 32)
    scratch = torch.empty(n * groups * min(step, length) * length, dtype=query.dtype, device=query.device)
    later = torch.ones(step, step, dtype=torch.bool, device=query.device).triu(1) if square is None else None
    sink = None if sinks is None else sinks.float().reshape(1, -1, 1, 1).expand(
        math.prod(lead), -1, 1, 1).reshape(n, groups, 1, 1)  # fmt: skip
    for r0 in range(0, length, step):
        r1 = min(length, r0 + step)
        block = scratch[: n * groups * (r1 - r0) * r1].view(n, groups * (r1 - r0), r1)
        queries = q[:, :, r0:r1].reshape(n, groups * (r1 - r0), d_k)  # a copy only where groups > 1
        if eager_rounding:
            torch.bmm(queries, k[:, :r1].transpose(1, 2), out=block).mul_(factor)
        else:
            torch.baddbmm(block, queries, k[:, :r1].transpose(1, 2), beta=0, alpha=factor, out=block)
        per_head = block.view(n, groups, r1 - r0, r1)
        if softcap is not None:
            per_head.div_(softcap).tanh_().mul_(softcap)
        if square is None:  # the plain causal mask: only the block's own square hides keys
            per_head[..., r0:].masked_fill_(later[: r1 - r0, : r1 - r0], float("-inf"))
        else:
            seen = square[r0:r1, :r1]
            first = r0 if bool(seen[:, :r0].all()) else 0  # where the mask starts to hide keys (causal: the diagonal)
            per_head[..., first:].masked_fill_(~seen[:, first:], float("-inf"))
        if sink is None:
            torch.softmax(block, dim=-1, out=block)
        else:
            _sink_softmax(per_head, sink, out=per_head)
        rows[:, :, r0:r1, :r1].copy_(per_head)
        rows[:, :, r0:r1, r1:].zero_()
        if context is not None:
            mixed = torch.bmm(block.to(v.dtype), v[:, :r1]).view(n, groups, r1 - r0, -1)
            context.view(n, groups, length, -1)[:, :, r0:r1].copy_(mixed)
    return Attention(grouped_context(pattern, value) if context is None else context, pattern, None)


def fused_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                    mask: torch.Tensor | None = None) -> torch.Tensor:  # fmt: skip
    """softmax(Q Kᵀ / √d_k) V by PyTorch's fused kernel (flash attention where it applies), the context
    alone: no (T, T) weights are made or kept. For layers nobody looks at; a plain causal mask runs as
    ``is_causal`` (the kernel skips the blocks above the diagonal). A row whose every key is masked gives
    0s, as :func:`scaled_dot_product_attention` does."""
    if key.dim() > 2 and key.size(-3) != query.size(-3):
        groups = kv_groups(query.size(-3), key.size(-3))
        key, value = repeat_kv(key, groups), repeat_kv(value, groups)
    sdpa, length = torch.nn.functional.scaled_dot_product_attention, query.size(-2)
    if mask is not None and key.size(-2) == length and _hides_later_keys(mask, length) and \
            bool(mask.reshape(length, length).tril().all()):  # fmt: skip
        return sdpa(query, key, value, is_causal=True)
    context = sdpa(query, key, value, attn_mask=mask)
    if mask is not None:
        seen = mask.any(-1, keepdim=True)  # False: a row with no key to read
        if not bool(seen.all()):
            context = context.masked_fill(~seen, 0.0)
    return context


def kv_groups(h: int, h_kv: int) -> int:
    """How many query heads share one K/V head: h / h_kv (1 = multi-head, h = multi-query)."""
    if h_kv < 1 or h % h_kv:
        raise ValueError(f"{h} query heads cannot be split evenly over {h_kv} key/value heads")
    return h // h_kv


def repeat_kv(x: torch.Tensor, groups: int) -> torch.Tensor:
    """(..., h_kv, T, d) → (..., h_kv·groups, T, d): K/V head j repeated for query heads
    j·groups … (j+1)·groups − 1, so query head i reads K/V head i // groups.

    Grouped-query attention (Ainslie et al. 2023) is multi-head attention with these repeated keys
    and values; multi-query attention (Shazeer 2019) is the case of one K/V head.
    """
    if groups == 1:
        return x
    *lead, h_kv, length, d = x.shape
    return x.unsqueeze(-3).expand(*lead, h_kv, groups, length, d).reshape(*lead, h_kv * groups, length, d)


def additive_scores(
    query: torch.Tensor, key: torch.Tensor, w_q: torch.Tensor, w_k: torch.Tensor, w_v: torch.Tensor
) -> torch.Tensor:
    """Bahdanau et al. 2015 scoring: score(q, k) = w_vᵀ tanh(W_q q + W_k k).

    query (..., Tq, d_q), key (..., Tk, d_k), w_q (h, d_q), w_k (h, d_k), w_v (h,) → (..., Tq, Tk).
    Unlike the dot product it works when queries and keys have different sizes.
    """
    projected_q = query @ w_q.T  # (..., Tq, h)
    projected_k = key @ w_k.T  # (..., Tk, h)
    features = torch.tanh(projected_q.unsqueeze(-2) + projected_k.unsqueeze(-3))  # (..., Tq, Tk, h)
    return features @ w_v  # (..., Tq, Tk)


def additive_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    w_q: torch.Tensor,
    w_k: torch.Tensor,
    w_v: torch.Tensor,
    mask: torch.Tensor | None = None,
) -> Attention:
    """Additive attention: softmax over :func:`additive_scores`, then the weighted sum of values."""
    scores, pattern = masked_softmax(additive_scores(query, key, w_q, w_k, w_v), mask)
    return Attention(pattern @ value, pattern, scores)


def raw_self_attention(x: torch.Tensor) -> Attention:
    """The seed's original self-attention, softmax(X Xᵀ) X: no projections, no scaling.

    Each row of X Xᵀ holds one token's dot products with every token (their similarity).
    """
    return scaled_dot_product_attention(x, x, x, scale=False)


def causal_mask(n: int, device: torch.device | str | None = None) -> torch.Tensor:
    """(n, n) lower-triangular mask: position i may attend to positions 0..i, never the future."""
    return torch.ones(n, n, dtype=torch.bool, device=device).tril()


def sliding_window_mask(n: int, window: int, device: torch.device | str | None = None) -> torch.Tensor:
    """(n, n) causal mask limited to the last ``window`` positions (Mistral): i attends j when
    i − window < j ≤ i, itself included. Information from farther back still arrives, one window
    per layer, through the tokens in between."""
    if window < 1:
        raise ValueError(f"a sliding window needs at least one position, got {window}")
    return torch.ones(n, n, dtype=torch.bool, device=device).tril().triu(1 - window)


def padding_mask(lengths: torch.Tensor | list[int], max_len: int | None = None) -> torch.Tensor:
    """(B, 1, T) mask of the real (non-padding) keys of each sequence in a right-padded batch."""
    lengths = torch.as_tensor(lengths)
    max_len = int(lengths.max()) if max_len is None else max_len
    keys = torch.arange(max_len, device=lengths.device)
    return (keys.unsqueeze(0) < lengths.unsqueeze(1)).unsqueeze(1)



def grouped(x: torch.Tensor, key_heads: int) -> torch.Tensor:
    """(..., h, T, d) → (n, h / key_heads · T, d), n = the batch's key heads: the rows of the query heads
    that share a key/value head, one after the other (a view where ``x`` is contiguous), so that one
    matrix product per key head serves its whole group, without a repeated copy of its keys."""
    *lead, heads, length, d = x.shape
    return x.reshape(math.prod(lead) * key_heads, heads // key_heads * length, d)


def family_scores(query: torch.Tensor, key: torch.Tensor, scaling: float, allowed: torch.Tensor | None = None,
                  bias: torch.Tensor | None = None, softcap: float | None = None) -> torch.Tensor:
    """The logits every family's attention softmaxes, float32 ``(..., h, Tq, Tk)``: ``scaling · Q Kᵀ``
    (grouped-query key heads each read by their group of query heads), soft-capped ``c · tanh(s / c)``
    where the family says (Gemma 2), plus an additive ``bias`` (T5's relative positions), ``-inf`` where
    ``allowed`` is False (True = may attend; broadcast to the scores). A fresh tensor; every later step
    writes into it where no gradient flows (one (Tq, Tk) tensor per head, not one per step)."""
    if query.dtype in HALF:
        query, key = query.float(), key.float()
    *lead, heads, queries, _ = query.shape
    keys, key_heads = key.size(-2), key.size(-3)
    kv_groups(heads, key_heads)
    if key.shape[:-3] == tuple(lead):
        scores = (grouped(query, key_heads) @ grouped(key, key_heads).transpose(-2, -1)).view(
            *lead, heads, queries, keys)  # fmt: skip
    else:  # a key broadcast over the batch
        scores = query @ repeat_kv(key, heads // key_heads).transpose(-2, -1)
    grad = scores.requires_grad
    # scaled after the product, as every family's eager code does: the same float32 roundings
    scores = scores * scaling if grad else scores.mul_(scaling)
    if softcap is not None:
        scores = torch.tanh(scores / softcap) * softcap if grad else scores.div_(softcap).tanh_().mul_(softcap)
    if bias is not None:
        fits = torch.broadcast_shapes(scores.shape, bias.shape) == scores.shape
        scores = scores.add_(bias) if fits and not grad else scores + bias.float()
    if allowed is None:
        return scores
    return scores.masked_fill(~allowed, float("-inf")) if grad else scores.masked_fill_(~allowed, float("-inf"))


def softmax_with_sinks(scores: torch.Tensor, sinks: torch.Tensor | None = None,
                       allowed: torch.Tensor | None = None, overwrite: bool = False) -> torch.Tensor:
    """Softmax over keys of masked ``scores`` ``(..., h, Tq, Tk)``; a row with no key allowed gives 0s.

    ``sinks`` ``(h,)``: one extra logit per head that joins every row's normaliser but reads no value
    (GPT-OSS's attention sinks), so a row sums to less than 1 by exactly the sink's share. ``allowed``:
    the mask the scores were masked with, when there was one (it tells whether a row is empty).
    ``overwrite``: nobody reads the scores afterwards, so the pattern is written over them.
    """
    out = scores if overwrite and not scores.requires_grad else None
    if sinks is not None:
        return _sink_softmax(scores, sinks.float().reshape(-1, 1, 1), out)
    pattern = torch.softmax(scores, dim=-1) if out is None else torch.softmax(scores, dim=-1, out=out)
    # a row with no key allowed is all -inf and its softmax NaN in every column, the first included:
    # reading that column finds such rows (padding; never a causal row) without a pass over the pattern
    if allowed is None or not bool(pattern[..., :1].isnan().any()):
        return pattern
    empty = ~allowed.any(-1, keepdim=True)
    return pattern.masked_fill(empty, 0.0) if pattern.requires_grad else pattern.masked_fill_(empty, 0.0)


def _sink_softmax(scores: torch.Tensor, sink: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
    """softmax over each row and its sink logit (``sink`` broadcast to ``(..., Tq, 1)``), the sink's
    column left out: exp(s − m) / (Σ exp(s − m) + exp(sink − m)), m the row's largest logit, sink
    included. Written into ``out`` where given (it may be ``scores`` itself)."""
    top = torch.maximum(scores.amax(-1, keepdim=True), sink)  # a row with every key masked: the sink
    if out is None:
        pattern = torch.exp(scores - top)
        return pattern / (pattern.sum(-1, keepdim=True) + torch.exp(sink - top))
    pattern = torch.sub(scores, top, out=out).exp_()  # exp(-inf) = 0 where masked
    return pattern.div_(pattern.sum(-1, keepdim=True).add_(torch.exp(sink - top)))


def grouped_context(pattern: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """pattern (..., h, Tq, Tk) · value (..., h_kv, Tk, d) → the context (..., h, Tq, d): each key/value
    head read by its group of query heads in one product, in the values' dtype."""
    *lead, heads, queries, _ = pattern.shape
    key_heads = value.size(-3)
    if value.shape[:-3] != tuple(lead):
        return pattern.to(value.dtype) @ repeat_kv(value, kv_groups(heads, key_heads))
    mixed = grouped(pattern.to(value.dtype), key_heads) @ value.reshape(-1, *value.shape[-2:])
    return mixed.view(*lead, heads, queries, -1)
