"""What switching positions off does to a sentence: two copies of one token get identical rows."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Twins:
    first: int  # positions of two ordinary tokens with the same id
    second: int
    token_id: int
    gap_without: float  # the largest |Δ| between their rows without positions (0 up to rounding)
    gap_with: float  # ... and with positions


def same_token_rows(ids: Sequence[int], special: Sequence[bool], with_positions: np.ndarray,
                    without_positions: np.ndarray) -> Twins | None:
    """The first repeated ordinary token and how far apart its two rows are in one head's
    ``[n, n]`` patterns with and without positions; None when no token repeats."""
    seen: dict[int, int] = {}
    for j, token in enumerate(ids):
        if special[j]:
            continue
        if token in seen:
            i = seen[token]
            return Twins(i, j, int(token),
                         float(np.abs(without_positions[i] - without_positions[j]).max()),
                         float(np.abs(with_positions[i] - with_positions[j]).max()))
        seen[token] = j
    return None
