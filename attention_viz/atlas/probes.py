"""The built-in ``probes`` corpus: sentences made from templates, so every syntactic relation in them
is known by construction (no parser, no annotator).

A relation is ``(name, dependent word, gold head word)`` with 0-indexed *words* (whitespace-separated,
the final period belongs to the last word, as :mod:`attention_viz.tokens` groups them). A head
"gets" a relation when the dependent's most-attended-to other word is the gold one (Clark et al.
2019, "What does BERT look at?"). The Winograd-style pairs differ in one adjective and flip the
pronoun's antecedent ("The animal didn't cross the street because it was too tired / wide"), so a
head cannot score on them by position alone.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

RELATIONS = (
    "pronoun_antecedent",
    "determiner_noun",
    "adjective_noun",
    "subject_verb",
    "verb_subject",
    "verb_object",
    "preposition_object",
    "repeated_token",
    "previous_token",
)
DEFAULT_SIZE = 3000
DEFAULT_SEED = 0
VERSION = 1  # bump when the templates change: it is part of the corpus hash


@dataclass(frozen=True)
class Probe:
    text: str
    relations: tuple[tuple[str, int, int], ...]  # (relation, dependent word, gold head word)


# (subjects, verb, objects, adjectives that make "it" the subject, ... that make it the object)
WINOGRAD = (
    (("animal", "dog", "horse", "cat", "cow"), "cross", ("street", "road", "river"),
     ("tired", "scared", "slow", "old"), ("wide", "busy", "long", "crowded")),
    (("man", "woman", "boy", "girl"), "lift", ("box", "table", "rock", "bag"),
     ("weak", "tired", "small", "young"), ("heavy", "large", "big")),
    (("student", "child", "reader"), "finish", ("book", "letter", "story", "report"),
     ("tired", "sleepy", "busy", "lazy"), ("long", "boring", "dull", "difficult")),
    (("truck", "bus", "car"), "pass", ("gate", "tunnel", "bridge"),
     ("tall", "big", "heavy"), ("narrow", "low", "small")),
    (("trophy", "statue", "lamp", "ball"), "fit", ("suitcase", "box", "bag", "drawer"),
     ("big", "large", "tall"), ("small", "narrow", "tiny", "short")),
)
NOUNS = ("dog", "cat", "man", "woman", "teacher", "doctor", "farmer", "child", "bird", "king",
         "soldier", "singer", "driver", "artist", "girl", "boy", "student", "horse", "baker", "nurse")
THINGS = ("table", "house", "garden", "river", "window", "door", "car", "tree", "bridge", "road",
          "box", "chair", "wall", "hill", "field", "boat", "book", "letter", "lamp", "bed")
ADJECTIVES = ("old", "young", "small", "big", "quiet", "happy", "tall", "red", "green", "dark",
              "strange", "clever", "tired", "angry", "famous", "new", "cold", "bright", "poor", "kind")
TRANSITIVE = ("saw", "found", "painted", "watched", "followed", "cleaned", "visited", "liked", "moved", "built")
INTRANSITIVE = ("slept", "waited", "stood", "sat", "laughed", "walked", "ran", "stayed", "danced", "sang")
PREPOSITIONS = ("near", "under", "behind", "beside", "above", "inside", "past", "across")


def _previous(n_words: int) -> list[tuple[str, int, int]]:
    return [("previous_token", i, i - 1) for i in range(1, n_words)]


def _probe(words: list[str], relations: list[tuple[str, int, int]]) -> Probe:
    return Probe(" ".join(words) + ".", tuple(relations) + tuple(_previous(len(words))))


def winograd_pair(rng: random.Random) -> tuple[Probe, Probe]:
    """Two sentences that differ in the last adjective; "it" (word 7) points at word 1, then word 5."""
    subjects, verb, objects, subject_adjectives, object_adjectives = rng.choice(WINOGRAD)
    x, y = rng.choice(subjects), rng.choice(objects)
    pair = []
    for adjective, antecedent in ((rng.choice(subject_adjectives), 1), (rng.choice(object_adjectives), 5)):
        words = ["The", x, "didn't", verb, "the", y, "because", "it", "was", "too", adjective]
        pair.append(_probe(words, [
            ("determiner_noun", 0, 1), ("determiner_noun", 4, 5),
            ("subject_verb", 1, 3), ("verb_subject", 3, 1), ("verb_object", 3, 5),
            ("pronoun_antecedent", 7, antecedent),
        ]))
    return pair[0], pair[1]


class _Sentence:
    """Words appended one by one; each ``add`` returns the word's index, so relations are written
    between names, not hand-counted positions (optional words shift them)."""

    def __init__(self) -> None:
        self.words: list[str] = []
        self.relations: list[tuple[str, int, int]] = []

    def add(self, word: str) -> int:
        self.words.append(word)
        return len(self.words) - 1

    def noun_phrase(self, rng: random.Random, determiner: str, nouns: tuple[str, ...], noun: str | None = None,
                    adjective_chance: float = 0.5) -> int:
        """DET (ADJ) N with its relations; returns the noun's index."""
        d = self.add(determiner)
        a = self.add(rng.choice(ADJECTIVES)) if rng.random() < adjective_chance else None
        n = self.add(noun or rng.choice(nouns))
        self.relations.append(("determiner_noun", d, n))
        if a is not None:
            self.relations.append(("adjective_noun", a, n))
        return n

    def subject_verb(self, subject: int, verb: int) -> None:
        self.relations += [("subject_verb", subject, verb), ("verb_subject", verb, subject)]

    def probe(self) -> Probe:
        return _probe(self.words, self.relations)


def transitive(rng: random.Random) -> Probe:
    """The (ADJ) N V the (ADJ) N [P the (ADJ) N]."""
    s = _Sentence()
    subject = s.noun_phrase(rng, "The", NOUNS)
    verb = s.add(rng.choice(TRANSITIVE))
    s.subject_verb(subject, verb)
    s.relations.append(("verb_object", verb, s.noun_phrase(rng, "the", THINGS)))
    if rng.random() < 0.7:
        preposition = s.add(rng.choice(PREPOSITIONS))
        s.relations.append(("preposition_object", preposition, s.noun_phrase(rng, "the", THINGS)))
    return s.probe()


def repeated(rng: random.Random) -> Probe:
    """The N1 V the (ADJ) N2 and (then) the N1 V. — the second N1 should look back at the first."""
    n1, n2 = rng.sample(NOUNS, 2)
    s = _Sentence()
    first = s.noun_phrase(rng, "The", NOUNS, n1, adjective_chance=0.0)
    verb = s.add(rng.choice(TRANSITIVE))
    s.subject_verb(first, verb)
    s.relations.append(("verb_object", verb, s.noun_phrase(rng, "the", NOUNS, n2)))
    s.add("and")
    if rng.random() < 0.5:
        s.add("then")
    second = s.noun_phrase(rng, "the", NOUNS, n1, adjective_chance=0.0)
    s.subject_verb(second, s.add(rng.choice(INTRANSITIVE)))
    s.relations.append(("repeated_token", second, first))
    return s.probe()


def intransitive(rng: random.Random) -> Probe:
    """A (ADJ) N V P the (ADJ) N."""
    s = _Sentence()
    subject = s.noun_phrase(rng, "A", NOUNS, adjective_chance=0.7)
    s.subject_verb(subject, s.add(rng.choice(INTRANSITIVE)))
    preposition = s.add(rng.choice(PREPOSITIONS))
    s.relations.append(("preposition_object", preposition, s.noun_phrase(rng, "the", THINGS)))
    return s.probe()


def generate(n: int = DEFAULT_SIZE, seed: int = DEFAULT_SEED) -> list[Probe]:
    """``n`` probes, the same for the same (n, seed): 40% Winograd pairs, then the other templates in turn."""
    rng = random.Random(seed)
    probes: list[Probe] = []
    while len(probes) < n:
        roll = rng.random()
        if roll < 0.4:
            probes.extend(winograd_pair(rng))
        elif roll < 0.6:
            probes.append(transitive(rng))
        elif roll < 0.8:
            probes.append(repeated(rng))
        else:
            probes.append(intransitive(rng))
    return probes[:n]
