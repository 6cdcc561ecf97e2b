"""The coreference example: "The animal didn't cross the street because it was too tired / wide."
Where its words are, for the views that open on it (the landing head, the ablation study). Comparing
the two sentences, or any other pair, is :mod:`.pair_shift`."""

from __future__ import annotations

from collections.abc import Sequence

WORDS = ("it", "animal", "street")


def positions(labels: Sequence[str]) -> dict[str, int] | None:
    """Where "it", "animal" and "street" are (case-insensitive); None when a tokenizer split one."""
    lowered = [label.lower() for label in labels]
    if not all(word in lowered for word in WORDS):
        return None
    return {word: lowered.index(word) for word in WORDS}
