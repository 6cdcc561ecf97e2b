"""Sentence trees: the node types, how many source tokens each takes, and their combinations.

A tree fixes the English sentence and with it the French one; construction and rendering walk it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Literal

from .lexicon import Adjective, Noun, Verb
from .pair import Combo

Det = Literal["the", "a", "some", "this", "count", "bare"]
Form = Literal[
    "present", "past", "perfect", "future",
    "passive_past", "passive_present", "passive_future", "passive_perfect",
]  # fmt: skip


@dataclass
class NP:
    noun: Noun
    plural: bool
    det: Det
    count: int = 0
    adjs: list[Adjective] = field(default_factory=list)
    of: NP | None = None
    rel: Relative | None = None
    depth: int = 0  # "of" nesting depth, capped so phrases stay readable
    in_relative: bool = False  # relatives never nest


@dataclass
class Date:
    day: int | None
    month: int | None
    year: int


@dataclass
class PP:
    prep: str
    np: NP


@dataclass
class Clause:
    verb: Verb
    form: Form
    subject: NP | None  # None in a subject relative: the antecedent is the subject
    obj: NP | None  # None for intransitives, passives and object relatives
    agent: NP | None = None  # passive "by" phrase
    negated: bool = False
    extras: list[PP | Date] = field(default_factory=list)  # main clauses only


@dataclass
class Relative:
    pronoun: str  # "that" | "which" (same French)
    kind: Literal["subject", "object"]
    clause: Clause


@dataclass
class Sentence:
    clauses: list[Clause]


def is_passive(form: str) -> bool:
    return form.startswith("passive")


# Source tokens taken by each verb group, (affirmative, negated).
VERB_GROUP_LEN: dict[str, tuple[int, int]] = {
    "present": (1, 3),  # signs / does not sign
    "past": (1, 3),  # signed / did not sign
    "perfect": (2, 3),  # has signed / has not signed
    "future": (2, 3),  # will sign / will not sign
    "passive_past": (2, 3),  # was signed / was not signed
    "passive_present": (2, 3),  # is signed / is not signed
    "passive_future": (3, 4),  # will be signed / will not be signed
    "passive_perfect": (3, 4),  # has been signed / has not been signed
}


def np_len(np: NP) -> int:
    n = (np.det != "bare") + len(np.adjs) + 1
    if np.of is not None:
        n += 1 + np_len(np.of)
    if np.rel is not None:
        n += 1 + clause_len(np.rel.clause)
    return n


def clause_len(c: Clause) -> int:
    n = VERB_GROUP_LEN[c.form][c.negated]
    for np in (c.subject, c.obj):
        if np is not None:
            n += np_len(np)
    if c.agent is not None:
        n += 1 + np_len(c.agent)
    for x in c.extras:
        if isinstance(x, PP):
            n += len(x.prep.split()) + np_len(x.np)
        else:
            n += 2 + (x.day is not None) + (x.month is not None)
    return n


def sentence_len(s: Sentence) -> int:
    return sum(clause_len(c) for c in s.clauses) + len(s.clauses)  # "and"s and the "."


def _nps_of_np(np: NP) -> Iterable[NP]:
    yield np
    if np.of is not None:
        yield from _nps_of_np(np.of)
    if np.rel is not None:
        yield from _nps_of_clause(np.rel.clause)


def _nps_of_clause(c: Clause) -> Iterable[NP]:
    for np in (c.subject, c.obj, c.agent):
        if np is not None:
            yield from _nps_of_np(np)
    for x in c.extras:
        if isinstance(x, PP):
            yield from _nps_of_np(x.np)


def all_nps(s: Sentence) -> list[NP]:
    return [np for c in s.clauses for np in _nps_of_clause(c)]


def all_clauses(s: Sentence) -> list[Clause]:
    out = list(s.clauses)
    out += [np.rel.clause for np in all_nps(s) if np.rel is not None]
    return out


def sentence_combos(s: Sentence) -> tuple[Combo, ...]:
    found: list[Combo] = []
    for np in all_nps(s):
        found += [("adj", a.en, np.noun.en) for a in np.adjs]

    def verb_args(c: Clause, antecedent: NP | None) -> None:
        for np in (c.subject, c.obj, c.agent, antecedent):
            if np is not None:
                found.append(("verb", c.verb.en, np.noun.en))

    for c in s.clauses:
        verb_args(c, None)
    for np in all_nps(s):
        if np.rel is not None:
            verb_args(np.rel.clause, np)
    return tuple(dict.fromkeys(found))  # unique, first-seen order
