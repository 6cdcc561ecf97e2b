"""A sentence pair with its alignment, the held-out rule and the source length buckets."""

from __future__ import annotations

import zlib
from dataclasses import dataclass

MIN_LENGTH = 3  # source tokens, "." included
MAX_LENGTH = 25
LENGTH_BUCKETS: tuple[tuple[int, int], ...] = ((3, 5), (6, 10), (11, 15), (16, 20), (21, 25))
HELD_OUT_MODULUS = 10

Combo = tuple[str, str, str]  # ("adj", "european", "area") or ("verb", "sign", "treaty")


@dataclass(frozen=True)
class Pair:
    """One sentence pair.  ``alignment[j]`` is the source index aligned to ``target[j]``."""

    source: tuple[str, ...]
    target: tuple[str, ...]
    alignment: tuple[int, ...]
    # content[j] is False when target[j] has no source counterpart (see the alignment rule).
    content: tuple[bool, ...] = ()
    # The (adjective, noun) and (verb, noun) combinations the sentence uses (held-out rule).
    combos: tuple[Combo, ...] = ()


def is_held_out(combo: Combo) -> bool:
    """True for the ~10 % of combinations that never appear in train/dev (see the package doc)."""
    return zlib.crc32("|".join(combo).encode("utf-8")) % HELD_OUT_MODULUS == 0


def length_bucket(n: int) -> str:
    """Name of the length bucket ("3-5", "6-10", ...) of a source length (tokens incl. ".")."""
    for lo, hi in LENGTH_BUCKETS:
        if lo <= n <= hi:
            return f"{lo}-{hi}"
    raise ValueError(f"length {n} outside {MIN_LENGTH}..{MAX_LENGTH}")
