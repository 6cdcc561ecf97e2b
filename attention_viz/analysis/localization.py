"""Does a captioner name the right objects, and look at the object it names?

Naming: the model's caption against the scene's true description, word by word
(:func:`compare_captions`). Looking: the share of one word's attention that falls inside the
object's gold box, against the share a uniform map would put there.

An attention map is a ``(rows, cols)`` grid over the image; region (r, c) covers the pixels
``[r·h, (r+1)·h) × [c·w, (c+1)·w)`` with ``h = height / rows``, ``w = width / cols``, and its
weight is spread evenly over them. The share inside a box is then exact: each region contributes
its weight times the fraction of its pixels inside the box. A uniform map gives every pixel the
same weight, so its share is the box's area over the image's.
"""

from __future__ import annotations

from dataclasses import dataclass
from difflib import SequenceMatcher

import numpy as np

Box = tuple[int, int, int, int]  # (x0, y0, x1, y1) in pixels, x1/y1 exclusive


@dataclass(frozen=True)
class CaptionComparison:
    """Both captions, each word paired with whether it differs: a true word the model left out or
    replaced, a model word that is not in the truth at that place."""

    truth: tuple[tuple[str, bool], ...]
    model: tuple[tuple[str, bool], ...]

    @property
    def exact(self) -> bool:
        return not any(differs for _, differs in (*self.truth, *self.model))


def compare_captions(truth: tuple[str, ...] | list[str], model: tuple[str, ...] | list[str]) -> CaptionComparison:
    """Align the two word sequences (the longest matching blocks, as ``diff`` does) rather than
    position by position, so one object left out marks that object's words, not every word after it."""
    truth, model = list(truth), list(model)
    wrong_truth, wrong_model = [False] * len(truth), [False] * len(model)
    for tag, i0, i1, j0, j1 in SequenceMatcher(a=truth, b=model, autojunk=False).get_opcodes():
        if tag != "equal":
            wrong_truth[i0:i1] = [True] * (i1 - i0)
            wrong_model[j0:j1] = [True] * (j1 - j0)
    return CaptionComparison(tuple(zip(truth, wrong_truth)), tuple(zip(model, wrong_model)))


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
