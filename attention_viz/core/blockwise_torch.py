"""The blockwise passes of :mod:`attention_viz.analysis.blockwise` in torch, on the tensors' own device
(CPU or CUDA): a long input's q and k stay where the model made them, and only screen-sized results
come back, as numpy.

Same functions, same arguments (less ``workers``: a device spreads a block over its own cores), same
answers: the logits and their exps, the heavy T²/2 part, in float32; each tile's maxima and sums combined
into normalizers and pooled probabilities in float64 (rows × tiles values, cheap); exact cells and
their rows' normalizers in float64 throughout, as numpy's are; a head's ``softcap`` (c · tanh(s / c) on
every logit, before the mask) and ``sink`` (a logit in every row's normalizer) as numpy's too. Blocks
are larger than numpy's default (one product of ``block_rows`` × ``chunk`` logits per step) so that a
GPU gets work worth a launch.

:func:`overview` returns :class:`OverviewParts`, the fields of ``analysis.blockwise.Overview`` in
order (the core cannot import the analysis above it): ``Overview(*parts)``.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch

POOLINGS = ("max", "mean")
BLOCK_ROWS = 1024  # queries per block
CHUNK = 4096  # keys per product: a block's logits are block_rows × chunk float32 (16 MB)
NEG_INF = float("-inf")


class OverviewParts(NamedTuple):
    """One head's pooled pattern: the fields of ``analysis.blockwise.Overview``, numpy."""

    lse: np.ndarray  # (T,) float64
    max: np.ndarray  # (row tiles, col tiles) float32
    mean: np.ndarray | None  # float32; None from a pass given the normalizers
    tile_rows: int
    tile_cols: int


def tile_size(length: int, tiles: int) -> int:
    """Tokens per tile so that ``length`` tokens fit in at most ``tiles`` tiles."""
    return max(1, math.ceil(length / max(1, tiles)))


def _tensor(x: np.ndarray | torch.Tensor, dtype: torch.dtype, device: torch.device | None = None) -> torch.Tensor:
    """``x`` as a tensor of ``dtype``, on its own device (numpy: the CPU) unless one is given."""
    x = x if isinstance(x, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(x))
    return x.to(device=device or x.device, dtype=dtype)


def _scaled(q: np.ndarray | torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    q = _tensor(q, dtype)
    return q * (1.0 / math.sqrt(q.shape[-1]))


def _check_window(window: int | None, causal: bool) -> None:
    if window is not None and (window < 1 or not causal):
        raise ValueError(f"a sliding window is causal and at least one position, got {window} (causal={causal})")


def _first_key(rows: range, cols: range, window: int | None) -> int:
    """The first key of ``cols`` any row of ``rows`` may see."""
    return cols.start if window is None else max(cols.start, rows.start - window + 1)


def _softcapped(s: torch.Tensor, softcap: float | None) -> torch.Tensor:
    """c · tanh(s / c), in place (Gemma 2's soft-capped logits); ``s`` as it is without a cap."""
    return s if softcap is None else s.div_(softcap).tanh_().mul_(softcap)


def _with_sink(lse: torch.Tensor, sink: float | None) -> torch.Tensor:
    """The normalizers with the head's sink logit joined: log(exp(lse) + exp(sink))."""
    return lse if sink is None else torch.logaddexp(lse, torch.tensor(sink, dtype=lse.dtype, device=lse.device))


def _mask_outside(s: torch.Tensor, rows: range, cols: range, window: int | None) -> None:
    """−inf (in place) where key c of ``cols`` lies in the future of query r of ``rows`` (only keys
    after rows.start can) or, given a ``window``, W or more positions back (only keys before
    rows.stop − W can). ``s`` is (rows, cols); blocks wholly inside the band are left alone."""
    future = cols.stop - 1 > rows.start
    gone = window is not None and cols.start < rows.stop - window
    if not (future or gone):
        return
    row = torch.arange(rows.start, rows.stop, device=s.device)[:, None]
    col = torch.arange(cols.start, cols.stop, device=s.device)[None, :]
    if future:
        s.masked_fill_(col > row, NEG_INF)
    if gone:
        s.masked_fill_(col <= row - window, NEG_INF)


def _logits(q: torch.Tensor, k: torch.Tensor, rows: range, cols: range, causal: bool,
            window: int | None, softcap: float | None) -> torch.Tensor:  # fmt: skip
    """(len(rows), len(cols)) logits in q's dtype, soft-capped given ``softcap``, −inf outside the
    band; q scaled already."""
    s = _softcapped(q[rows.start : rows.stop] @ k[cols.start : cols.stop].T, softcap)
    if causal:
        _mask_outside(s, rows, cols, window)
    return s


def _tiles(q: torch.Tensor, k: torch.Tensor, rows: range, cols: range, tile: int, causal: bool, chunk: int,
           sums: bool, window: int | None, softcap: float | None) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """For each row of ``rows`` and each tile of ``tile`` keys of ``cols``: the largest logit and
    Σ exp(s − that largest), float32 (len(rows), tiles); −inf and 0 for tiles no row of the block
    sees. ``chunk`` (whole tiles) keys per product; ``sums=False``: the maxima alone (a ``softcap`` on
    the maxima only: c · tanh(s / c) rises with s)."""
    n_tiles = math.ceil(len(cols) / tile)
    tile_max = torch.full((len(rows), n_tiles), NEG_INF, dtype=torch.float32, device=q.device)
    tile_sum = torch.zeros((len(rows), n_tiles), dtype=torch.float32, device=q.device)
    last = min(cols.stop, rows.stop) if causal else cols.stop  # keys after the block's last row: never seen
    start = cols.start + (_first_key(rows, cols, window) - cols.start) // tile * tile  # whole tiles
    for c0 in range(start, last, chunk):
        part = range(c0, min(last, c0 + chunk))
        s = _logits(q, k, rows, part, causal, window, softcap if sums else None)  # (rows, keys)
        width = math.ceil(len(part) / tile) * tile
        if width != len(part):
            s = torch.nn.functional.pad(s, (0, width - len(part)), value=NEG_INF)
        s = s.view(len(rows), width // tile, tile)
        block_max = s.amax(dim=2)  # (rows, tiles in chunk)
        first = (c0 - cols.start) // tile
        tile_max[:, first : first + block_max.shape[1]] = block_max
        if sums:
            shift = torch.where(torch.isfinite(block_max), block_max, 0.0)
            s.sub_(shift[:, :, None]).exp_()  # in place: the block's logits are ours alone
            tile_sum[:, first : first + block_max.shape[1]] = s.sum(dim=2)
    if not sums and softcap is not None:
        seen = torch.isfinite(tile_max)
        tile_max[seen] = _softcapped(tile_max[seen], softcap)
    return tile_max, tile_sum


def _pool_rows(values: torch.Tensor, tile: int, how: str) -> torch.Tensor:
    """(rows, n) → (⌈rows / tile⌉, n): the max or the sum over each tile of rows."""
    pad = math.ceil(values.shape[0] / tile) * tile - values.shape[0]
    tiles = torch.nn.functional.pad(values, (0, 0, 0, pad)).view(-1, tile, values.shape[1])
    return tiles.amax(dim=1) if how == "max" else tiles.sum(dim=1)


def _cells(length: int, tile: int) -> np.ndarray:
    """Tokens in each tile (the last maybe fewer)."""
    return np.minimum(tile, length - np.arange(math.ceil(length / tile)) * tile)


def _relative(tile_max: torch.Tensor, lse: torch.Tensor) -> torch.Tensor:
    """exp(tile max − lse) in float64: each tile's largest probability, per row (0 for unseen tiles)."""
    tile_max = tile_max.double()
    return torch.exp(torch.where(torch.isfinite(tile_max), tile_max - lse[:, None], NEG_INF))


def overview(
    q: np.ndarray | torch.Tensor, k: np.ndarray | torch.Tensor, tiles: int = 512, causal: bool = True,
    block_rows: int = BLOCK_ROWS, chunk: int = CHUNK, lse: np.ndarray | torch.Tensor | None = None,
    window: int | None = None, softcap: float | None = None, sink: float | None = None,
) -> OverviewParts:  # fmt: skip
    """One pass: normalizers and the max-/mean-pooled pattern of one head, on q's device.

    q, k (T, d_k), numpy or tensors (k on q's device). Given ``lse`` (T,), the maxima alone (``mean``
    None); ``window``: the layer's sliding window; ``softcap``, ``sink``: the head's extras (a given
    ``lse`` has the sink in it). As ``analysis.blockwise.overview``.
    """
    _check_window(window, causal)
    q = _scaled(q, torch.float32)
    k = _tensor(k, torch.float32, q.device)
    n = q.shape[0]
    t = tile_size(n, tiles)
    n_tiles = math.ceil(n / t)
    chunk = max(t, chunk // t * t)  # chunks hold whole tiles
    block_rows = max(t, block_rows // t * t)  # row blocks hold whole tiles too
    sums = lse is None
    lse = torch.empty(n, dtype=torch.float64, device=q.device) if sums else _tensor(lse, torch.float64, q.device)
    pooled_max = torch.zeros((n_tiles, n_tiles), dtype=torch.float64, device=q.device)
    pooled_sum = torch.zeros((n_tiles, n_tiles), dtype=torch.float64, device=q.device)
    with torch.inference_mode():
        for r0 in range(0, n, block_rows):
            rows = range(r0, min(n, r0 + block_rows))
            tile_max, tile_sum = _tiles(q, k, rows, range(n), t, causal, chunk, sums, window, softcap)
            seen = range(_first_key(rows, range(n), window) // t, math.ceil(rows.stop / t) if causal else n_tiles)
            tile_max, tile_sum = tile_max[:, seen.start : seen.stop], tile_sum[:, seen.start : seen.stop].double()
            if sums:
                wide = tile_max.double()
                row_max = wide.amax(dim=1)
                spread = torch.exp(torch.where(torch.isfinite(wide), wide - row_max[:, None], NEG_INF))
                lse[rows.start : rows.stop] = _with_sink(row_max + torch.log((tile_sum * spread).sum(dim=1)), sink)
            rel = _relative(tile_max, lse[rows.start : rows.stop])
            first = rows.start // t
            pooled = _pool_rows(rel, t, "max")
            pooled_max[first : first + pooled.shape[0], seen.start : seen.stop] = pooled
            if sums:
                sums_pooled = _pool_rows(tile_sum * rel, t, "sum")
                pooled_sum[first : first + pooled.shape[0], seen.start : seen.stop] = sums_pooled
    mean = None
    if sums:
        mean = (pooled_sum.cpu().numpy() / np.outer(_cells(n, t), _cells(n, t))).astype(np.float32)
    return OverviewParts(lse.cpu().numpy(), pooled_max.float().cpu().numpy(), mean, t, t)


def _normalizers(q: torch.Tensor, k: torch.Tensor, rows: range, causal: bool, chunk: int, window: int | None,
                 softcap: float | None = None, sink: float | None = None) -> torch.Tensor:  # fmt: skip
    """log Σ exp of the logits of ``rows`` (the ``sink``'s exp added) in q's dtype, a chunk of keys at a
    time; q scaled already."""
    last = rows.stop if causal else k.shape[0]
    row_max = torch.full((len(rows),), NEG_INF, dtype=q.dtype, device=q.device)
    total = torch.zeros(len(rows), dtype=q.dtype, device=q.device)
    for c0 in range(_first_key(rows, range(last), window), last, chunk):
        s = _logits(q, k, rows, range(c0, min(last, c0 + chunk)), causal, window, softcap)
        new_max = torch.maximum(row_max, s.amax(dim=1))  # −inf for a row whose band starts in a later chunk
        shift = torch.where(torch.isfinite(new_max), new_max, 0.0)
        total = total * torch.exp(row_max - shift) + torch.exp(s - shift[:, None]).sum(dim=1)
        row_max = new_max
    return _with_sink(row_max + torch.log(total), sink)


def normalizers(q: np.ndarray | torch.Tensor, k: np.ndarray | torch.Tensor, rows: range, causal: bool = True,
                chunk: int = CHUNK, window: int | None = None, softcap: float | None = None,
                sink: float | None = None) -> np.ndarray:  # fmt: skip
    """The exact lse of ``rows`` (float64), as ``analysis.blockwise.normalizers``."""
    _check_window(window, causal)
    q = _scaled(q, torch.float64)
    k = _tensor(k, torch.float64, q.device)
    with torch.inference_mode():
        return _normalizers(q, k, rows, causal, chunk, window, softcap, sink).cpu().numpy()


def every_normalizer(q: torch.Tensor, k: torch.Tensor, window: int | None = None, block_rows: int = BLOCK_ROWS,
                     chunk: int = CHUNK) -> torch.Tensor:  # fmt: skip
    """Causal lse of every row of one head, float32 on q's device (T,): what a fused kernel returns
    beside its output, for devices whose kernels are not asked for it."""
    q = _scaled(q, torch.float32)
    k = _tensor(k, torch.float32, q.device)
    n = q.shape[0]
    return torch.cat([_normalizers(q, k, range(r0, min(n, r0 + block_rows)), True, chunk, window)
                      for r0 in range(0, n, block_rows)])  # fmt: skip


def pattern_block(q: np.ndarray | torch.Tensor, k: np.ndarray | torch.Tensor, rows: range, cols: range,
                  causal: bool = True, window: int | None = None, softcap: float | None = None,
                  sink: float | None = None) -> np.ndarray:  # fmt: skip
    """The exact probabilities P[rows, cols] (float32 from float64 math), as
    ``analysis.blockwise.pattern_block``."""
    _check_window(window, causal)
    q = _scaled(q, torch.float64)
    k = _tensor(k, torch.float64, q.device)
    with torch.inference_mode():
        lse = _normalizers(q, k, rows, causal, CHUNK, window, softcap, sink)
        s = _logits(q, k, rows, cols, causal, window, softcap)
        return torch.exp(s - lse[:, None]).float().cpu().numpy()


def pooled_region(
    q: np.ndarray | torch.Tensor,
    k: np.ndarray | torch.Tensor,
    lse: np.ndarray | torch.Tensor,
    rows: range,
    cols: range,
    tiles: int = 512,
    pooling: str = "max",
    causal: bool = True,
    block_rows: int = BLOCK_ROWS,
    chunk: int = CHUNK,
    window: int | None = None,
    softcap: float | None = None,
    sink: float | None = None,
) -> tuple[np.ndarray, int, int]:
    """A zoomed rectangle pooled to at most ``tiles`` × ``tiles``: (pooled, tile_rows, tile_cols), as
    ``analysis.blockwise.pooled_region`` (exact cells once the region fits)."""
    if pooling not in POOLINGS:
        raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
    _check_window(window, causal)
    tr, tc = tile_size(len(rows), tiles), tile_size(len(cols), tiles)
    if tr == tc == 1:
        return pattern_block(q, k, rows, cols, causal, window, softcap, sink), 1, 1
    q = _scaled(q, torch.float32)
    k = _tensor(k, torch.float32, q.device)
    lse = _tensor(lse, torch.float64, q.device)
    out = torch.zeros((math.ceil(len(rows) / tr), math.ceil(len(cols) / tc)), dtype=torch.float64, device=q.device)
    chunk = max(tc, chunk // tc * tc)
    step = max(tr, block_rows // tr * tr)
    with torch.inference_mode():
        for local in range(0, len(rows), step):  # rows of the region, counted from its first
            part = range(rows.start + local, min(rows.stop, rows.start + local + step))
            tile_max, tile_sum = _tiles(q, k, part, cols, tc, causal, chunk, pooling == "mean", window, softcap)
            rel = _relative(tile_max, lse[part.start : part.stop])
            pooled = _pool_rows(rel, tr, "max") if pooling == "max" else _pool_rows(tile_sum.double() * rel, tr, "sum")
            out[local // tr : local // tr + pooled.shape[0]] = pooled
    pooled = out.cpu().numpy()
    if pooling == "mean":
        pooled = pooled / np.outer(_cells(len(rows), tr), _cells(len(cols), tc))
    return pooled.astype(np.float32), tr, tc


def rows_mixed(q: np.ndarray | torch.Tensor, k: np.ndarray | torch.Tensor, lse: np.ndarray | torch.Tensor,
               weights: np.ndarray, block_rows: int = BLOCK_ROWS, window: int | None = None,
               softcap: float | None = None) -> np.ndarray:  # fmt: skip
    """Σ_r weights[r] · P[r, :] over the first len(weights) rows, (len(weights),) float64, as
    ``analysis.blockwise.rows_mixed``."""
    _check_window(window, True)
    n = len(weights)
    q = _scaled(q[:n], torch.float32)
    k = _tensor(k[:n], torch.float32, q.device)
    lse = _tensor(lse[:n], torch.float32, q.device)
    w = _tensor(np.asarray(weights, dtype=np.float32), torch.float32, q.device)
    mixed = torch.zeros(n, dtype=torch.float64, device=q.device)
    with torch.inference_mode():
        for r0 in range(0, n, block_rows):
            rows = range(r0, min(n, r0 + block_rows))
            if not bool(w[rows.start : rows.stop].any()):
                continue
            cols = range(_first_key(rows, range(n), window), rows.stop)
            p = torch.exp(_logits(q, k, rows, cols, True, window, softcap) - lse[rows.start : rows.stop, None])
            mixed[cols.start : cols.stop] += (w[rows.start : rows.stop] @ p).double()
    return mixed.cpu().numpy()


def cells(q: np.ndarray | torch.Tensor, k: np.ndarray | torch.Tensor, lse: np.ndarray | torch.Tensor,
          rows: np.ndarray, keys: np.ndarray, window: int | None = None, chunk: int = 1 << 20,
          softcap: float | None = None) -> np.ndarray:  # fmt: skip
    """P[rows[i], keys[i]] for each i (float64), as ``analysis.blockwise.cells``."""
    q = _tensor(q, torch.float64)
    k = _tensor(k, torch.float64, q.device)
    lse = _tensor(lse, torch.float64, q.device)
    rows_t = torch.as_tensor(np.asarray(rows, dtype=np.int64), device=q.device)
    keys_t = torch.as_tensor(np.asarray(keys, dtype=np.int64), device=q.device)
    out = torch.zeros(len(rows_t), dtype=torch.float64, device=q.device)
    scale = 1.0 / math.sqrt(q.shape[-1])
    with torch.inference_mode():
        for start in range(0, len(rows_t), chunk):
            r, c = rows_t[start : start + chunk], keys_t[start : start + chunk]
            out[start : start + len(r)] = torch.exp(_softcapped((q[r] * k[c]).sum(-1) * scale, softcap) - lse[r])
        hidden = keys_t > rows_t
        if window is not None:
            hidden |= rows_t - keys_t >= window
        out.masked_fill_(hidden, 0.0)
    return out.cpu().numpy()
