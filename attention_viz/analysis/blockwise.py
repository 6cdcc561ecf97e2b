"""Attention patterns of long inputs without ever holding a (T, T) matrix: flash-attention style.

A head's pattern is P[r, c] = exp(s[r, c] − lse[r]) with s = q_r · k_c / √d_k (−∞ for the future)
and lse[r] = log Σ_c exp(s[r, c]) its row's softmax normalizer. So from the layer's queries and keys
(after rotation) the pattern can be rebuilt block by block, exactly, given lse:

* :func:`overview` makes one pass over the causal half of the logits, a block of rows at a time,
  and returns the normalizers *and* the pattern pooled to screen-sized tiles (max and mean), from
  per-tile maxima and sums of exp kept per row, so the second pass of flash attention is needed
  only where the user zooms in;
* :func:`pattern_block` gives the exact probabilities of any rectangle, using those normalizers;
* :func:`pooled_region` pools a zoomed rectangle to screen resolution the same way;
* :func:`quantize` turns pooled tiles into uint8 plus one scale for the browser.

Memory: a block of ``block_rows`` × ``chunk`` logits at a time (default 256 × 4096, 8 MB).
Pure numpy, in float64 throughout: blocks then equal the full softmax to well under 1e-6, which
float32 logits (one ulp is 2e-6 at a logit of 16) would not guarantee.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

POOLINGS = ("max", "mean")


@dataclass(frozen=True)
class QueriesKeys:
    """Each layer's rotated queries and keys of one long input, float32 numpy (what
    :func:`attention_viz.longcontext.queries_and_keys` keeps instead of the patterns)."""

    q: list[np.ndarray]  # per layer (h, T, d_k)
    k: list[np.ndarray]  # per layer (h_kv, T, d_k)
    hidden: np.ndarray  # (T, d_model) the decoder's final hidden states

    def head(self, layer: int, head: int) -> tuple[np.ndarray, np.ndarray]:
        """(q, k) of one query head, k being the K/V head its group reads."""
        q, k = self.q[layer], self.k[layer]
        return q[head], k[head // (q.shape[0] // k.shape[0])]


@dataclass(frozen=True)
class Overview:
    """One head's pattern pooled to (row tiles, column tiles), plus its row normalizers."""

    lse: np.ndarray  # (T,) float64 log Σ_c exp(s[r, c]) over the keys row r may see
    max: np.ndarray  # (row tiles, col tiles) float32: the largest probability in each tile
    mean: np.ndarray  # (row tiles, col tiles) float32: the mean probability of each tile's cells
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


def _logits(q: np.ndarray, k: np.ndarray, rows: range, cols: range, causal: bool) -> np.ndarray:
    """(len(rows), len(cols)) scaled logits, −inf where a key lies in the query's future."""
    s = (q[rows.start : rows.stop] * (1.0 / math.sqrt(q.shape[-1]))) @ k[cols.start : cols.stop].T
    if causal and cols.stop - 1 > rows.start:
        # only keys after rows.start can be in a row's future: mask that part of the block alone
        first = max(rows.start, cols.start)
        part = s[:, first - cols.start :]
        future = np.arange(first, cols.stop)[None, :] > np.arange(rows.start, rows.stop)[:, None]
        np.putmask(part, future, -np.inf)
    return s


def overview(
    q: np.ndarray, k: np.ndarray, tiles: int = 512, causal: bool = True, block_rows: int = 256, chunk: int = 4096
) -> Overview:
    """One pass: normalizers and the max-/mean-pooled pattern of one head.

    q, k (T, d_k) (for grouped-query attention, k is the K/V head the query head reads). The square
    pattern is cut into tiles of ⌈T / tiles⌉ tokens each way.
    """
    q, k = np.asarray(q, dtype=np.float64), np.asarray(k, dtype=np.float64)
    n = q.shape[0]
    t = tile_size(n, tiles)
    n_tiles = math.ceil(n / t)
    chunk = max(t, chunk // t * t)  # chunks hold whole tiles
    block_rows = max(t, block_rows // t * t)  # row blocks hold whole tiles too
    lse = np.empty(n, dtype=np.float64)
    pooled_max = np.zeros((n_tiles, n_tiles), dtype=np.float32)
    pooled_sum = np.zeros((n_tiles, n_tiles), dtype=np.float64)
    for r0 in range(0, n, block_rows):
        rows = range(r0, min(n, r0 + block_rows))
        last_col = rows.stop if causal else n  # keys after the block's last row are never seen
        tile_max = np.full((len(rows), n_tiles), -np.inf)  # per row, per column tile
        tile_sum = np.zeros((len(rows), n_tiles), dtype=np.float64)  # Σ exp(s − tile_max)
        for c0 in range(0, last_col, chunk):
            cols = range(c0, min(last_col, c0 + chunk))
            s = _logits(q, k, rows, cols, causal)
            width = math.ceil(len(cols) / t) * t
            if width != len(cols):
                s = np.pad(s, ((0, 0), (0, width - len(cols))), constant_values=-np.inf)
            s = s.reshape(len(rows), width // t, t)
            first = c0 // t
            block_max = s.max(axis=2)  # (rows, tiles in chunk)
            safe = np.where(np.isfinite(block_max), block_max, 0.0)
            tile_max[:, first : first + s.shape[1]] = block_max
            tile_sum[:, first : first + s.shape[1]] = np.exp(s - safe[:, :, None]).sum(axis=2)
        finite = np.isfinite(tile_max)
        row_max = np.where(finite, tile_max, -np.inf).max(axis=1)
        shifted = np.where(finite, tile_max - row_max[:, None], -np.inf)
        total = (tile_sum * np.exp(shifted)).sum(axis=1)
        lse[rows.start : rows.stop] = row_max + np.log(total)
        # the tile's probabilities for each row: max = exp(tile_max − lse), sum = tile_sum · exp(tile_max − lse)
        rel = np.exp(np.where(finite, tile_max - lse[rows.start : rows.stop, None], -np.inf))
        # the block's rows are whole row tiles (the last maybe partial): pool them by reshaping
        pad = math.ceil(len(rows) / t) * t - len(rows)
        rel_tiles = np.pad(rel, ((0, pad), (0, 0))).reshape(-1, t, n_tiles)
        sums = np.pad(tile_sum * rel, ((0, pad), (0, 0))).reshape(-1, t, n_tiles)
        first_tile = rows.start // t
        pooled_max[first_tile : first_tile + rel_tiles.shape[0]] = rel_tiles.max(axis=1)
        pooled_sum[first_tile : first_tile + sums.shape[0]] = sums.sum(axis=1)
    cells_per_row_tile = np.minimum(t, n - np.arange(n_tiles) * t)[:, None]
    cells_per_col_tile = np.minimum(t, n - np.arange(n_tiles) * t)[None, :]
    mean = (pooled_sum / (cells_per_row_tile * cells_per_col_tile)).astype(np.float32)
    return Overview(lse, pooled_max, mean, t, t)


def pattern_block(
    q: np.ndarray, k: np.ndarray, lse: np.ndarray, rows: range, cols: range, causal: bool = True
) -> np.ndarray:
    """The exact probabilities P[rows, cols] (float32), from the normalizers of :func:`overview`."""
    s = _logits(np.asarray(q, dtype=np.float64), np.asarray(k, dtype=np.float64), rows, cols, causal)
    return np.exp(s - lse[rows.start : rows.stop, None]).astype(np.float32)


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
) -> tuple[np.ndarray, int, int]:
    """A zoomed rectangle pooled to at most ``tiles`` × ``tiles``: (pooled, tile_rows, tile_cols).

    A region no larger than ``tiles`` each way comes back cell for cell (tiles of 1: exact values).
    """
    if pooling not in POOLINGS:
        raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
    tr, tc = tile_size(len(rows), tiles), tile_size(len(cols), tiles)
    n_rt, n_ct = math.ceil(len(rows) / tr), math.ceil(len(cols) / tc)
    out = np.zeros((n_rt, n_ct), dtype=np.float32)
    block_rows = max(tr, block_rows // tr * tr)
    for r0 in range(rows.start, rows.stop, block_rows):
        block = range(r0, min(rows.stop, r0 + block_rows))
        p = pattern_block(q, k, lse, block, cols, causal)
        p = np.pad(p, ((0, math.ceil(len(block) / tr) * tr - len(block)), (0, n_ct * tc - len(cols))))
        p = p.reshape(p.shape[0] // tr, tr, n_ct, tc)
        first = (r0 - rows.start) // tr
        if pooling == "max":
            out[first : first + p.shape[0]] = p.max(axis=(1, 3))
        else:
            out[first : first + p.shape[0]] = p.sum(axis=(1, 3))
    if pooling == "mean":
        row_cells = np.minimum(tr, len(rows) - np.arange(n_rt) * tr)[:, None]
        col_cells = np.minimum(tc, len(cols) - np.arange(n_ct) * tc)[None, :]
        out = (out / (row_cells * col_cells)).astype(np.float32)
    return out, tr, tc


def quantize(pooled: np.ndarray, pooling: str) -> Quantized:
    """uint8 codes with one scale (the largest value): 1/255 of the scale is the largest error."""
    pooled = np.asarray(pooled, dtype=np.float32)
    scale = float(pooled.max()) if pooled.size and pooled.max() > 0 else 1.0
    codes = np.rint(pooled / scale * 255.0).astype(np.uint8)
    return Quantized(codes, scale, pooling)
