"""Attention patterns of long inputs without ever holding a (T, T) matrix: flash-attention style.

A head's pattern is P[r, c] = exp(s[r, c] − lse[r]) with s = q_r · k_c / √d_k (−∞ for the future)
and lse[r] = log Σ_c exp(s[r, c]) its row's softmax normalizer. So from the layer's queries and keys
(after rotation) the pattern can be rebuilt block by block, exactly, given lse:

* :func:`overview` makes one pass over the causal half of the logits, a block of rows at a time,
  and returns the normalizers *and* the pattern pooled to screen-sized tiles (max and mean), from
  per-tile maxima and sums of exp kept per row, so the second pass of flash attention is needed
  only where the user zooms in; given the normalizers (the forward's fused attention returns them
  with its output), the max-pooled tiles need only each tile's largest logit: no exp at all;
* :func:`pooled_region` pools a zoomed rectangle to screen resolution the same way, with those
  normalizers;
* :func:`pattern_block` gives the exact probabilities of a rectangle (the cells the user hovers),
  with normalizers of its own rows (:func:`normalizers`);
* :func:`rows_mixed` sums the pattern's rows weighted by a vector (a token's rollout, layer by layer);
* :func:`cells` gives scattered cells from their rows' normalizers (the head detector's targets);
* :func:`quantize` turns pooled tiles into uint8 plus one scale for the browser.

A sliding window of W positions (Mistral) limits row r to keys [r − W + 1, r]: every function takes
the layer's ``window`` (None: the whole causal past); keys outside the band get −∞ (probability
exactly 0), the normalizers sum over the band alone, and the passes start each block of rows at the
first key its band reaches, so a windowed head costs T × (W + block) logits instead of T²/2.

Two family extras change the logits or the normalizers, and every function takes them too:
``softcap`` c (Gemma 2) soft-caps each logit, s → c · tanh(s / c), after the scaling and before the
mask; ``sink`` (GPT-OSS) is the head's sink logit, which joins every row's normalizer,
lse[r] = log(Σ_c exp(s[r, c]) + exp(sink)), but reads no value, so a row sums to less than 1.
:func:`head_logits` reads both, and the window, of one head of a :class:`QueriesKeys`.

Precision and speed. The pooled passes (overview, zooms) are the heavy part — T²/2 logits per head,
half a billion at 32k tokens — and run in float32: BLAS for the logits, numpy's SIMD exp, column
chunks that stay in the core's cache, the row blocks spread over the cores on threads (numpy releases
the GIL). A float32 logit is off by about an ulp of its size (2e-6 at 16), so pooled tiles and the
overview's normalizers are good to ~1e-5 relative: far below the 1/255 steps they are drawn in.
Exact cells are float64 throughout, their rows' normalizers recomputed by a float64 row pass
(≤ 512 rows × T keys): they equal the full softmax to well under 1e-6.
Memory: a chunk of ``chunk`` × ``block_rows`` logits per thread (default 256 × 256, 256 KB).
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np

if TYPE_CHECKING:
    from threadpoolctl import threadpool_limits

POOLINGS = ("max", "mean")


class QueriesKeys(Protocol):
    """Each layer's rotated queries and keys of one long input, float32 numpy (or tensors on the
    model's device, read by the torch passes of ``core/blockwise_torch.py``), and each head's softmax
    normalizers (what :func:`attention_viz.core.longcontext.queries_and_keys` keeps instead of the
    patterns). Made when a view first asks for them and kept: a layer's q/k need the layers below it
    run, a head's normalizers a pass of the fused kernel over that head alone."""

    n_layers: int
    n_heads: int
    # per layer: the sliding window each query's keys are limited to; None for the whole causal past
    window: list[int | None]
    softcap: list[float | None]  # per layer: c of the logits' soft-capping c · tanh(s / c); None: none
    sinks: list[np.ndarray | None]  # per layer: each query head's sink logit (h,); None: no sinks

    def layer(self, layer: int) -> tuple[np.ndarray, np.ndarray]:
        """q (h, T, d_k) and k (h_kv, T, d_k) of one layer."""
        ...

    def head(self, layer: int, head: int) -> tuple[np.ndarray, np.ndarray]:
        """(q, k) of one query head, k being the K/V head its group reads."""
        ...

    def normalizers(self, layer: int, head: int | None = None) -> np.ndarray:
        """One head's (T,) log Σ exp of each row's logits (its sink's exp added); every head's (h, T)
        when ``head`` is None."""
        ...


@dataclass(frozen=True)
class HeadLogits:
    """What the passes take beside q and k to read one head's logits and normalizers as its model does."""

    window: int | None = None
    softcap: float | None = None
    sink: float | None = None

    @property
    def options(self) -> dict[str, int | float | None]:
        """Keywords of the passes that make their rows' normalizers."""
        return dict(window=self.window, softcap=self.softcap, sink=self.sink)

    @property
    def given_lse(self) -> dict[str, int | float | None]:
        """Keywords of the passes given the normalizers (:func:`rows_mixed`, :func:`cells`): the sink is in them."""
        return dict(window=self.window, softcap=self.softcap)


def head_logits(kept: QueriesKeys, layer: int, head: int) -> HeadLogits:
    """One head's window, soft-cap and sink logit, from ``kept``."""
    sinks = kept.sinks[layer]
    return HeadLogits(kept.window[layer], kept.softcap[layer], None if sinks is None else float(sinks[head]))


@dataclass(frozen=True)
class Overview:
    """One head's pattern pooled to (row tiles, column tiles), plus its row normalizers."""

    lse: np.ndarray  # (T,) float64 log Σ_c exp(s[r, c]) over the keys row r may see
    max: np.ndarray  # (row tiles, col tiles) float32: the largest probability in each tile
    mean: np.ndarray | None  # (row tiles, col tiles) float32: the mean probability of each tile's cells
    # (None from a pass given the normalizers, which takes the maxima alone)
    tile_rows: int  # tokens per tile, vertically
    tile_cols: int  # tokens per tile, horizontally


@dataclass(frozen=True)
class Quantized:
    """Pooled tiles as uint8: value ≈ code / 255 · scale (scale = the largest tile)."""

    codes: np.ndarray  # uint8
    scale: float
    pooling: str

    def values(self) -> np.ndarray:
        return self.codes.astype(np.float32) * np.float32(self.scale / 255.0)


def tile_size(length: int, tiles: int) -> int:
    """Tokens per tile so that ``length`` tokens fit in at most ``tiles`` tiles."""
    return max(1, math.ceil(length / max(1, tiles)))


class _OneBlasThread:
    """numpy's BLAS kept to one thread while any pass runs (shared by concurrent passes): the passes
    split their rows over the cores themselves, and OpenBLAS's own threads, woken for every small
    product, only spin against them — measured here at 32k tokens: 7× the CPU time of one thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users = 0
        self._limits: threadpool_limits | None = None

    def __enter__(self) -> None:
        # imported here: threadpoolctl sets an environment variable when imported, and importing
        # the package must not (tests/test_layering.py)
        from threadpoolctl import threadpool_limits  # noqa: F811

        with self._lock:
            if self._users == 0:
                self._limits = threadpool_limits(limits=1, user_api="blas")
            self._users += 1

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._users -= 1
            if self._users == 0 and self._limits is not None:
                self._limits.restore_original_limits()


_ONE_BLAS_THREAD = _OneBlasThread()


def _workers(workers: int | None) -> int:
    """The threads of a pass: as asked, else the cores this process may use (at most 4)."""
    if workers:
        return workers
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1  # not on macOS
    return min(4, cores)


def _by_blocks(work: Callable[[range], None], n: int, block_rows: int, workers: int | None) -> None:
    """``work`` on every block of ``block_rows`` rows of ``n``, each writing its own rows of the
    outputs, spread over threads; the causal pattern's longest blocks (the last) first."""
    blocks = [range(r0, min(n, r0 + block_rows)) for r0 in range(0, n, block_rows)][::-1]
    with _ONE_BLAS_THREAD:
        if _workers(workers) == 1 or len(blocks) == 1:
            for block in blocks:
                work(block)
            return
        with ThreadPoolExecutor(_workers(workers)) as pool:
            list(pool.map(work, blocks))  # re-raises a block's error here


def _scaled(q: np.ndarray, dtype: type) -> np.ndarray:
    return np.asarray(q, dtype=dtype) * dtype(1.0 / math.sqrt(q.shape[-1]))


def _softcapped(s: np.ndarray, softcap: float | None) -> np.ndarray:
    """c · tanh(s / c), in place (Gemma 2's soft-capped logits); ``s`` as it is without a cap."""
    if softcap is not None:
        s /= softcap
        np.tanh(s, out=s)
        s *= softcap
    return s


def _with_sink(lse: np.ndarray, sink: float | None) -> np.ndarray:
    """The normalizers with the head's sink logit joined: log(exp(lse) + exp(sink))."""
    return lse if sink is None else np.logaddexp(lse, sink)


def _mask_outside(s: np.ndarray, rows: range, cols: range, window: int | None = None) -> None:
    """−inf (in place) where a key lies in the query's future (only keys after rows.start can) or,
    given a ``window``, W or more positions back (only keys before rows.stop − W can).
    ``s`` is (rows, cols), or a transposed view of a (cols, rows) array."""
    if cols.stop - 1 > rows.start:
        first = max(rows.start, cols.start)
        future = np.arange(first, cols.stop)[None, :] > np.arange(rows.start, rows.stop)[:, None]
        np.copyto(s[:, first - cols.start :], -np.inf, where=future)
    if window is not None and cols.start < rows.stop - window:
        end = min(cols.stop, rows.stop - window)
        gone = np.arange(cols.start, end)[None, :] <= np.arange(rows.start, rows.stop)[:, None] - window
        np.copyto(s[:, : end - cols.start], -np.inf, where=gone)


def _first_key(rows: range, cols: range, window: int | None) -> int:
    """The first key of ``cols`` any row of ``rows`` may see."""
    return cols.start if window is None else max(cols.start, rows.start - window + 1)


def _check_window(window: int | None, causal: bool) -> None:
    if window is not None and (window < 1 or not causal):
        raise ValueError(f"a sliding window is causal and at least one position, got {window} (causal={causal})")


def _tiles(q: np.ndarray, k: np.ndarray, rows: range, cols: range, tile: int, causal: bool, chunk: int,
           sums: bool = True, window: int | None = None,
           softcap: float | None = None) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """For each row of ``rows`` and each tile of ``tile`` keys of ``cols``: the largest logit and
    Σ exp(s − that largest), float32 (len(rows), tiles); −inf and 0 for tiles wholly in the future
    or wholly before the ``window`` (never computed: the chunks start at the band's first tile).
    q is scaled by 1/√d_k already; ``chunk`` (whole tiles) keys at a time, to stay in cache.
    ``sums=False``: the maxima alone (sums left 0) — max pooling with known normalizers needs no exp,
    and a ``softcap`` only on the maxima (c · tanh(s / c) rises with s: the largest logit stays largest).

    The logits are laid out keys × rows: a tile's keys are then whole contiguous rows of the block,
    and its max, shift and sum run over long contiguous runs (about 3× faster than over tile-long ones).
    """
    n_tiles = math.ceil(len(cols) / tile)
    tile_max = np.full((len(rows), n_tiles), -np.inf, dtype=np.float32)
    tile_sum = np.zeros((len(rows), n_tiles), dtype=np.float32)
    last = min(cols.stop, rows.stop) if causal else cols.stop  # keys after the block's last row: never seen
    ones = np.ones(tile, dtype=np.float32)
    queries = q[rows.start : rows.stop].T  # (d_k, rows)
    start = cols.start + (_first_key(rows, cols, window) - cols.start) // tile * tile  # chunks hold whole tiles
    for c0 in range(start, last, chunk):
        part = range(c0, min(last, c0 + chunk))
        s = _softcapped(k[part.start : part.stop] @ queries, softcap if sums else None)  # (keys, rows) float32
        if causal:
            _mask_outside(s.T, rows, part, window)
        width = math.ceil(len(part) / tile) * tile
        if width != len(part):
            s = np.pad(s, ((0, width - len(part)), (0, 0)), constant_values=-np.inf)
        s = s.reshape(width // tile, tile, len(rows))
        block_max = s.max(axis=1)  # (tiles in chunk, rows)
        first = (c0 - cols.start) // tile
        tile_max[:, first : first + block_max.shape[0]] = block_max.T
        if not sums:
            continue
        s -= np.where(np.isfinite(block_max), block_max, 0.0)[:, None, :]
        np.exp(s, out=s)
        tile_sum[:, first : first + block_max.shape[0]] = (ones @ s).T  # BLAS: the sum over each tile
    if not sums and softcap is not None:
        seen = np.isfinite(tile_max)
        tile_max[seen] = _softcapped(tile_max[seen], softcap)
    return tile_max, tile_sum


def _pool_rows(values: np.ndarray, tile: int, how: str) -> np.ndarray:
    """(rows, n) → (⌈rows / tile⌉, n): the max or the sum over each tile of rows."""
    pad = math.ceil(values.shape[0] / tile) * tile - values.shape[0]
    tiles = np.pad(values, ((0, pad), (0, 0))).reshape(-1, tile, values.shape[1])
    return tiles.max(axis=1) if how == "max" else tiles.sum(axis=1)


def _cells(length: int, tile: int) -> np.ndarray:
    """Tokens in each tile (the last maybe fewer)."""
    return np.minimum(tile, length - np.arange(math.ceil(length / tile)) * tile)


def overview(
    q: np.ndarray, k: np.ndarray, tiles: int = 512, causal: bool = True, block_rows: int = 256, chunk: int = 256,
    workers: int | None = None, lse: np.ndarray | None = None, window: int | None = None,
    softcap: float | None = None, sink: float | None = None,
) -> Overview:  # fmt: skip
    """One pass: normalizers and the max-/mean-pooled pattern of one head (float32, ~1e-5 relative).

    q, k (T, d_k) (for grouped-query attention, k is the K/V head the query head reads). The square
    pattern is cut into tiles of ⌈T / tiles⌉ tokens each way. ``workers`` threads (default: the
    cores this process may use, at most 4). Given ``lse`` (T,) (the normalizers the forward's fused
    attention returned), the pass takes each tile's largest logit alone — no exp, about a third of
    the work — and gives the max-pooled tiles only (``mean`` None). ``window``: the layer's sliding
    window (the normalizers are then over each row's band). ``softcap``, ``sink``: the head's extras
    (the module's docstring); a given ``lse`` has the sink in it already.
    """
    _check_window(window, causal)
    q, k = _scaled(q, np.float32), np.asarray(k, dtype=np.float32)
    n = q.shape[0]
    t = tile_size(n, tiles)
    n_tiles = math.ceil(n / t)
    chunk = max(t, chunk // t * t)  # chunks hold whole tiles
    block_rows = max(t, block_rows // t * t)  # row blocks hold whole tiles too
    sums = lse is None
    lse = np.empty(n, dtype=np.float64) if sums else np.asarray(lse, dtype=np.float64)
    pooled_max = np.zeros((n_tiles, n_tiles), dtype=np.float32)
    pooled_sum = np.zeros((n_tiles, n_tiles), dtype=np.float64)

    def block(rows: range) -> None:
        tile_max, tile_sum = _tiles(q, k, rows, range(n), t, causal, chunk, sums, window, softcap)
        # only the tile columns the rows' band reaches: the rest stay 0 (half the columns of a causal
        # block on average, ~(W + block) / t of them with a window)
        seen = range(_first_key(rows, range(n), window) // t, math.ceil(min(n, rows.stop) / t) if causal else n_tiles)
        tile_max, tile_sum = tile_max[:, seen.start : seen.stop].astype(np.float64), tile_sum[:, seen.start : seen.stop]
        finite = np.isfinite(tile_max)
        if sums:
            row_max = tile_max.max(axis=1)
            total = (tile_sum * np.exp(np.where(finite, tile_max - row_max[:, None], -np.inf))).sum(axis=1)
            lse[rows.start : rows.stop] = _with_sink(row_max + np.log(total), sink)
        # each tile's probabilities for each row: max = exp(tile_max − lse), sum = tile_sum · exp(tile_max − lse)
        rel = np.exp(np.where(finite, tile_max - lse[rows.start : rows.stop, None], -np.inf))
        first = rows.start // t  # the block's rows are whole row tiles (the last maybe partial)
        pooled = _pool_rows(rel, t, "max")
        pooled_max[first : first + pooled.shape[0], seen.start : seen.stop] = pooled
        if sums:
            pooled_sum[first : first + pooled.shape[0], seen.start : seen.stop] = _pool_rows(tile_sum * rel, t, "sum")

    _by_blocks(block, n, block_rows, workers)
    mean = (pooled_sum / np.outer(_cells(n, t), _cells(n, t))).astype(np.float32) if sums else None
    return Overview(lse, pooled_max, mean, t, t)


def _logits64(q: np.ndarray, k: np.ndarray, rows: range, cols: range, causal: bool,
              window: int | None = None, softcap: float | None = None) -> np.ndarray:  # fmt: skip
    """(len(rows), len(cols)) float64 logits, soft-capped given ``softcap``, −inf outside the band;
    q scaled already."""
    s = _softcapped(q[rows.start : rows.stop] @ k[cols.start : cols.stop].T, softcap)
    if causal:
        _mask_outside(s, rows, cols, window)
    return s


def normalizers(q: np.ndarray, k: np.ndarray, rows: range, causal: bool = True, chunk: int = 4096,
                window: int | None = None, softcap: float | None = None,
                sink: float | None = None) -> np.ndarray:  # fmt: skip
    """The exact lse of ``rows`` (float64): a row pass over every key they see (rows × T logits;
    rows × (W + rows) with a ``window``), the ``sink``'s exp in each row's sum."""
    _check_window(window, causal)
    q, k = _scaled(q, np.float64), np.asarray(k, dtype=np.float64)
    last = rows.stop if causal else k.shape[0]
    row_max = np.full(len(rows), -np.inf)
    total = np.zeros(len(rows))
    with _ONE_BLAS_THREAD:
        for c0 in range(_first_key(rows, range(last), window), last, chunk):
            s = _logits64(q, k, rows, range(c0, min(last, c0 + chunk)), causal, window, softcap)
            new_max = np.maximum(row_max, s.max(axis=1))  # −inf for a row whose band starts in a later chunk
            shift = np.where(np.isfinite(new_max), new_max, 0.0)[:, None]
            total = total * np.exp(row_max - shift[:, 0]) + np.exp(s - shift).sum(axis=1)
            row_max = new_max
    return _with_sink(row_max + np.log(total), sink)


def pattern_block(q: np.ndarray, k: np.ndarray, rows: range, cols: range, causal: bool = True,
                  window: int | None = None, softcap: float | None = None,
                  sink: float | None = None) -> np.ndarray:  # fmt: skip
    """The exact probabilities P[rows, cols] (float32 from float64 math), with its rows' own
    normalizers; exactly 0 outside the band of a ``window``."""
    lse = normalizers(q, k, rows, causal, window=window, softcap=softcap, sink=sink)
    with _ONE_BLAS_THREAD:
        s = _logits64(_scaled(q, np.float64), np.asarray(k, dtype=np.float64), rows, cols, causal, window, softcap)
    return np.exp(s - lse[:, None]).astype(np.float32)


def pooled_region(
    q: np.ndarray,
    k: np.ndarray,
    lse: np.ndarray,
    rows: range,
    cols: range,
    tiles: int = 512,
    pooling: str = "max",
    causal: bool = True,
    block_rows: int = 256,
    chunk: int = 256,
    workers: int | None = None,
    window: int | None = None,
    softcap: float | None = None,
    sink: float | None = None,
) -> tuple[np.ndarray, int, int]:
    """A zoomed rectangle pooled to at most ``tiles`` × ``tiles``: (pooled, tile_rows, tile_cols).

    ``lse`` holds the normalizers of every row (the overview's). Pooled like the overview (float32;
    max pooling needs only each tile's largest logit, no exp: about a third of the work of mean);
    a region no larger than ``tiles`` each way comes back cell for cell, exact (:func:`pattern_block`).
    ``window``, ``softcap``, ``sink``: the head's, as ``lse`` was made with (``sink`` only reaches the
    exact cells, whose rows' normalizers are recomputed).
    """
    if pooling not in POOLINGS:
        raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
    _check_window(window, causal)
    tr, tc = tile_size(len(rows), tiles), tile_size(len(cols), tiles)
    if tr == tc == 1:
        return pattern_block(q, k, rows, cols, causal, window, softcap, sink), 1, 1
    q, k = _scaled(q, np.float32), np.asarray(k, dtype=np.float32)
    out = np.zeros((math.ceil(len(rows) / tr), math.ceil(len(cols) / tc)), dtype=np.float32)
    chunk = max(tc, chunk // tc * tc)

    def block(local: range) -> None:  # rows of the region, counted from its first
        part = range(rows.start + local.start, rows.start + local.stop)
        tile_max, tile_sum = _tiles(q, k, part, cols, tc, causal, chunk, pooling == "mean", window, softcap)
        rel = np.exp(np.where(np.isfinite(tile_max), tile_max - lse[part.start : part.stop, None], -np.inf))
        if pooling == "max":
            pooled = _pool_rows(rel, tr, "max")
        else:
            pooled = _pool_rows(tile_sum * rel, tr, "sum")
        out[local.start // tr : local.start // tr + pooled.shape[0]] = pooled

    _by_blocks(block, len(rows), max(tr, block_rows // tr * tr), workers)
    if pooling == "mean":
        out = (out / np.outer(_cells(len(rows), tr), _cells(len(cols), tc))).astype(np.float32)
    return out, tr, tc


def rows_mixed(q: np.ndarray, k: np.ndarray, lse: np.ndarray, weights: np.ndarray, block_rows: int = 256,
               workers: int | None = None, window: int | None = None,
               softcap: float | None = None) -> np.ndarray:  # fmt: skip
    """Σ_r weights[r] · P[r, :] over the first len(weights) rows of a causal head: (len(weights),)
    float64, the pattern's rows mixed by ``weights``, a block of rows at a time (one step of a token's
    attention rollout through a layer). Blocks whose weights are all 0 are skipped; logits and exps in
    float32 as the pooled passes (~1e-5 relative), sums in float64. ``lse``: the rows' normalizers (a
    sink's exp in them already)."""
    _check_window(window, True)
    weights = np.asarray(weights, dtype=np.float64)
    n = len(weights)
    q, k = _scaled(q[:n], np.float32), np.asarray(k[:n], dtype=np.float32)
    lse = np.asarray(lse[:n], dtype=np.float32)
    parts: dict[int, tuple[int, np.ndarray]] = {}

    def block(rows: range) -> None:
        w = weights[rows.start : rows.stop]
        if not w.any():
            return
        cols = range(_first_key(rows, range(n), window), rows.stop)
        s = _softcapped(q[rows.start : rows.stop] @ k[cols.start : cols.stop].T, softcap)
        _mask_outside(s, rows, cols, window)
        np.exp(s - lse[rows.start : rows.stop, None], out=s)
        parts[rows.start] = (cols.start, w.astype(np.float32) @ s)

    _by_blocks(block, n, block_rows, workers)
    mixed = np.zeros(n, dtype=np.float64)
    for first, part in parts.values():
        mixed[first : first + len(part)] += part
    return mixed


def cells(q: np.ndarray, k: np.ndarray, lse: np.ndarray, rows: np.ndarray, keys: np.ndarray,
          window: int | None = None, chunk: int = 65536, softcap: float | None = None) -> np.ndarray:  # fmt: skip
    """P[rows[i], keys[i]] for each i (float64): exp(q_r · k_c / √d_k − lse_r) with the rows' normalizers,
    exactly 0 where the key is in the row's future or outside its ``window`` — scattered cells (the head
    detector's targets) without their rows' other keys. ``chunk`` cells at a time; the logits soft-capped
    given ``softcap`` (a ``sink`` is in ``lse`` already)."""
    rows, keys = np.asarray(rows, dtype=np.int64), np.asarray(keys, dtype=np.int64)
    lse = np.asarray(lse, dtype=np.float64)
    out = np.zeros(len(rows))
    scale = 1.0 / math.sqrt(q.shape[-1])
    for start in range(0, len(rows), chunk):
        r, c = rows[start : start + chunk], keys[start : start + chunk]
        logits = np.einsum("md,md->m", np.asarray(q[r], dtype=np.float64), np.asarray(k[c], dtype=np.float64))
        out[start : start + len(r)] = np.exp(_softcapped(logits * scale, softcap) - lse[r])
    out[(keys > rows) | ((rows - keys >= window) if window is not None else False)] = 0.0
    return out


def quantize(pooled: np.ndarray, pooling: str) -> Quantized:
    """uint8 codes with one scale (the largest value): 1/255 of the scale is the largest error."""
    pooled = np.asarray(pooled, dtype=np.float32)
    scale = float(pooled.max()) if pooled.size and pooled.max() > 0 else 1.0
    codes = np.rint(pooled / scale * 255.0).astype(np.uint8)
    return Quantized(codes, scale, pooling)
