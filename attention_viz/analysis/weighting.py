"""The "weighting" a pattern view draws: the attention weights α_ij, or the value-weighted norms
‖α_ij f_h(x_j)‖ of Kobayashi et al. (2020), where a large weight on a near-zero vector counts for
little. Both are ``[heads, query, key]`` arrays of a result, under ``pattern`` and ``value_norm``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..names import Group
from ..result import AttentionResult
from .checks import normalize_rows
from .value_norms import value_norm_arrays

WEIGHTINGS = ("weights", "norms")  # as spelled in links (``weighting=norms``)
WEIGHTING_NAMES = {"weights": "attention weights", "norms": "value-weighted norms"}
QUANTITIES = {"weights": "attention weight", "norms": "value-weighted norm"}  # what one cell holds
KINDS = {"weights": "pattern", "norms": "value_norm"}


def value_norms_or_reason(
    result: AttentionResult, output_projection: Callable[[Group, int], np.ndarray | None]
) -> dict[str, np.ndarray] | str:
    """Every pattern's value-weighted norms (named ``...value_norm``), from the captured values and
    the backend's W_O; or, when they cannot be computed, a sentence saying why."""
    try:
        return value_norm_arrays(result, output_projection)
    except ValueError:  # no values captured, W_O unknown, or shapes that do not belong together
        return (f"{result.model} does not give the values and the output projection (W_O) of its heads, "
                "which value-weighted norms are made of: showing attention weights.")


@dataclass(frozen=True)
class Weighted:
    """A result and which of its arrays to draw."""

    result: AttentionResult  # holds the arrays of ``weighting`` beside what the run captured
    weighting: str  # "weights" or "norms": what is drawn (after any fallback)
    note: str = ""  # why value-weighted norms were asked for but weights are drawn

    @property
    def kind(self) -> str:
        return KINDS[self.weighting]

    @property
    def quantity(self) -> str:
        """What a cell holds: "attention weight" or "value-weighted norm" (colour bars, hovers)."""
        return QUANTITIES[self.weighting]

    @property
    def suffix(self) -> str:
        """Added to figure titles when the norms are drawn (weights are what every view drew before)."""
        return " · value-weighted norms" if self.weighting == "norms" else ""

    def stack(self, group: Group) -> np.ndarray:
        """``[layers, heads, query, key]`` of the drawn quantity."""
        return self.result.stack(self.kind, *group)

    def layer(self, group: Group, layer: int) -> np.ndarray:
        return self.result.array(group, layer, self.kind)

    def shares(self, group: Group) -> np.ndarray:
        """What rollout and flow compose: the weights, or each norm row divided by its sum (the share
        of the row's total norm each key has; rollout and flow need rows that sum to 1)."""
        stack = self.stack(group)
        return stack if self.weighting == "weights" else normalize_rows(stack).astype(np.float32)


def weighted(result: AttentionResult, weighting: str, norms: dict[str, np.ndarray] | str | None = None) -> Weighted:
    """``result`` to draw under ``weighting``; ``norms`` are :func:`value_norms_or_reason`'s answer
    (only needed for ``"norms"``; a reason falls back to the weights with that note)."""
    if weighting == "weights":
        return Weighted(result, "weights")
    if not isinstance(norms, dict):
        return Weighted(result, "weights", norms or "value-weighted norms are not available: showing attention weights.")
    return Weighted(AttentionResult(result.model, result.tokens, {**result.arrays, **norms}, result.target_tokens,
                                    result.meta), "norms")
