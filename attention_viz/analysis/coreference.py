"""The coreference preset: "The animal didn't cross the street because it was too tired / wide."
Which heads send "it" to "animal" with *tired*, and what the same heads do with *wide* (where "it"
is the street). The two sentences differ in one word, so their positions line up."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .focus import top_heads

WORDS = ("it", "animal", "street")


@dataclass(frozen=True)
class Coreference:
    rows: list[dict]  # the top heads, largest "tired: it→animal" first
    layer: int  # the best head
    head: int
    it: int  # position of "it"
    tired_row: np.ndarray  # [1, keys]: the best head's row of "it" with "tired"
    wide_row: np.ndarray  # [1, keys]: the same head's row with "wide"


def positions(labels: Sequence[str]) -> dict[str, int] | None:
    """Where "it", "animal" and "street" are (case-insensitive); None when a tokenizer split one."""
    lowered = [label.lower() for label in labels]
    if not all(word in lowered for word in WORDS):
        return None
    return {word: lowered.index(word) for word in WORDS}


def coreference(tired: np.ndarray, wide: np.ndarray, labels: Sequence[str], n: int = 5) -> Coreference | None:
    """``tired``/``wide``: [layers, heads, q, k] stacks of the two sentences (same length);
    None when the words cannot be found among ``labels``."""
    at = positions(labels)
    if at is None or tired.shape != wide.shape:
        return None
    it, animal, street = at["it"], at["animal"], at["street"]
    rows = [
        {
            "layer": layer, "head": head,
            "tired: it→animal": round(weight, 3),
            "tired: it→street": round(float(tired[layer, head, it, street]), 3),
            "wide: it→animal": round(float(wide[layer, head, it, animal]), 3),
            "wide: it→street": round(float(wide[layer, head, it, street]), 3),
        }
        for layer, head, weight in top_heads(tired, it, animal, n=n)
    ]
    best_layer, best_head = rows[0]["layer"], rows[0]["head"]
    return Coreference(rows, best_layer, best_head, it,
                       tired[best_layer, best_head, it][None, :].astype(np.float32),
                       wide[best_layer, best_head, it][None, :].astype(np.float32))
