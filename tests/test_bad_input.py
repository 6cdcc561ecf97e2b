"""Hostile and odd input, in the app (AppTest) and on the command line: a clear message or a
correct result, never a traceback, and the user's text is kept."""

import re
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from apphelpers import APP, messages, outside_code
from attention_viz.cli import main


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


# A lone surrogate cannot reach the app: browsers and URLs carry only valid UTF-8 (the command
# line can receive one from undecodable bytes, so it is tested there).
APP_TEXTS = [name for name in TEXTS if name != "lone surrogate"]


@pytest.fixture(scope="module")
def session() -> AppTest:
    """One browser session that every text below is typed into in turn, as a user retyping the box:
    a fresh app per text would first draw the default sentence again, once per text."""
    return AppTest.from_file(APP, default_timeout=120).run()


@pytest.mark.parametrize("name", APP_TEXTS)
def test_app_handles_it(name, session):
    text = TEXTS[name]
    at = session
    at.text_area(key="text").set_value(text).run()
    assert not at.exception, at.exception
    charts = at.get("plotly_chart")
    assert charts or messages(at), "neither a figure nor a message"
    assert at.text_area(key="text").value == text  # the user's text is kept
    if not text.strip():
        assert any("Type a sentence" in m for m in messages(at))
    if name == "10k characters":
        assert any("were dropped" in m for m in messages(at))


@pytest.mark.parametrize("name", list(TEXTS))
def test_command_line_handles_it(name, tmp_path, capsys):
    out = tmp_path / "r.npz"
    code = main(["run", "--model", "minilm", "--text", TEXTS[name], "--out", str(out)])
    captured = capsys.readouterr()
    if code == 0:
        data = np.load(out)
        assert data["encoder.layers.5.self_attn.pattern"].shape[1] == len(data["tokens"])
        if name == "10k characters":
            assert "dropped" in captured.out and len(data["tokens"]) == 512
    else:
        assert captured.err.startswith("error: ") and captured.err.count("\n") == 1, captured.err
        assert "Traceback" not in captured.err
    if name in ("empty", "whitespace", "newlines only", "zero-width only", "lone surrogate"):
        assert code != 0


@pytest.mark.parametrize("model", ["gpt-17", "hf:", "hf:/no/such/folder", "MINILM", "minilm; rm -rf /"])
def test_unknown_models_get_one_line(model, tmp_path, capsys):
    assert main(["run", "--model", model, "--text", "hi", "--out", str(tmp_path / "r.npz")]) != 0
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1


def test_unknown_model_in_a_link_is_named_in_the_app():
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["model"] = "gpt-17"
    at.run()
    assert not at.exception
    assert any("unknown model 'gpt-17'" in m for m in messages(at))
    assert at.get("plotly_chart")  # and the default model still shows the sentence


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
