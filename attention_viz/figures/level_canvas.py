"""One head's uint8 levels (a :class:`LongHeatmap` that is not exact cells) as the bytes our own
heatmap element draws (ui/level_canvas.js), instead of a Plotly figure.

Why an element of our own: at 512 tokens the browser spent 0.16–0.2 s after a Plotly heatmap's
message arrived (Streamlit re-parsing the figure's JSON for its theme, plotly.js laying it out); a
canvas takes the levels as they are and draws them in a few milliseconds.

The bytes: a little-endian uint32 ``n``, ``n`` bytes of UTF-8 JSON (what to write around the cells:
title, ticks, hover, colour bar), the 256 colours as RGBA (1,024 bytes), then the levels row by row.
Every text in the JSON is plain text: the element writes it with ``textContent``, never as HTML.
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
from collections.abc import Sequence
from functools import cache

import numpy as np
import plotly.colors

from ..analysis.long_input import LongHeatmap
from .axes import shorten, ticked, tick_size
from .long_heatmap import POOLING_WORDS, level_ticks, level_words

PALETTE = "Blues"  # the same colours as every other heatmap of the app
MAX_POSITION_TICKS = 8  # numbered ticks along an axis of tiles


@cache
def palette(blank_zero: bool) -> bytes:
    """256 RGBA colours, level 0 first; with ``blank_zero`` level 0 is transparent (under the threshold)."""
    scale = plotly.colors.get_colorscale(PALETTE)
    colours = plotly.colors.sample_colorscale(scale, [level / 255 for level in range(256)])
    rgba = bytearray()
    for level, colour in enumerate(colours):
        red, green, blue = (round(float(c)) for c in plotly.colors.unlabel_rgb(colour))
        rgba += bytes((red, green, blue, 0 if blank_zero and level == 0 else 255))
    return bytes(rgba)


def position_ticks(span: range, tile: int) -> list[tuple[float, str]]:
    """Round positions along an axis of tiles: (where, in tiles from the axis's start; the position)."""
    step = 10 ** math.floor(math.log10(max(len(span) / MAX_POSITION_TICKS, 1)))
    step *= next(m for m in (1, 2, 5, 10) if len(span) / (step * m) <= MAX_POSITION_TICKS)
    first = -(-span.start // step) * step
    return [((p - span.start) / tile, f"{p:,}") for p in range(first, span.stop, step)]


def token_ticks(labels: Sequence[str]) -> list[tuple[float, str]]:
    """Every k-th token of the region drawn (at most 64 ticks, as the Plotly heatmaps), each at its
    cell's centre."""
    return [(i + 0.5, shorten(labels[i])) for i in ticked(len(labels))]


def cell_names(labels: Sequence[str], start: int) -> list[str]:
    """What hover names each position: ``"3: the"`` (repeated tokens told apart)."""
    return [f"{i}: {shorten(label)}" for i, label in enumerate(labels, start)]


def level_canvas_payload(
    heatmap: LongHeatmap, labels: Sequence[str], title: str, key_labels: Sequence[str] | None = None,
    quantity: str = "weight", *, subtitle: str = "", file_name: str = "attention-viz", image_format: str = "png",
    zoomable: bool = False,
) -> bytes:
    """``labels``: every query's label (the whole input), ``key_labels`` every key's (default: the
    same). ``subtitle``, ``file_name`` and ``image_format`` are what the camera saves; ``zoomable``:
    a dragged box asks the page for that region (ui/level_canvas.py)."""
    if heatmap.codes is None:
        raise ValueError("exact cells are drawn as a Plotly heatmap (figures/long_heatmap.py)")
    key_labels = labels if key_labels is None else key_labels
    rows, cols, tr, tc = heatmap.rows, heatmap.cols, heatmap.tile_rows, heatmap.tile_cols
    codes = np.ascontiguousarray(heatmap.codes, dtype=np.uint8)
    tiled = tr * tc > 1
    what = f"{POOLING_WORDS[heatmap.pooling]} {quantity}" if tiled else quantity
    query_shown, key_shown = labels[rows.start : rows.stop], key_labels[cols.start : cols.stop]
    bar_levels, bar_texts = level_ticks(heatmap)
    header = {
        "title": title, "subtitle": subtitle, "file": file_name, "format": image_format, "zoomable": zoomable,
        "shape": list(codes.shape), "n_queries": len(labels), "n_keys": len(key_labels),
        "rows": [rows.start, rows.stop, tr], "cols": [cols.start, cols.stop, tc],
        # tiles: positions along the axes; one token a cell: the tokens, named on hover too
        "x_title": f"key position (tiles of {tc})" if tiled else "key (attended to)",
        "y_title": f"query position (tiles of {tr})" if tiled else "query (attending)",
        "x_ticks": position_ticks(cols, tc) if tiled else token_ticks(key_shown),
        "y_ticks": position_ticks(rows, tr) if tiled else token_ticks(query_shown),
        "tick_size": 12 if tiled else tick_size(max(len(query_shown), len(key_shown))),
        "query_names": None if tiled else cell_names(query_shown, rows.start),
        "key_names": None if tiled else cell_names(key_shown, cols.start),
        "bar_title": what,
        "bar_ticks": [[float(level), text] for level, text in zip(bar_levels, bar_texts)],
        "value": f"{what}: {level_words(heatmap, '{z}')}",
    }
    colours = palette(heatmap.threshold > 0 and heatmap.colours != "log")
    body = colours + codes.tobytes()
    header["id"] = hashlib.blake2b(json.dumps(header).encode() + body, digest_size=8).hexdigest()
    text = json.dumps(header, ensure_ascii=False).encode()
    return struct.pack("<I", len(text)) + text + body


def read_payload(payload: bytes) -> tuple[dict, np.ndarray, np.ndarray]:
    """The header, the palette (256 × 4) and the levels of :func:`level_canvas_payload` (for tests
    and the benchmark: what the element reads)."""
    (n,) = struct.unpack_from("<I", payload)
    header = json.loads(payload[4 : 4 + n].decode())
    colours = np.frombuffer(payload, np.uint8, 1024, 4 + n).reshape(256, 4)
    codes = np.frombuffer(payload, np.uint8, offset=4 + n + 1024).reshape(header["shape"])
    return header, colours, codes
