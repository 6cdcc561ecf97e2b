"""Rendering: a sentence tree written as an English/French pair with its word alignment."""

from __future__ import annotations

from .lexicon import MONTHS, PREPOSITIONS
from .pair import Combo, Pair
from .trees import NP, PP, Clause, Date, Sentence, is_passive

class _Writer:
    """Collects source tokens, and target tokens with the source index each is aligned to.

    Both languages keep the constituents of a clause in the same order, so each constituent
    can write its English words and then its French words; only the order *inside* an NP or a
    verb group differs, and that is handled locally.
    """

    def __init__(self) -> None:
        self.source: list[str] = []
        self.target: list[tuple[str, int, bool]] = []  # (word, source index, content)

    def src(self, word: str) -> int:
        self.source.append(word)
        return len(self.source) - 1

    def tgt(self, word: str, aligned_to: int, content: bool = True) -> None:
        self.target.append((word, aligned_to, content))


def _fr_vowel(word: str) -> bool:
    return word[:1] in set("aeiouhéèêàâîô")  # every h-word in the lexicon is a silent h


def _en_vowel_sound(word: str) -> bool:
    # "an agreement", "an urban area" but "a european", "a union", "a university".
    return word[:1] in set("aeiou") and not word.startswith(("eu", "uni"))


def _en_det(np: NP, next_word: str) -> str:
    if np.det == "a":
        return "an" if _en_vowel_sound(next_word) else "a"
    if np.det == "this":
        return "these" if np.plural else "this"
    if np.det == "count":
        return str(np.count)
    return np.det  # "the", "some"


def _fr_det(np: NP) -> str:
    feminine, plural = np.noun.gender == "f", np.plural
    if np.det in ("the", "bare"):
        return "les" if plural else "la" if feminine else "le"  # elided to l' later
    if np.det == "a":
        return "une" if feminine else "un"
    if np.det == "some":
        return "des"
    if np.det == "this":
        if plural:
            return "ces"
        return "cette" if feminine else "cet" if _fr_vowel(np.noun.fr) else "ce"
    return str(np.count)


def _render_np(w: _Writer, np: NP) -> None:
    noun_en = np.noun.en_pl if np.plural else np.noun.en
    det = None
    if np.det != "bare":
        det = w.src(_en_det(np, np.adjs[0].en if np.adjs else noun_en))
    adjs = [w.src(a.en) for a in np.adjs]
    noun = w.src(noun_en)
    # French: article, noun, then the adjectives in reverse order.
    if det is None:
        w.tgt(_fr_det(np), noun, content=False)  # bare plural: inserted "les" -> the noun
    else:
        w.tgt(_fr_det(np), det)
    w.tgt(np.noun.fr_pl if np.plural else np.noun.fr, noun)
    for adj, i in reversed(list(zip(np.adjs, adjs))):
        w.tgt(adj.fr(np.noun.gender, np.plural), i)
    if np.of is not None:
        w.tgt("de", w.src("of"))
        _render_np(w, np.of)
    if np.rel is not None:
        pronoun = w.src(np.rel.pronoun)
        w.tgt("qui" if np.rel.kind == "subject" else "que", pronoun)
        _render_clause(w, np.rel.clause, antecedent=np)


def _verb_group(
    c: Clause, controller: NP, preceding_object: NP | None
) -> tuple[list[str], list[tuple[str, int, bool]]]:
    """English words and French (word, index into the English words, content) of a verb group.

    ``controller`` is the subject the verb agrees with; ``preceding_object`` is the antecedent
    of an object relative, which the participle of a compound past agrees with.
    """
    v, plural = c.verb, controller.plural
    agree = controller if is_passive(c.form) else preceding_object
    if c.form not in ("past", "perfect") and not is_passive(c.form):
        agree = None
    pp = v.fr_participle(agree.noun.gender, agree.plural) if agree else v.fr_pp
    avoir = "ont" if plural else "a"
    en: list[str]
    fr: list[tuple[str, int, bool]]
    if c.form == "present":
        en = ["do" if plural else "does", v.en] if c.negated else [v.en if plural else v.en_3sg]
        fr = [(v.fr_present[plural], len(en) - 1, True)]
    elif c.form == "past":
        if c.negated:
            en, fr = ["did", v.en], [(avoir, 0, True), (pp, 1, True)]
        else:  # "signed" -> "a signé": the auxiliary has no English word, align it to the verb
            en, fr = [v.en_past], [(avoir, 0, False), (pp, 0, True)]
    elif c.form == "perfect":
        en, fr = ["have" if plural else "has", v.en_pp], [(avoir, 0, True), (pp, 1, True)]
    elif c.form == "future":
        en, fr = ["will", v.en], [(v.fr_future[plural], 1, True)]
    elif c.form == "passive_past":
        en = ["were" if plural else "was", v.en_pp]
        fr = [(avoir, 0, True), ("été", 0, True), (pp, 1, True)]
    elif c.form == "passive_present":
        en = ["are" if plural else "is", v.en_pp]
        fr = [("sont" if plural else "est", 0, True), (pp, 1, True)]
    elif c.form == "passive_future":
        en = ["will", "be", v.en_pp]
        fr = [("seront" if plural else "sera", 1, True), (pp, 2, True)]
    else:  # passive_perfect
        en = ["have" if plural else "has", "been", v.en_pp]
        fr = [(avoir, 0, True), ("été", 1, True), (pp, 2, True)]
    if c.negated:
        # English "not" follows the first auxiliary; French "ne ... pas" frames the finite verb.
        en.insert(1, "not")
        fr = [(word, i + (i >= 1), content) for word, i, content in fr]
        fr = [("ne", 1, True), fr[0], ("pas", 1, True), *fr[1:]]
    return en, fr


def _render_clause(w: _Writer, c: Clause, antecedent: NP | None = None) -> None:
    if c.subject is not None:
        _render_np(w, c.subject)
    controller = c.subject if c.subject is not None else antecedent
    assert controller is not None
    preceding_object = antecedent if c.subject is not None else None  # object relative
    en, fr = _verb_group(c, controller, preceding_object)
    base = len(w.source)
    for word in en:
        w.src(word)
    for word, i, content in fr:
        w.tgt(word, base + i, content)
    if c.obj is not None:
        _render_np(w, c.obj)
    if c.agent is not None:
        w.tgt("par", w.src("by"))
        _render_np(w, c.agent)
    for x in c.extras:
        if isinstance(x, PP):
            base = len(w.source)
            for word in x.prep.split():
                w.src(word)
            for word, i in PREPOSITIONS[x.prep]:
                w.tgt(word, base + i)
            _render_np(w, x.np)
        else:
            _render_date(w, x)


def _render_date(w: _Writer, d: Date) -> None:
    if d.day is not None:  # on 12 may 1998 -> le 12 mai 1998 (the 1st is "1er")
        w.tgt("le", w.src("on"))
        w.tgt("1er" if d.day == 1 else str(d.day), w.src(str(d.day)))
    else:  # in may 1998 / in 1998 -> en mai 1998 / en 1998
        w.tgt("en", w.src("in"))
    if d.month is not None:
        en, fr = MONTHS[d.month]
        w.tgt(fr, w.src(en))
    w.tgt(str(d.year), w.src(str(d.year)))


_ELISIONS = {"le": "l'", "la": "l'", "de": "d'", "que": "qu'", "ne": "n'"}
_CONTRACTIONS = {("de", "le"): "du", ("de", "les"): "des", ("à", "le"): "au", ("à", "les"): "aux"}


def _elide_and_contract(tokens: list[tuple[str, int, bool]]) -> list[tuple[str, int, bool]]:
    """French spelling rules that look at the next word: l' accord, n' a; du, des, au, aux."""
    out: list[tuple[str, int, bool]] = []
    for j, (word, i, content) in enumerate(tokens):
        following = tokens[j + 1][0] if j + 1 < len(tokens) else ""
        if word in _ELISIONS and _fr_vowel(following):
            word = _ELISIONS[word]
        if out and (out[-1][0], word) in _CONTRACTIONS:
            prep, prep_index, prep_content = out.pop()  # aligned to the preposition
            out.append((_CONTRACTIONS[prep, word], prep_index, prep_content))
            continue
        out.append((word, i, content))
    return out


def to_pair(s: Sentence, combos: tuple[Combo, ...]) -> Pair:
    w = _Writer()
    for k, clause in enumerate(s.clauses):
        if k:
            w.tgt("et", w.src("and"))
        _render_clause(w, clause)
    w.tgt(".", w.src("."))
    target = _elide_and_contract(w.target)
    return Pair(
        source=tuple(w.source),
        target=tuple(t[0] for t in target),
        alignment=tuple(t[1] for t in target),
        content=tuple(t[2] for t in target),
        combos=combos,
    )
