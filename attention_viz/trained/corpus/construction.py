"""Random construction: a sentence tree of an exact source length, grown one step at a time."""

from __future__ import annotations

import random
from typing import Callable, Sequence

from .lexicon import (
    ADJECTIVES,
    AGENTS,
    COUNTS,
    DAYS,
    INTRANSITIVE,
    MONTHS,
    NOUNS,
    PREPOSITIONS,
    THINGS,
    TRANSITIVE,
    YEARS,
    Noun,
)
from .trees import (
    NP,
    PP,
    VERB_GROUP_LEN,
    Clause,
    Date,
    Det,
    Form,
    Relative,
    Sentence,
    all_clauses,
    all_nps,
    clause_len,
    is_passive,
    np_len,
    sentence_len,
)

def _random_np(
    rng: random.Random, nouns: Sequence[Noun], *, depth: int = 0, in_relative: bool = False,
    allow: Sequence[Det] = ("the", "a", "some", "this", "count", "bare"),
) -> NP:  # fmt: skip
    noun = rng.choice(nouns)
    plural = rng.random() < 0.45
    if plural:
        choices, weights = ["the", "bare", "some", "this", "count"], [4, 2.5, 1, 1, 1.5]
    else:
        choices, weights = ["the", "a", "this"], [6, 2.5, 1.5]
    pairs = [(d, w) for d, w in zip(choices, weights) if d in allow]
    det = rng.choices([d for d, _ in pairs], [w for _, w in pairs])[0]
    count = rng.choice(COUNTS) if det == "count" else 0
    return NP(noun, plural, det, count, depth=depth, in_relative=in_relative)  # type: ignore


_ACTIVE_FORMS: tuple[Form, ...] = ("present", "past", "perfect", "future")
_PASSIVE_FORMS: tuple[Form, ...] = (
    "passive_past", "passive_present", "passive_future", "passive_perfect",
)  # fmt: skip


def _random_clause(rng: random.Random) -> Clause:
    """A minimal main clause: subject, verb group and (for active transitives) object."""
    kind = rng.choices(["intransitive", "transitive", "passive"], [3, 4.5, 2.5])[0]
    if kind == "intransitive":
        subject = _random_np(rng, NOUNS)
        return Clause(rng.choice(INTRANSITIVE), rng.choice(_ACTIVE_FORMS), subject, None)
    verb = rng.choice(TRANSITIVE)
    if kind == "transitive":
        subject, obj = _random_np(rng, AGENTS), _random_np(rng, THINGS)
        return Clause(verb, rng.choice(_ACTIVE_FORMS), subject, obj)
    return Clause(verb, rng.choice(_PASSIVE_FORMS), _random_np(rng, THINGS), None)


def _random_relative(rng: random.Random, antecedent: NP) -> Relative:
    """A minimal relative clause whose gap is compatible with the antecedent noun."""
    pronoun = "that" if antecedent.noun.agent else rng.choice(["that", "which"])
    kinds = ["intransitive", "transitive"] if antecedent.noun.agent else [
        "intransitive", "passive", "object",
    ]  # fmt: skip
    kind = rng.choice(kinds)
    if kind == "intransitive":
        verb, form = rng.choice(INTRANSITIVE), rng.choice(_ACTIVE_FORMS)
        return Relative(pronoun, "subject", Clause(verb, form, None, None))
    verb = rng.choice(TRANSITIVE)
    if kind == "transitive":
        obj = _random_np(rng, THINGS, in_relative=True)
        return Relative(pronoun, "subject", Clause(verb, rng.choice(_ACTIVE_FORMS), None, obj))
    if kind == "passive":
        return Relative(pronoun, "subject", Clause(verb, rng.choice(_PASSIVE_FORMS), None, None))
    subject = _random_np(rng, AGENTS, in_relative=True)
    return Relative(pronoun, "object", Clause(verb, rng.choice(_ACTIVE_FORMS), subject, None))


def _random_date(rng: random.Random) -> Date:
    shape = rng.choice(["full", "month", "year"])
    day = rng.choice(DAYS) if shape == "full" else None
    month = rng.randrange(len(MONTHS)) if shape != "year" else None
    return Date(day, month, rng.choice(YEARS))


# A growth step proposes one random modification of a sentence tree: it returns the number of
# source tokens the modification adds and a function applying it, or None if nothing applies.
_Growth = tuple[int, Callable[[], None]]


def _grow_adjective(rng: random.Random, s: Sentence) -> _Growth | None:
    nps = [np for np in all_nps(s) if len(np.adjs) < 3]
    if not nps:
        return None
    np = rng.choice(nps)
    adj = rng.choice([a for a in ADJECTIVES if a not in np.adjs])
    position = rng.randrange(len(np.adjs) + 1)
    return 1, lambda: np.adjs.insert(position, adj)


def _grow_of(rng: random.Random, s: Sentence) -> _Growth | None:
    nps = [np for np in all_nps(s) if np.of is None and np.rel is None and np.depth < 2]
    if not nps:
        return None
    np = rng.choice(nps)
    # "of some X" would need French "de" without its article: leave "some" out.
    new = _random_np(rng, NOUNS, depth=np.depth + 1, in_relative=np.in_relative,
                     allow=("the", "a", "this", "count", "bare"))  # fmt: skip
    return 1 + np_len(new), lambda: setattr(np, "of", new)


def _grow_relative(rng: random.Random, s: Sentence) -> _Growth | None:
    nps = all_nps(s)
    if sum(np.rel is not None for np in nps) >= 2:
        return None
    # Only on an NP without "of": in "the law of the council that ..." the relative is
    # always about "the council", so the participle agreement is never ambiguous.
    nps = [np for np in nps if np.rel is None and np.of is None and not np.in_relative]
    if not nps:
        return None
    np = rng.choice(nps)
    rel = _random_relative(rng, np)
    return 1 + clause_len(rel.clause), lambda: setattr(np, "rel", rel)


def _grow_pp(rng: random.Random, s: Sentence) -> _Growth | None:
    clauses = [c for c in s.clauses if len(c.extras) < 3]
    if not clauses:
        return None
    c = rng.choice(clauses)
    prep = rng.choice(list(PREPOSITIONS))
    # No numbers after a preposition ("in 3 regions" next to "in 1998"), and no "de des"
    # after "within" / "because of" (French drops that article: a rule we leave out).
    ends_with_de = PREPOSITIONS[prep][-1][0] == "de"
    allow: tuple[Det, ...] = ("the", "a", "this", "bare") + (() if ends_with_de else ("some",))
    pp = PP(prep, _random_np(rng, NOUNS, allow=allow))
    return len(prep.split()) + np_len(pp.np), lambda: c.extras.append(pp)


def _grow_date(rng: random.Random, s: Sentence) -> _Growth | None:
    clauses = [c for c in s.clauses if not any(isinstance(x, Date) for x in c.extras)]
    if not clauses:
        return None
    c = rng.choice(clauses)
    date = _random_date(rng)
    return 2 + (date.day is not None) + (date.month is not None), lambda: c.extras.append(date)


def _grow_agent(rng: random.Random, s: Sentence) -> _Growth | None:
    clauses = [c for c in all_clauses(s) if is_passive(c.form) and c.agent is None]
    if not clauses:
        return None
    c = rng.choice(clauses)
    agent = _random_np(rng, AGENTS, in_relative=c not in s.clauses,
                       allow=("the", "a", "this", "some", "bare"))  # fmt: skip
    return 1 + np_len(agent), lambda: setattr(c, "agent", agent)


def _grow_clause(rng: random.Random, s: Sentence) -> _Growth | None:
    if len(s.clauses) >= 3:
        return None
    clause = _random_clause(rng)
    return 1 + clause_len(clause), lambda: s.clauses.append(clause)


def _grow_negation(rng: random.Random, s: Sentence) -> _Growth | None:
    clauses = [c for c in all_clauses(s) if not c.negated]
    if not clauses:
        return None
    c = rng.choice(clauses)
    affirmative, negated = VERB_GROUP_LEN[c.form]
    return negated - affirmative, lambda: setattr(c, "negated", True)


_GROWTH_STEPS: tuple[tuple[float, Callable[[random.Random, Sentence], _Growth | None]], ...] = (
    (2.0, _grow_adjective),
    (0.8, _grow_of),
    (0.7, _grow_relative),
    (0.8, _grow_pp),
    (0.5, _grow_date),
    (0.6, _grow_agent),
    (0.5, _grow_clause),
    (0.2, _grow_negation),
)


def random_sentence(rng: random.Random, length: int, max_tries: int = 1000) -> Sentence:
    """A random sentence tree with exactly ``length`` source tokens.

    Start from a minimal clause and apply random growth steps that fit the remaining budget,
    restarting on a dead end: far cheaper than sampling freely and rejecting by length.
    """
    for _ in range(max_tries):
        s = Sentence([_random_clause(rng)])
        current = sentence_len(s)
        while current < length:
            growth = _pick_growth(rng, s, length - current)
            if growth is None:
                break  # dead end: nothing fits, start again
            size, apply = growth
            apply()
            current += size
        if current == length:
            return s
    raise RuntimeError(f"could not build a sentence of length {length}")


def _pick_growth(rng: random.Random, s: Sentence, budget: int) -> _Growth | None:
    """Draw step kinds by weight until one proposes a growth of at most ``budget`` tokens."""
    candidates = list(_GROWTH_STEPS)
    while candidates:
        k = rng.choices(range(len(candidates)), [w for w, _ in candidates])[0]
        growth = candidates[k][1](rng, s)
        if growth is not None and growth[0] <= budget:
            return growth
        del candidates[k]
    return None
