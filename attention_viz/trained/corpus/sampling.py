"""Sampling: ``generate`` and the train / dev / test ``splits``, with their length weights."""

from __future__ import annotations

import random
from typing import Iterable, Literal, Sequence

from .construction import random_sentence
from .pair import MAX_LENGTH, MIN_LENGTH, Pair, is_held_out
from .render import to_pair
from .trees import sentence_combos

DEFAULT_SIZES = (40_000, 2_000, 2_000)  # train, dev, test

HeldOut = Literal["any", "exclude", "require"]


def _sample(
    rng: random.Random,
    lengths: Sequence[int],
    held_out: HeldOut,
    unique: bool,
    exclude: Iterable[tuple[str, ...]] = (),
) -> list[Pair]:
    """One pair per requested source length, filtered by the held-out rule."""
    seen = set(exclude)
    pairs: list[Pair] = []
    for length in lengths:
        for _ in range(100_000):
            s = random_sentence(rng, length)
            combos = sentence_combos(s)
            has_held_out = any(is_held_out(c) for c in combos)
            if (held_out == "exclude" and has_held_out) or (
                held_out == "require" and not has_held_out
            ):
                continue
            pair = to_pair(s, combos)
            if unique and pair.source in seen:
                continue
            seen.add(pair.source)
            pairs.append(pair)
            break
        else:  # only reachable when asking for more unique short sentences than exist
            raise RuntimeError(f"ran out of distinct sentences of length {length}")
    return pairs


def generate(n: int, seed: int, *, held_out: HeldOut = "any") -> list[Pair]:
    """``n`` independent random pairs (duplicates possible), source lengths uniform in 3..25.

    ``held_out`` = "exclude" keeps only train-like sentences, "require" only test-like ones.
    """
    rng = random.Random(f"attention-viz-corpus/generate/{seed}")
    lengths = [rng.randint(MIN_LENGTH, MAX_LENGTH) for _ in range(n)]
    return _sample(rng, lengths, held_out, unique=False)


def _apportion(n: int, weights: dict[int, float]) -> list[int]:
    """Exactly ``n`` lengths, split among lengths in proportion to weights (largest remainder)."""
    total = sum(weights.values())
    exact = {k: n * w / total for k, w in weights.items()}
    counts = {k: int(x) for k, x in exact.items()}
    by_remainder = sorted(weights, key=lambda k: (counts[k] - exact[k], k))
    for k in by_remainder[: n - sum(counts.values())]:
        counts[k] += 1
    return [k for k in sorted(counts) for _ in range(counts[k])]


_ALL_LENGTHS = range(MIN_LENGTH, MAX_LENGTH + 1)
# Lengths 3-5 have only a few thousand distinct sentences: fewer of them in train.
_TRAIN_LENGTH_WEIGHTS = {n: {3: 0.25, 4: 0.5, 5: 0.75}.get(n, 1.0) for n in _ALL_LENGTHS}
_EVAL_LENGTH_WEIGHTS = {n: 1.0 for n in _ALL_LENGTHS}


def splits(seed: int = 0, sizes: tuple[int, int, int] = DEFAULT_SIZES) -> dict[str, list[Pair]]:
    """Deterministic ``{"train", "dev", "test"}`` splits (see the package doc's held-out rule).

    Dev and test have the same number of sentences at every source length 3..25; train has
    fewer of lengths 3-5.  Sentences are unique within and across splits.
    """
    n_train, n_dev, n_test = sizes

    def rng(name: str) -> random.Random:  # one stream per split: sizes don't shift the others
        return random.Random(f"attention-viz-corpus/{name}/{seed}")

    def shuffled(name: str, pairs: list[Pair]) -> list[Pair]:
        rng(name + "/order").shuffle(pairs)
        return pairs

    test = _sample(rng("test"), _apportion(n_test, _EVAL_LENGTH_WEIGHTS), "require", True)
    dev = _sample(rng("dev"), _apportion(n_dev, _EVAL_LENGTH_WEIGHTS), "exclude", True)
    taken = [p.source for p in test + dev]
    train = _sample(
        rng("train"), _apportion(n_train, _TRAIN_LENGTH_WEIGHTS), "exclude", True, taken
    )
    return {
        "train": shuffled("train", train),
        "dev": shuffled("dev", dev),
        "test": shuffled("test", test),
    }
