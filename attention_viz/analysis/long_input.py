"""One head of a long input (thousands of tokens) at screen resolution, from the kept queries and
keys: the whole pattern pooled to tiles, or a zoomed rectangle pooled the same way, down to exact
cells. Never a (T, T) matrix: :mod:`attention_viz.analysis.blockwise` computes block by block.

Plain numpy (no torch): the backend fills :class:`LongInput`, the head view asks for
:class:`LongHeatmap`s and draws them. The passes are numpy's unless the backend hands in their twin
on the model's device (:class:`Passes`, from ``core/blockwise_torch.py``), which give the same arrays.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..inputs.tokens import Tokens
from .blockwise import (
    POOLINGS, Overview, QueriesKeys, cells, head_logits, overview, pattern_block, pooled_region, quantize, rows_mixed,
)  # fmt: skip

TILES = 512  # tiles per side: about a screen's width of heatmap
COLOURS = ("log", "linear")
LOG_FLOOR = 1e-6  # below 1/32k, the weight of a row spread evenly over 32k keys


@dataclass(frozen=True)
class Passes:
    """The blockwise passes a long input's heads are read with, each as in
    :mod:`attention_viz.analysis.blockwise` (same arguments, same numpy results)."""

    overview: Callable[..., Overview]
    pattern_block: Callable[..., np.ndarray]
    pooled_region: Callable[..., tuple[np.ndarray, int, int]]
    rows_mixed: Callable[..., np.ndarray]
    cells: Callable[..., np.ndarray]


NUMPY_PASSES = Passes(overview, pattern_block, pooled_region, rows_mixed, cells)


@dataclass(frozen=True)
class LongInput:
    """A long text's tokens and each decoder layer's rotated queries and keys (made as views ask)."""

    model: str
    tokens: Tokens
    kept: QueriesKeys
    dropped: int  # tokens past the model's longest input
    passes: Passes = NUMPY_PASSES  # the kept q/k's own: numpy on the host, torch's on a GPU

    @property
    def length(self) -> int:
        return len(self.tokens)

    @property
    def n_layers(self) -> int:
        return self.kept.n_layers

    @property
    def n_heads(self) -> int:
        return self.kept.n_heads

    def overview(self, layer: int, head: int, tiles: int = TILES, means: bool = True) -> Overview:
        """One pass over the head's causal logits: row normalizers and the pooled pattern. Without
        ``means``, given the head's normalizers from the fused kernel, the max-pooled tiles alone (no
        exp: about a third of the work)."""
        return self.passes.overview(*self.kept.head(layer, head), tiles=tiles,
                                    lse=None if means else self.kept.normalizers(layer, head),
                                    **head_logits(self.kept, layer, head).options)

    def read_every_head(self, means: bool) -> None:
        """Every layer's q/k and, unless ``means`` (the overviews then make their own), every head's
        normalizers: a layer's heads not yet run go through the kernel in one call. The kernel hands
        each core an equal run of rows, and a causal head's later rows cost more: one head alone gives
        one core a quarter of the work (32k tokens: 1.7 s for one head, 2.3 s for two, at 2 threads)."""
        for layer in range(self.n_layers):
            if means:
                self.kept.layer(layer)
            else:
                self.kept.normalizers(layer)


@dataclass(frozen=True)
class LongHeatmap:
    """What the browser gets for one head: pooled tiles as uint8 codes with one scale, or, once a
    tile is a single query–key pair, the exact weights (float32)."""

    rows: range  # query positions covered
    cols: range  # key positions covered
    tile_rows: int  # tokens per tile, vertically (1: exact cells)
    tile_cols: int
    pooling: str  # "max" or "mean": what one tile shows of its cells
    codes: np.ndarray | None  # (row tiles, col tiles) uint8: linear, value ≈ code / 255 · scale;
    # log, log10 value ≈ log10 floor + code / 255 · log10(scale / floor) (0 = the floor or less, 255 = scale)
    scale: float
    exact: np.ndarray | None  # (rows, cols) float32 weights when every tile is one cell
    colours: str = "linear"
    floor: float = LOG_FLOOR  # log colours: the value of level 0 (the head view of a captured pattern: 1e-4)
    threshold: float = 0.0  # linear colours: tiles below it are level 0, drawn blank

    @property
    def is_exact(self) -> bool:
        return self.exact is not None

    @property
    def row_starts(self) -> np.ndarray:
        """The first query position of each tile row."""
        return np.arange(self.rows.start, self.rows.stop, self.tile_rows)

    @property
    def col_starts(self) -> np.ndarray:
        return np.arange(self.cols.start, self.cols.stop, self.tile_cols)

    def values(self) -> np.ndarray:
        """The weights as drawn: exact cells, or the codes dequantized (within scale/510 of the pooled value)."""
        if self.exact is not None:
            return self.exact
        if self.colours == "log":
            bottom, top = np.log10(self.floor), np.log10(self.scale)
            return (10.0 ** (bottom + self.codes / 255.0 * (top - bottom))).astype(np.float32)
        return self.codes.astype(np.float32) * np.float32(self.scale / 255.0)


def log_codes(pooled: np.ndarray, floor: float = LOG_FLOOR, top: float = 1.0) -> np.ndarray:
    """uint8 levels of log10(weight) from ``floor`` (0) to ``top`` (255): small weights stay apart."""
    bottom = np.log10(floor)
    logs = np.log10(np.maximum(np.asarray(pooled, dtype=np.float64), floor))
    return np.rint((logs - bottom) / (np.log10(top) - bottom) * 255.0).clip(0, 255).astype(np.uint8)


def clamp_region(length: int, first: int, last: int) -> range:
    """Positions first … last (inclusive, either order) inside 0 … length−1, at least one."""
    lo, hi = sorted((min(max(first, 0), length - 1), min(max(last, 0), length - 1)))
    return range(lo, hi + 1)


def long_heatmap(
    long: LongInput, layer: int, head: int, whole: Overview, rows: range, cols: range, pooling: str = "max",
    tiles: int = TILES, colours: str = "linear",
) -> LongHeatmap:
    """One head over ``rows`` × ``cols``: the overview's own tiles when the region is the whole
    input, else the region pooled afresh (exact cells once it fits in ``tiles`` each way).

    ``whole`` is ``long.overview(layer, head, tiles)``: its normalizers make every block exact.
    """
    if pooling not in POOLINGS or colours not in COLOURS:
        raise ValueError(f"pooling must be one of {POOLINGS} and colours one of {COLOURS}")
    q, k = long.kept.head(layer, head)
    logits = head_logits(long.kept, layer, head).options  # its window (None: the whole past), soft-cap, sink
    if len(rows) <= tiles and len(cols) <= tiles:
        exact = long.passes.pattern_block(q, k, rows, cols, **logits)
        return LongHeatmap(rows, cols, 1, 1, pooling, None, float(exact.max()), exact, colours)
    everything = range(long.length)
    if rows == everything and cols == everything:
        pooled = whole.max if pooling == "max" else whole.mean
        if pooled is None:
            raise ValueError("mean pooling needs an overview with means (LongInput.needs_means)")
        tile_rows, tile_cols = whole.tile_rows, whole.tile_cols
    else:
        pooled, tile_rows, tile_cols = long.passes.pooled_region(q, k, whole.lse, rows, cols, tiles=tiles,
                                                                 pooling=pooling, **logits)
    if colours == "log":
        return LongHeatmap(rows, cols, tile_rows, tile_cols, pooling, log_codes(pooled), 1.0, None, colours)
    packed = quantize(pooled, pooling)
    return LongHeatmap(rows, cols, tile_rows, tile_cols, pooling, packed.codes, packed.scale, None, colours)


def thumbnails(overviews: Sequence[Sequence[Overview]], size: int, pooling: str = "max") -> np.ndarray:
    """[layers, heads, ≤size, ≤size] float32: each head's overview pooled again for the all-heads grid,
    from its own passes (no new one): the largest of its max tiles, or the mean of its mean tiles."""
    if pooling not in POOLINGS:
        raise ValueError(f"pooling must be one of {POOLINGS}")
    return np.stack([np.stack([_repool(getattr(o, pooling), size, pooling) for o in row]) for row in overviews])


def _repool(tiles: np.ndarray, size: int, pooling: str) -> np.ndarray:
    edges = [np.linspace(0, n, min(n, size) + 1).round().astype(int)[:-1] for n in tiles.shape]
    reduce = np.maximum.reduceat if pooling == "max" else np.add.reduceat
    pooled = reduce(reduce(tiles, edges[0], axis=0), edges[1], axis=1)
    if pooling == "mean":
        counts = np.outer(np.diff([*edges[0], tiles.shape[0]]), np.diff([*edges[1], tiles.shape[1]]))
        pooled = pooled / counts
    return pooled.astype(np.float32)


def query_rows(long: LongInput, query: int) -> np.ndarray:
    """(layers, heads, query + 1) float32: one query token's exact attention weights over the keys it
    may see (0 where a sliding window hides them), in every head of every layer, each computed from
    its head's kept q/k with the row's own normalizer: (query + 1) · d_k work a head, never T².
    Asks for every layer (those not run yet run now). Token focus of a long text reads these."""
    if not 0 <= query < long.length:
        raise IndexError(f"query position {query} out of range for {long.length} tokens")
    rows, cols = range(query, query + 1), range(query + 1)
    return np.stack([
        np.stack([long.passes.pattern_block(*long.kept.head(layer, head), rows, cols,
                                            **head_logits(long.kept, layer, head).options)[0]
                  for head in range(long.n_heads)])
        for layer in range(long.n_layers)
    ]).astype(np.float32)  # fmt: skip


def token_rollout(long: LongInput, query: int) -> np.ndarray:
    """(query + 1,) float64: one token's attention rollout (Abnar & Zuidema 2020) over the whole of a long
    text, the row ``query`` of analysis.rollout's product of the layers' ½ Ā + ½ I (Ā the mean of heads):
    r = e_query, then from the last layer down r ← ½ mean_h(r · P_h) + ½ r, each r · P_h one blockwise
    pass over the rows r reaches (:func:`~.blockwise.rows_mixed`, from the kept normalizers). Rows after
    the query never enter (causal), so the cost is a pass over (query + 1)²/2 logits a head. Where sink
    logits take a share of a head's rows (GPT-OSS), analysis.rollout renormalizes the rows of ½ Ā + ½ I:
    r is divided by each row's sum first, ½ mean_h Σ_c P_h[r, c] + ½, with Σ_c P_h[r, c] = 1 − exp(sink − lse)."""
    if not 0 <= query < long.length:
        raise IndexError(f"query position {query} out of range for {long.length} tokens")
    mixed = np.zeros(query + 1)
    mixed[query] = 1.0
    for layer in reversed(range(long.n_layers)):
        lse = long.kept.normalizers(layer)[:, : query + 1]
        logits = [head_logits(long.kept, layer, head) for head in range(long.n_heads)]
        on_keys = np.array([np.ones(query + 1) if h.sink is None else -np.expm1(h.sink - lse[i])
                            for i, h in enumerate(logits)])  # fmt: skip
        mixed = mixed / (0.5 * on_keys.mean(axis=0) + 0.5)
        heads = [long.passes.rows_mixed(*long.kept.head(layer, head), lse[head], mixed, **logits[head].given_lse)
                 for head in range(long.n_heads)]  # fmt: skip
        mixed = 0.5 * np.mean(heads, axis=0) + 0.5 * mixed
    return mixed


def pooled_keys(values: np.ndarray, run: int) -> tuple[np.ndarray, np.ndarray]:
    """``values`` (..., keys) max-pooled over runs of ``run`` keys: (pooled (..., ⌈keys / run⌉), the first
    key of each run)."""
    starts = np.arange(0, values.shape[-1], run)
    return np.maximum.reduceat(values, starts, axis=-1), starts
