"""The page with a long text, headless: a compressed link opens to its text (a damaged one to the default
sentence and a message), and a text past the model's limit is read in the window the link names."""

from __future__ import annotations

import pytest
from apphelpers import app, level_maps, messages
from prose import english_prose

from attention_viz.backends.registry import load_backend
from attention_viz.figures.axes import shorten
from attention_viz.inputs.link_text import PARAM, encode
from attention_viz.inputs.window import split
from attention_viz.ui.state import DEFAULT_TEXT

pytestmark = pytest.mark.slow  # each test runs minilm on a window of 512 tokens


@pytest.fixture(scope="module")
def text() -> str:
    return english_prose(3_000)


def link(at) -> dict[str, str]:
    return {k: (v[0] if isinstance(v, list) else v) for k, v in at.query_params.items()}


def drawn_keys(at, n: int = 8) -> list[str]:
    """The first ``n`` keys of the head view's heatmap, as it names them."""
    header, _, _ = level_maps(at)[0]
    return header["key_names"][:n]


def keys_of(text: str, n: int = 8) -> list[str]:
    labels = load_backend("minilm").tokenize(text)[0].labels
    return [f"{i}: {shorten(label)}" for i, label in enumerate(labels[:n])]


def test_a_compressed_link_opens_its_window_and_a_slider_moves_it(text):
    windows = split(text, load_backend("minilm").tokenize)
    total = windows[-1].first + windows[-1].count
    at = app(**{PARAM: encode(text), "view": "head", "window": "3"})
    assert not at.exception and not at.error
    assert at.text_area(key="text").value == text
    third = windows[2]
    assert messages(at) == [f"The text has {total:,} tokens, more than the model's 512: the views show "
                            f"{third.label(total)} (window 3 of {len(windows)}); the sidebar's “Window of the "
                            "text” slider picks another."]
    assert drawn_keys(at) == keys_of(third.of(text)) != keys_of(text)  # drawn from the third window
    assert link(at)["window"] == "3" and PARAM in link(at) and "text" not in link(at)
    at.select_slider(key="window").set_value(1).run()
    assert drawn_keys(at) == keys_of(text) and link(at)["window"] == "1"


def test_a_text_that_fits_has_no_window_slider_and_keeps_a_plain_link():
    at = app(text="Paris is the capital of France.", window="4")
    assert not at.exception and not messages(at)
    assert not at.get("select_slider") or all(s.key != "window" for s in at.select_slider)
    assert "window" not in link(at) and link(at)["text"] == "Paris is the capital of France."


@pytest.mark.parametrize("damage", ["cut", "noise"])
def test_a_damaged_compressed_link_shows_the_default_sentence_and_says_why(text, damage):
    value = encode(text[:5_000])
    value = value[: len(value) // 2] if damage == "cut" else value[:10] + "!*" + value[12:]
    at = app(**{PARAM: value, "view": "head"})
    assert not at.exception and not at.error
    assert at.text_area(key="text").value == DEFAULT_TEXT
    said = [m for m in messages(at) if m.startswith("The link's sentence could not be read: the compressed text is")]
    assert len(said) == 1 and said[0].endswith("The page shows the default sentence instead.")
    at.text_area(key="text").set_value("A sentence of my own.").run()
    assert not messages(at)  # said until the user gives the page a text of their own
