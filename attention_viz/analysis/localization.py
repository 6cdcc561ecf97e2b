"""Does a captioner look at the object it names? The share of one word's attention that falls
inside the object's gold box, against the share a uniform map would put there.

An attention map is a ``(rows, cols)`` grid over the image; region (r, c) covers the pixels
``[r·h, (r+1)·h) × [c·w, (c+1)·w)`` with ``h = height / rows``, ``w = width / cols``, and its
weight is spread evenly over them. The share inside a box is then exact: each region contributes
its weight times the fraction of its pixels inside the box. A uniform map gives every pixel the
same weight, so its share is the box's area over the image's.
"""

from __future__ import annotations

import numpy as np

Box = tuple[int, int, int, int]  # (x0, y0, x1, y1) in pixels, x1/y1 exclusive


def _overlap(start: int, end: int, cells: int, length: int) -> np.ndarray:
    """(cells,) fraction of each cell of a 1-D axis (``length`` pixels) inside [start, end)."""
    edges = np.arange(cells + 1) * (length / cells)
    inside = np.clip(np.minimum(edges[1:], end) - np.maximum(edges[:-1], start), 0.0, None)
    return inside / (length / cells)


def mass_in_box(attention: np.ndarray, box: Box, height: int, width: int) -> float:
    """Share of the ``(rows, cols)`` map ``attention`` (summing to 1) inside ``box``."""
    rows, cols = attention.shape
    x0, y0, x1, y1 = box
    weights = np.outer(_overlap(y0, y1, rows, height), _overlap(x0, x1, cols, width))
    return float((attention * weights).sum())


def uniform_share(box: Box, height: int, width: int) -> float:
    x0, y0, x1, y1 = box
    return (x1 - x0) * (y1 - y0) / (height * width)
