"""Built-in probe sets: many inputs generated from templates, so a head's score is an average over
sentences rather than a reading of one (head detector, mean ablation).

Two kinds of probe, both seeded:

* ordinary sentences from templates filled from word lists: previous-token, self, sink and
  fixed-offset heads show on any text;
* a random sequence of tokens followed by the same sequence again: the second half is where a
  duplicate-token head finds an earlier copy of the current token, and an induction head
  attends to the token after it (Olsson et al. 2022 use exactly this probe).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

NOUNS = (
    "cat", "dog", "bird", "horse", "teacher", "doctor", "farmer", "child", "king", "queen", "student",
    "river", "city", "garden", "house", "road", "tree", "book", "letter", "window", "door", "table",
    "car", "train", "boat", "song", "game", "park", "school", "market",
)
VERBS = ("saw", "found", "liked", "painted", "opened", "closed", "followed", "helped", "watched", "visited")
ADJECTIVES = ("old", "small", "green", "quiet", "bright", "heavy", "young", "cold", "happy", "tall")
PLACES = ("river", "market", "station", "bridge", "forest", "village", "library", "harbor", "garden", "hill")
TEMPLATES = (
    "The {adj} {noun} {verb} the {noun2} near the {place}.",
    "A {noun} and a {noun2} {verb} the {adj} {place} in the morning.",
    "Yesterday the {noun} {verb} a {adj} {noun2}, and then it went to the {place}.",
    "My {noun} {verb} your {noun2} because it was {adj}.",
)
# Words for repeated random sequences: common, so BERT's WordPiece keeps most of them whole.
SEQUENCE_WORDS = NOUNS + VERBS + ADJECTIVES + PLACES


def template_sentence(rng: random.Random) -> str:
    noun, noun2 = rng.sample(NOUNS, 2)
    return rng.choice(TEMPLATES).format(
        adj=rng.choice(ADJECTIVES), noun=noun, noun2=noun2, verb=rng.choice(VERBS), place=rng.choice(PLACES)
    )


def repeated_sequence(symbols: Sequence[str], length: int, rng: random.Random, separator: str = " ") -> str:
    """``length`` random symbols (no symbol twice), then the same symbols again."""
    if not 1 <= length <= len(set(symbols)):
        raise ValueError(f"length must be in 1..{len(set(symbols))}, got {length}")
    first = rng.sample(sorted(set(symbols)), length)
    return separator.join(first + first)


def english_probes(n: int = 24, seed: int = 0, min_length: int = 6, max_length: int = 12) -> list[str]:
    """``n`` English probes: template sentences and repeated random word sequences, alternating."""
    rng = random.Random(seed)
    return [
        template_sentence(rng) if i % 2 == 0 else repeated_sequence(SEQUENCE_WORDS, rng.randint(min_length, max_length), rng)
        for i in range(n)
    ]


def sequence_probes(
    symbols: Sequence[str], n: int = 24, seed: int = 0, min_length: int = 6, max_length: int = 12
) -> list[str]:
    """``n`` repeated random sequences over ``symbols`` (space-separated), for models without English."""
    rng = random.Random(seed)
    top = min(max_length, len(set(symbols)))
    return [repeated_sequence(symbols, rng.randint(min(min_length, top), top), rng) for _ in range(n)]
