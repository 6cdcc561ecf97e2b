"""A captured pattern too large to send the browser as float32 (the head view at hundreds of tokens),
drawn the way the long head view draws one: uint8 levels with one scale, pooled to at most
``TILES`` tiles a side, and exact float cells once a zoomed region is small enough. The capture
already holds the whole matrix, so here pooling and zooming are slices of it."""

from __future__ import annotations

import numpy as np

from .blockwise import quantize, tile_size
from .long_input import COLOURS, LOG_FLOOR, TILES, LongHeatmap, log_codes

# Cells sent as float32 at most: 256² float32 are ~0.35 MB of base64, a 512² pattern would be 1.4 MB
# (uint8 levels of it: 0.35 MB).
LEVELS_ABOVE = 256 * 256


def needs_levels(shape: tuple[int, ...]) -> bool:
    """Is a (query, key) matrix of this shape sent as levels rather than float32?"""
    return shape[0] * shape[1] > LEVELS_ABOVE


def captured_heatmap(
    matrix: np.ndarray, rows: range, cols: range, colours: str = "linear", threshold: float = 0.0,
    floor: float = LOG_FLOOR, tiles: int = TILES,
) -> LongHeatmap:
    """``matrix[rows, cols]`` as exact float32 cells when it has at most ``LEVELS_ABOVE`` cells,
    else max-pooled to at most ``tiles`` a side and quantized: linear, 255 = the region's largest
    value (tiles below ``threshold`` are level 0, drawn blank); log, ``floor`` … max(1, largest).

    ``matrix`` holds what the colours show (weights, norms, or each row ÷ its largest)."""
    if colours not in COLOURS:
        raise ValueError(f"colours must be one of {COLOURS}")
    region = np.asarray(matrix[rows.start : rows.stop, cols.start : cols.stop], dtype=np.float32)
    top = float(region.max()) if region.size else 0.0
    if region.size <= LEVELS_ABOVE:
        return LongHeatmap(rows, cols, 1, 1, "max", None, top, region, colours, floor, threshold)
    tile_rows, tile_cols = tile_size(len(rows), tiles), tile_size(len(cols), tiles)
    pooled = region if tile_rows == tile_cols == 1 else np.maximum.reduceat(  # tiles of one cell: the cells
        np.maximum.reduceat(region, np.arange(0, len(rows), tile_rows), axis=0), np.arange(0, len(cols), tile_cols),
        axis=1)
    if colours == "log":
        top = max(top, 1.0)  # weights keep their fixed floor … 1 range; norms may pass 1
        return LongHeatmap(rows, cols, tile_rows, tile_cols, "max", log_codes(pooled, floor, top), top, None,
                           colours, floor)
    packed = quantize(pooled, "max")
    codes = np.where(pooled < threshold, np.uint8(0), packed.codes) if threshold > 0 else packed.codes
    return LongHeatmap(rows, cols, tile_rows, tile_cols, "max", codes, packed.scale, None, colours, floor, threshold)
