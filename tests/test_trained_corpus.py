"""The synthetic translation corpus: determinism, lengths, alignments, held-out split, grammar."""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest

from attention_viz.trained import corpus
from attention_viz.trained.corpus import (
    Pair,
    construction,
    generate,
    is_held_out,
    length_bucket,
    lexicon,
    render,
    sampling,
    splits,
    trees,
)
from attention_viz.trained.vocab import Vocab, build_vocabs

SMALL = (3000, 300, 920)  # 920 test sentences = 40 per source length 3..25
ADJ = {a.en: a for a in corpus.ADJECTIVES}
NOUN_SG = {n.en: n for n in corpus.NOUNS}
NOUN_PL = {n.en_pl: n for n in corpus.NOUNS}


@pytest.fixture(scope="module")
def split() -> dict[str, list[Pair]]:
    return splits(seed=0, sizes=SMALL)


@pytest.fixture(scope="module")
def sample() -> list[Pair]:
    return generate(8000, seed=1)


def _noun(word: str) -> tuple[corpus.Noun, bool] | None:
    """(noun, plural) for an English noun token, else None."""
    if word in NOUN_SG:
        return NOUN_SG[word], False
    if word in NOUN_PL:
        return NOUN_PL[word], True
    return None


def _adjective_runs(source: tuple[str, ...]) -> list[tuple[list[int], int]]:
    """(adjective indices, noun index) for every run of adjectives directly before a noun."""
    runs, current = [], []
    for i, word in enumerate(source):
        if word in ADJ:
            current.append(i)
            continue
        if current and _noun(word):
            runs.append((current, i))
        current = []
    return runs


def _parsed_adj_noun_combos(pair: Pair) -> set[tuple[str, str, str]]:
    """(adjective, noun) combinations read off the English text, independently of the generator."""
    combos = set()
    for adjs, noun_index in _adjective_runs(pair.source):
        noun = _noun(pair.source[noun_index])
        assert noun is not None
        combos |= {("adj", pair.source[i], noun[0].en) for i in adjs}
    return combos


def _targets_aligned_to(pair: Pair, i: int, content_only: bool = True) -> list[int]:
    return [
        j for j, a in enumerate(pair.alignment) if a == i and (pair.content[j] or not content_only)
    ]


def _sentence(*clauses: trees.Clause) -> Pair:
    """Render a hand-built tree (for the documented examples)."""
    return render.to_pair(trees.Sentence(list(clauses)), ())


def _verb(en: str) -> corpus.Verb:
    return next(v for v in corpus.VERBS if v.en == en)


# --------------------------------------------------------------------------------- determinism


def test_generation_is_deterministic_in_the_seed(split: dict[str, list[Pair]]) -> None:
    assert generate(200, seed=7) == generate(200, seed=7)
    assert generate(200, seed=7) != generate(200, seed=8)
    again = splits(seed=0, sizes=SMALL)
    assert again == split
    tiny = (200, 20, 46)
    assert splits(seed=1, sizes=tiny)["test"] != splits(seed=0, sizes=tiny)["test"]


def test_split_sizes(split: dict[str, list[Pair]]) -> None:
    assert {k: len(v) for k, v in split.items()} == dict(zip(("train", "dev", "test"), SMALL))
    assert corpus.DEFAULT_SIZES == (40_000, 2_000, 2_000)


# ------------------------------------------------------------------------------------- lengths


def test_source_lengths_and_test_buckets(split: dict[str, list[Pair]], sample: list[Pair]) -> None:
    for pair in sample + [p for pairs in split.values() for p in pairs]:
        assert corpus.MIN_LENGTH <= len(pair.source) <= corpus.MAX_LENGTH
    lengths = Counter(len(p.source) for p in split["test"])
    assert set(lengths) == set(range(3, 26))  # every single length, equally often
    assert max(lengths.values()) - min(lengths.values()) <= 1
    buckets = Counter(length_bucket(len(p.source)) for p in split["test"])
    assert set(buckets) == {"3-5", "6-10", "11-15", "16-20", "21-25"}
    assert min(buckets.values()) >= 100
    # With the default sizes every bucket of the test set gets at least 250 sentences.
    default_lengths = sampling._apportion(corpus.DEFAULT_SIZES[2], sampling._EVAL_LENGTH_WEIGHTS)
    assert min(Counter(map(length_bucket, default_lengths)).values()) >= 250


def test_tokens_are_lowercase_words_ending_with_a_period(sample: list[Pair]) -> None:
    for pair in sample:
        assert pair.source[-1] == "." and pair.target[-1] == "."
        assert pair.alignment[-1] == len(pair.source) - 1
        for word in pair.source + pair.target:
            assert word and word == word.lower() and " " not in word
        assert "." not in pair.source[:-1] and "." not in pair.target[:-1]


# ---------------------------------------------------------------------------------- alignments


def test_alignment_shape_and_range(sample: list[Pair]) -> None:
    for pair in sample:
        assert len(pair.alignment) == len(pair.target) == len(pair.content)
        assert all(0 <= i < len(pair.source) for i in pair.alignment)


def test_non_content_alignments_are_inserted_articles_and_auxiliaries(sample: list[Pair]) -> None:
    seen = Counter()
    for pair in sample:
        for j, (word, i, content) in enumerate(zip(pair.target, pair.alignment, pair.content)):
            if content:
                continue
            seen[word] += 1
            if word in ("a", "ont"):  # "signed" -> "a signé": aux aligned to the English verb
                assert pair.target[j + 1] in [
                    v.fr_participle(g, pl) for v in corpus.VERBS for g in "mf" for pl in (0, 1)
                ]
                assert pair.source[i] in {v.en_past for v in corpus.VERBS}
            else:  # bare plural "prices" -> "les prix": article aligned to the noun
                assert word == "les"  # contracted "des" / "aux" belong to the preposition
                assert pair.source[i] in NOUN_PL
    assert seen["les"] and seen["a"] and seen["ont"]


def test_translation_is_a_function_of_the_source(
    split: dict[str, list[Pair]], sample: list[Pair], monkeypatch: pytest.MonkeyPatch
) -> None:
    def check(pairs: list[Pair]) -> int:
        """Assert no source has two targets; return how many sources were seen more than once."""
        translations: dict[tuple[str, ...], tuple[str, ...]] = {}
        for pair in pairs:
            assert translations.setdefault(pair.source, pair.target) == pair.target, pair.source
        return len(pairs) - len(translations)

    check(sample + [p for ps in split.values() for p in ps])
    # With the full lexicon long sentences hardly ever repeat, so an ambiguous construction
    # could hide.  Shrink the lexicon to a handful of words: then the same English sentence is
    # built many times from different random choices at every length, including long ones.
    by_en = {w.en: w for w in (*corpus.NOUNS, *corpus.ADJECTIVES, *corpus.VERBS)}
    agents = (by_en["council"], by_en["commission"])
    things = (by_en["law"], by_en["agreement"])
    preps = ("on", "at", "within", "because of")
    shrunk = {
        "NOUNS": agents + things,
        "AGENTS": agents,
        "THINGS": things,
        "ADJECTIVES": (by_en["european"], by_en["urban"], by_en["social"]),
        "TRANSITIVE": (by_en["sign"],),
        "INTRANSITIVE": (by_en["vote"],),
        "COUNTS": (3,),
        "DAYS": (1,),
        "YEARS": (1998,),
        "MONTHS": (("may", "mai"),),
        "PREPOSITIONS": {p: corpus.PREPOSITIONS[p] for p in preps},
    }
    # Every module of the package that binds a word list reads its own name: patch each one.
    for name, value in shrunk.items():
        for module in (corpus, lexicon, trees, construction, render, sampling):
            if hasattr(module, name):
                monkeypatch.setattr(module, name, value)
    tiny = generate(12000, seed=3)
    repeated = check(tiny)
    assert repeated > 1000
    long_repeats = Counter(p.source for p in tiny if len(p.source) >= 8)
    assert sum(n > 1 for n in long_repeats.values()) >= 5
    # (Run offline with 300,000 sentences: 64,000 repeats up to length 15, no conflict.)


def test_tree_invariants_that_keep_the_translation_unambiguous() -> None:
    # Random sampling rarely builds the same long sentence twice, so also check the rules that
    # make agreement readable from the English: in "the law of the agreement that was signed"
    # the relative must always belong to "the agreement" (else: signée or signé?).
    rng = random.Random(0)
    relatives = 0
    for length in list(range(3, 26)) * 60:
        tree = construction.random_sentence(rng, length)
        for np in trees.all_nps(tree):
            if np.rel is None:
                continue
            relatives += 1
            assert np.of is None and not np.in_relative
            clause = np.rel.clause
            if np.rel.kind == "object" or trees.is_passive(clause.form):
                assert not np.noun.agent  # only "things" are signed
            else:
                assert clause.subject is None
            assert all(inner.rel is None for inner in trees._nps_of_clause(clause))
    assert relatives > 300


# -------------------------------------------------------------------------------- held-out rule


def test_held_out_combinations_only_in_test(split: dict[str, list[Pair]]) -> None:
    for name in ("train", "dev"):
        for pair in split[name]:
            assert not any(is_held_out(c) for c in pair.combos)
            assert not any(is_held_out(c) for c in _parsed_adj_noun_combos(pair))
    for pair in split["test"]:
        assert any(is_held_out(c) for c in pair.combos)
    for pair in split["train"] + split["test"]:  # the generator's bookkeeping matches the text
        assert _parsed_adj_noun_combos(pair) <= set(pair.combos)
    train_combos = {c for p in split["train"] for c in p.combos}
    test_held_out = {c for p in split["test"] for c in p.combos if is_held_out(c)}
    assert len({c for c in test_held_out if c[0] == "adj"}) > 100
    assert len({c for c in test_held_out if c[0] == "verb"}) > 100
    assert not test_held_out & train_combos
    # The held-out words themselves are all seen in train: only their combination is new.
    train_words = {w for c in train_combos for w in c[1:]}
    assert {w for c in test_held_out for w in c[1:]} <= train_words


def test_no_sentence_shared_between_or_repeated_within_splits(
    split: dict[str, list[Pair]],
) -> None:
    sources = {name: [p.source for p in pairs] for name, pairs in split.items()}
    for name, items in sources.items():
        assert len(set(items)) == len(items), name
    assert not set(sources["train"]) & set(sources["test"])
    assert not set(sources["train"]) & set(sources["dev"])
    assert not set(sources["dev"]) & set(sources["test"])


def test_held_out_rule_is_a_fixed_tenth_of_combinations() -> None:
    combos = [("adj", a.en, n.en) for a in corpus.ADJECTIVES for n in corpus.NOUNS]
    share = sum(map(is_held_out, combos)) / len(combos)
    assert 0.07 < share < 0.13
    assert is_held_out(("adj", "european", "area")) == is_held_out(("adj", "european", "area"))


# ------------------------------------------------------------------------------------- grammar


def test_documented_adjective_reordering_example() -> None:
    area = trees.NP(NOUN_SG["area"], False, "the", adjs=[ADJ["european"], ADJ["economic"]])
    pair = _sentence(trees.Clause(_verb("sign"), "passive_past", area, None))
    assert " ".join(pair.source) == "the european economic area was signed ."
    assert " ".join(pair.target) == "la zone économique européenne a été signée ."
    assert pair.alignment == (0, 3, 2, 1, 4, 4, 5, 6)


def test_adjectives_follow_the_noun_in_reverse_order_and_agree(sample: list[Pair]) -> None:
    stacked = feminine_plural = 0
    for pair in sample:
        for adjs, noun_index in _adjective_runs(pair.source):
            noun, plural = _noun(pair.source[noun_index])  # type: ignore[misc]
            (j_noun,) = [
                j for j in _targets_aligned_to(pair, noun_index) if pair.target[j] != "les"
            ]
            assert pair.target[j_noun] == (noun.fr_pl if plural else noun.fr)
            for offset, i in enumerate(reversed(adjs), start=1):  # last English adj comes first
                (j_adj,) = _targets_aligned_to(pair, i)
                assert j_adj == j_noun + offset, (pair.source, pair.target)
                assert pair.target[j_adj] == ADJ[pair.source[i]].fr(noun.gender, plural)
            stacked += len(adjs) >= 2
            feminine_plural += noun.gender == "f" and plural
    assert stacked > 1000 and feminine_plural > 1000


def test_articles_agree_in_gender_and_number(sample: list[Pair]) -> None:
    expected = {  # (English article, gender, plural) -> French forms (l' before a vowel)
        ("the", "m", False): {"le", "l'"}, ("the", "f", False): {"la", "l'"},
        ("the", "m", True): {"les"}, ("the", "f", True): {"les"},
        ("a", "m", False): {"un"}, ("a", "f", False): {"une"},
        ("an", "m", False): {"un"}, ("an", "f", False): {"une"},
        ("this", "m", False): {"ce", "cet"}, ("this", "f", False): {"cette"},
        ("these", "m", True): {"ces"}, ("these", "f", True): {"ces"},
    }  # fmt: skip
    found = Counter()
    for pair in sample:
        for i, word in enumerate(pair.source[:-1]):
            if word not in {"the", "a", "an", "this", "these"}:
                continue
            k = i + 1
            while pair.source[k] in ADJ:
                k += 1
            noun, plural = _noun(pair.source[k])  # type: ignore[misc]
            aligned = _targets_aligned_to(pair, i)
            if not aligned:  # contracted into du / des / au / aux, aligned to the preposition
                assert word == "the" and pair.source[i - 1] in ("of", "at", "within")
                continue
            (j,) = aligned
            assert pair.target[j] in expected[word, noun.gender, plural], (pair.source, pair.target)
            found[pair.target[j]] += 1
    assert all(found[w] > 50 for w in ("la", "le", "l'", "une", "un", "cette", "cet", "ces"))


def test_feminine_agreement_example() -> None:
    law = trees.NP(NOUN_SG["law"], False, "a", adjs=[ADJ["recent"]])
    council = trees.NP(NOUN_SG["council"], False, "the")
    signed = trees.Clause(_verb("sign"), "past", council, None)
    law.rel = trees.Relative("that", "object", signed)
    pair = _sentence(trees.Clause(_verb("reject"), "passive_past", law, None))
    assert " ".join(pair.source) == "a recent law that the council signed was rejected ."
    # une / récente / signée (preceding direct object) / rejetée (passive subject): all feminine.
    assert " ".join(pair.target) == "une loi récente que le conseil a signée a été rejetée ."


def test_passive_was_signed(sample: list[Pair]) -> None:
    hits = 0
    for pair in sample:
        for i in range(len(pair.source) - 1):
            if pair.source[i : i + 2] not in (("was", "signed"), ("were", "signed")):
                continue
            (j,) = _targets_aligned_to(pair, i + 1)  # the participle
            aux, ete, participle = pair.target[j - 2 : j + 1]
            assert (aux, ete) == ("a" if pair.source[i] == "was" else "ont", "été")
            assert pair.alignment[j - 2] == pair.alignment[j - 1] == i
            assert participle in {"signé", "signée", "signés", "signées"}
            assert participle.endswith("s") == (pair.source[i] == "were")
            hits += 1
    assert hits >= 10


@pytest.mark.parametrize(
    ("form", "negated", "source", "target"),
    [
        ("present", False, "the council signs the treaty .", "le conseil signe le traité ."),
        ("present", True, "the council does not sign the treaty .",
         "le conseil ne signe pas le traité ."),
        ("past", False, "the council signed the treaty .", "le conseil a signé le traité ."),
        ("perfect", False, "the council has signed the treaty .",
         "le conseil a signé le traité ."),
        ("perfect", True, "the council has not signed the treaty .",
         "le conseil n' a pas signé le traité ."),
        ("future", False, "the council will sign the treaty .", "le conseil signera le traité ."),
    ],
)  # fmt: skip
def test_verb_forms(form: str, negated: bool, source: str, target: str) -> None:
    council = trees.NP(NOUN_SG["council"], False, "the")
    treaty = trees.NP(NOUN_SG["treaty"], False, "the")
    clause = trees.Clause(_verb("sign"), form, council, treaty, negated=negated)  # type: ignore
    pair = _sentence(clause)
    assert (" ".join(pair.source), " ".join(pair.target)) == (source, target)


def test_dates(sample: list[Pair]) -> None:
    months = dict(corpus.MONTHS)
    hits = Counter()
    for pair in sample:
        for i in range(len(pair.source) - 3):
            on, day, month, year = pair.source[i : i + 4]
            if on != "on" or month not in months:
                continue
            (j,) = _targets_aligned_to(pair, i)
            french_day = "1er" if day == "1" else day
            assert pair.target[j : j + 4] == ("le", french_day, months[month], year)
            assert pair.alignment[j : j + 4] == (i, i + 1, i + 2, i + 3)
            assert day.isdigit() and year.isdigit() and 1990 <= int(year) <= 2024
            hits["1er" if day == "1" else "day"] += 1
    assert hits["day"] >= 50 and hits["1er"] >= 1


def test_contractions_are_aligned_to_the_preposition(sample: list[Pair]) -> None:
    found = Counter()
    for pair in sample:
        for word, i in zip(pair.target, pair.alignment):
            if word in ("du", "au"):
                if pair.source[i] == "within":  # "au sein de": "au" is not a contraction here
                    continue
                assert pair.source[i] in ("of", "at", "within") and pair.source[i + 1] == "the"
                found[word] += 1
    assert found["du"] > 50 and found["au"] > 10


def test_english_word_classes_do_not_overlap() -> None:
    classes = {
        "noun": {n.en for n in corpus.NOUNS} | {n.en_pl for n in corpus.NOUNS},
        "adjective": set(ADJ),
        "verb": {f for v in corpus.VERBS for f in (v.en, v.en_3sg, v.en_past, v.en_pp)},
        "month": {m for m, _ in corpus.MONTHS},
        "function": {"the", "a", "an", "some", "this", "these", "of", "that", "which", "and",
                     "by", "not", "do", "does", "did", "has", "have", "will", "be", "been",
                     "was", "were", "is", "are", "."}
                    | {w for p in corpus.PREPOSITIONS for w in p.split()},
    }  # fmt: skip
    names = list(classes)
    for a in range(len(names)):
        for b in range(a + 1, len(names)):
            assert not classes[names[a]] & classes[names[b]], (names[a], names[b])
    assert not {n.en for n in corpus.NOUNS} & {n.en_pl for n in corpus.NOUNS}  # plural visible
    assert 60 <= len(corpus.NOUNS) <= 120 and 40 <= len(corpus.ADJECTIVES) <= 60


# --------------------------------------------------------------------------------------- vocab


def test_vocab_round_trip_and_json(split: dict[str, list[Pair]]) -> None:
    src_vocab, tgt_vocab = build_vocabs(split["train"])
    assert src_vocab.itos[:4] == ["<pad>", "<bos>", "<eos>", "<unk>"]
    assert (Vocab.PAD, Vocab.BOS, Vocab.EOS, Vocab.UNK) == (0, 1, 2, 3)
    assert "économique" in tgt_vocab and "économique" not in src_vocab
    for pair in split["dev"][:200]:
        ids = tgt_vocab.encode(pair.target, add_bos_eos=True)
        assert ids[0] == Vocab.BOS and ids[-1] == Vocab.EOS
        assert tuple(tgt_vocab.decode(ids + [Vocab.PAD, Vocab.PAD])) == pair.target
        assert tuple(src_vocab.decode(src_vocab.encode(pair.source))) == pair.source
    assert src_vocab.encode(["the", "zzz-unseen"]) == [src_vocab.stoi["the"], Vocab.UNK]
    assert src_vocab.decode([Vocab.BOS, 4, Vocab.EOS, 5], strip=False)[0] == "<bos>"

    text = tgt_vocab.to_json()
    assert "é" in text  # accents stored as is, readable next to the weights
    restored = Vocab.from_json(text)
    assert restored == tgt_vocab and len(restored) == len(tgt_vocab) > 300
    assert restored.encode(["la", "zone"]) == tgt_vocab.encode(["la", "zone"])
    assert json.loads(text)["itos"][4] == tgt_vocab.itos[4]
    with pytest.raises(ValueError):
        Vocab.from_json(json.dumps({"itos": ["a", "b"]}))
