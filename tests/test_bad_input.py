"""Hostile and odd input, in the app (AppTest) and on the command line: each text gets its one
outcome, the tokens the model reads or the one message saying why nothing is read; never a traceback,
and the user's text is kept."""

import re
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from apphelpers import APP, charts, level_maps, messages, outside_code
from attention_viz.cli import main
from attention_viz.figures.axes import plotly_text, shorten


TEXTS = {
    "empty": "",
    "whitespace": "   \t  ",
    "newlines only": "\n\n\r\n",
    "10k characters": ("The quick brown fox jumps over the lazy dog. " * 230)[:10_000],
    "emoji": "I ❤️ attention 🤖🚀 👩‍👩‍👧‍👦",
    "emoji only": "🤖" * 40,
    "chinese": "我喜欢吃苹果",
    "japanese": "東京は日本の首都です",
    "korean": "안녕하세요 세계",
    "arabic": "القطة جلست على السجادة",
    "hebrew": "שלום עולם",
    "mixed direction": "abc שלום 123 مرحبا def",
    "rtl override": "\u202eevil\u202c text",
    "zero-width only": "\u200b\u200c\u200d\ufeff",
    "zero-width inside": "Hello\u200bworld and\u200dmore",
    "combining": "e\u0301le\u0300ve Z̷̢a̸l̵g̶o̷",
    "control characters": "\x01\x02\x1b[31mred\x1b[0m",
    "nul": "a\x00b c\x00",
    "script tag": "<script>alert('x')</script> hello",
    "img onerror": '<img src=x onerror="alert(1)"> cat',
    "svg onload": "\"'><svg onload=alert(1)>",
    "html entities": "&lt;b&gt; &amp; &#60;script&#62;",
    "markdown and latex": "**bold** _it_ `code` $x^2$ $$\\frac{1}{0}$$ [link](javascript:alert(1))",
    "one 2,000-character word": "a" * 2000,
    "special tokens only": "[CLS] [SEP] [MASK]",
    "special tokens mixed": "[PAD] [UNK] <s></s> <pad> <|endoftext|>",
    "512 masks": " ".join(["[MASK]"] * 600),
    "punctuation only": "!!! ??? ... ;;; ---",
    "numbers": "3.14159 2.71828 1e10 -0 0x1F",
    "url": "https://example.com/?q=<x>&y=1#frag",
    "sql": "'; DROP TABLE users; --",
    "tabs and newlines": "line one\nline two\r\nline\tthree",
    "lone surrogate": "bad \ud800 text",
}


# What each text must give: the tokens the model reads (display labels cut from the text, between
# [CLS] and [SEP]), or the one message that says why nothing is read.
EMPTY = "the text is empty"
EXPECTED: dict[str, list[str] | str] = {
    "empty": EMPTY,
    "whitespace": EMPTY,
    "newlines only": EMPTY,
    "10k characters": (["The", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog", "."] * 51),
    "emoji": ["I", "❤️", "attention", "🤖🚀", "👩\u200d👩\u200d👧\u200d👦"],  # one label per word, each [UNK]
    "emoji only": ["🤖" * 40],
    "chinese": ["我", "喜", "欢", "吃", "苹", "果"],
    "japanese": ["東", "京", "は", "日", "本", "の", "首", "都", "で", "す"],
    # the tokenizer splits a Hangul syllable into its letters (jamo): each piece shows the syllable it is cut from
    "korean": ["안", "안", "안", "녕", "녕", "녕", "하", "하", "세", "세", "요", "요", "세계"],
    "arabic": ["ا", "ل", "ق", "ط", "ة", "ج", "ل", "س", "ت", "ع", "ل", "ى", "ا", "ل", "س", "ج", "ا", "د", "ة"],
    "hebrew": ["ש", "ל", "ו", "ם", "ע", "ו", "ל", "ם"],
    "mixed direction": ["abc", "ש", "ל", "ו", "ם", "123", "م", "ر", "ح", "ب", "ا", "def"],
    "rtl override": ["evil\u202c", "text"],  # the override itself is dropped by the tokenizer
    "zero-width only": "the text has nothing the model can read (only invisible or control characters)",
    "zero-width inside": ["Hello\u200b", "world", "and\u200d", "more"],
    "combining": ["e\u0301l", "e\u0300ve", "Z̷̢a̸", "l̵", "g̶o̷"],
    "control characters": ["[", "31", "m", "red", "[", "0", "m"],
    "nul": ["a␀b", "c"],  # NUL shown as its picture, never as a raw NUL
    "script tag": ["<", "script", ">", "alert", "(", "'", "x", "'", ")", "<", "/", "script", ">", "hello"],
    "img onerror": ["<", "im", "g", "sr", "c", "=", "x", "one", "rro", "r", "=", '"', "alert", "(", "1", ")", '"', ">",
                    "cat"],
    "svg onload": ['"', "'", ">", "<", "sv", "g", "on", "load", "=", "alert", "(", "1", ")", ">"],
    "html entities": ["&", "lt", ";", "b", "&", "gt", ";", "&", "amp", ";", "&", "#", "60", ";", "script", "&", "#",
                      "62", ";"],
    "markdown and latex": ["*", "*", "bold", "*", "*", "_", "it", "_", "`", "code", "`", "$", "x", "^", "2", "$", "$",
                           "$", "\\", "fra", "c", "{", "1", "}", "{", "0", "}", "$", "$", "[", "link", "]", "(",
                           "java", "script", ":", "alert", "(", "1", ")", ")"],
    "one 2,000-character word": ["a" * 2000],
    "special tokens only": ["[CLS]", "[SEP]", "[MASK]"],  # typed special tokens are the model's own
    "special tokens mixed": ["[PAD]", "[UNK]", "<", "s", ">", "<", "/", "s", ">", "<", "pad", ">", "<", "|", "end",
                             "oft", "ex", "t", "|", ">"],
    "512 masks": ["[MASK]"] * 510,
    "punctuation only": ["!", "!", "!", "?", "?", "?", ".", ".", ".", ";", ";", ";", "-", "-", "-"],
    "numbers": ["3", ".", "141", "59", "2", ".", "71", "8", "28", "1", "e", "10", "-", "0", "0", "x", "1", "F"],
    "url": ["https", ":", "/", "/", "example", ".", "com", "/", "?", "q", "=", "<", "x", ">", "&", "y", "=", "1", "#",
            "fra", "g"],
    "sql": ["'", ";", "DROP", "TABLE", "users", ";", "-", "-"],
    "tabs and newlines": ["line", "one", "line", "two", "line", "three"],
    "lone surrogate": "the text is not valid Unicode (character 5 is a lone surrogate)",
}
DROPPED = {"10k characters": 1712, "512 masks": 90}  # tokens past minilm's 512
TYPE_A_SENTENCE = "Type a sentence in the sidebar (or pick an example) to see its attention."

# A lone surrogate cannot reach the app: browsers and URLs carry only valid UTF-8 (the command
# line can receive one from undecodable bytes, so it is tested there).
APP_TEXTS = [name for name in TEXTS if name != "lone surrogate"]


def test_every_text_has_its_one_outcome():
    assert EXPECTED.keys() == TEXTS.keys()


@pytest.fixture(scope="module")
def session() -> AppTest:
    """One browser session that every text below is typed into in turn, as a user retyping the box:
    a fresh app per text would first draw the default sentence again, once per text."""
    return AppTest.from_file(APP, default_timeout=120).run()


@pytest.mark.parametrize("name", APP_TEXTS)
def test_app_handles_it(name, session):
    text, expected = TEXTS[name], EXPECTED[name]
    at = session
    at.text_area(key="text").set_value(text).run()
    assert not at.exception, at.exception
    assert at.text_area(key="text").value == text  # the user's text is kept
    if expected == EMPTY:
        assert messages(at) == [TYPE_A_SENTENCE] and not charts(at) and not level_maps(at)
    elif isinstance(expected, str):
        assert messages(at) == [expected] and not charts(at) and not level_maps(at)
    elif name in DROPPED:  # 512 × 512: the levels element, with every token's label of the first window
        total = 510 + DROPPED[name]  # windows of 510 tokens and [CLS], [SEP]: its cuts fall between words
        assert messages(at) == [f"The text has {total:,} tokens, more than the model's 512: the views show tokens "
                                f"1–510 of {total:,} (window 1 of {-(-total // 510)}); the sidebar's “Window of the "
                                "text” slider picks another."]
        [(header, _, _)] = level_maps(at)
        assert header["query_names"] == [f"{i}: {label}" for i, label in enumerate(["[CLS]", *expected, "[SEP]"])]
    else:
        assert messages(at) == []
        ticks = charts(at)[0]["layout"]["xaxis"]["ticktext"]
        assert ticks == [plotly_text(shorten(label)) for label in ["[CLS]", *expected, "[SEP]"]]


@pytest.mark.parametrize("name", list(TEXTS))
def test_command_line_handles_it(name, tmp_path, capsys):
    out = tmp_path / "r.npz"
    code = main(["run", "--model", "minilm", "--text", TEXTS[name], "--out", str(out)])
    captured = capsys.readouterr()
    expected = EXPECTED[name]
    if isinstance(expected, str):
        message = "--text is empty: give a sentence" if expected == EMPTY else expected
        assert (code, captured.err, captured.out) == (2, f"error: {message}\n", "")
        assert not out.exists()
        return
    assert code == 0 and captured.err == ""
    with np.load(out) as data:
        assert list(data["tokens"]) == ["[CLS]", *expected, "[SEP]"]
        assert data["encoder.layers.5.self_attn.pattern"].shape == (12, len(expected) + 2, len(expected) + 2)
    note = f" ({DROPPED[name]} tokens beyond the model's 512 were dropped)" if name in DROPPED else ""
    assert captured.out == f"wrote {out}: 6 arrays over {len(expected) + 2} tokens{note}\n"


@pytest.mark.parametrize("model, says", [
    ("gpt-17", "unknown model 'gpt-17'; available: minilm, "),
    ("hf:", "hf: needs a hub id or a local folder, e.g. hf:./my-model"),
    ("hf:/no/such/folder", "model folder /no/such/folder does not exist"),
    ("MINILM", "unknown model 'MINILM'; available: minilm, "),
    ("minilm; rm -rf /", "unknown model 'minilm; rm -rf /'; available: minilm, "),
])
def test_unknown_models_get_one_line(model, says, tmp_path, capsys):
    assert main(["run", "--model", model, "--text", "hi", "--out", str(tmp_path / "r.npz")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {says}") and err.count("\n") == 1, err


def test_unknown_model_in_a_link_is_named_in_the_app():
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["model"] = "gpt-17"
    at.run()
    assert not at.exception
    assert any("unknown model 'gpt-17'" in m for m in messages(at))
    assert charts(at)[0]["layout"]["xaxis"]["ticktext"][:3] == ["[CLS]", "The", "animal"]  # the default model's


def write_folder(root: Path, files: dict[str, bytes]) -> Path:
    root.mkdir()
    for name, content in files.items():
        (root / name).write_bytes(content)
    return root


def test_pickle_only_folder_is_refused(tmp_path, capsys):
    folder = write_folder(tmp_path / "pickled", {"config.json": b'{"model_type": "bert"}', "pytorch_model.bin": b"\x80\x04"})
    assert main(["run", "--model", f"hf:{folder}", "--text", "hi", "--out", str(tmp_path / "r.npz")]) != 0
    assert re.search(r"pickle checkpoint .*safetensors only", capsys.readouterr().err)


def test_corrupt_config_is_reported_with_its_position(tmp_path, capsys):
    folder = write_folder(tmp_path / "corrupt", {"config.json": b'{"model_type": "bert",', "model.safetensors": b""})
    assert main(["run", "--model", f"hf:{folder}", "--text", "hi", "--out", str(tmp_path / "r.npz")]) != 0
    err = capsys.readouterr().err
    assert "config.json" in err and "line 1" in err and err.count("\n") == 1


def test_a_path_that_is_a_file_is_refused(tmp_path, capsys):
    file = tmp_path / "model.txt"
    file.write_text("not a model")
    assert main(["run", "--model", f"hf:{file}", "--text", "hi", "--out", str(tmp_path / "r.npz")]) != 0
    assert "is not a folder" in capsys.readouterr().err


# ---------------------------------------------------------------- Markdown and LaTeX from a link

MARKDOWN_PAYLOADS = [
    "[Click here to log in](https://evil.example/login)",
    "![x](https://evil.example/pixel.png)",
    "$\\href{https://evil.example}{\\text{click}}$",
    ":red[alarm] **bold** <https://evil.example> www.evil.example",
]
MARKDOWN_ELEMENTS = ("error", "warning", "info", "caption", "markdown", "subheader", "title", "header")


def markdown_bodies(at: AppTest) -> list[str]:
    """The Markdown source of every element Streamlit renders as Markdown."""
    return [element.value for kind in MARKDOWN_ELEMENTS for element in getattr(at, kind)]


@pytest.mark.parametrize("payload", MARKDOWN_PAYLOADS)
@pytest.mark.parametrize("where", ["model", "hf model", "text in token focus", "text in compare"])
def test_user_text_reaches_markdown_only_escaped(payload, where):
    """Whatever a link carries shows character for character: never as a link, an image, math or colour."""
    at = AppTest.from_file(APP, default_timeout=120)
    params = {
        "model": {"model": payload},
        "hf model": {"model": f"hf:{payload}"},
        "text in token focus": {"text": f"{payload} it", "view": "focus"},
        "text in compare": {"text": "the cat", "view": "compare", "mode": "sentences", "text_b": payload},
    }[where]
    at.query_params.update(params)
    at.run()
    assert not at.exception
    bodies = markdown_bodies(at)
    assert bodies
    for body in bodies:  # the payload may be there only with every punctuation character escaped
        assert payload not in body and "](" not in body, body
        assert not re.search(r"(?<!\\)\$|(?<!`)https?://|(?<!`)www\.", outside_code(body)), body
    if where in ("model", "hf model"):
        assert any("evil.example" in m for m in messages(at))  # ... and the user still reads it
