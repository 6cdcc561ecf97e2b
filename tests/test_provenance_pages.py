"""Pages that draw from another result than the sidebar's say so in their figures, headless
(AppTest reads the subtitle from the figure JSON the page sends): the causal-mask and
encoder–decoder pages name toy-translate and its own sentence, the image page the captioner and its
scene, and a text read from an uploaded file names the file."""

from __future__ import annotations

import pytest

from apphelpers import app, charts, level_maps, messages
from test_long_upload import LENGTH, llama, long_text  # noqa: F401 - llama is a fixture

from attention_viz.ui.fallback import DEMO_SOURCE

SIDEBAR = "The animal didn't cross"  # the start of the default sentence
DEMO = f"toy-translate · “{DEMO_SOURCE[:20]}"


def subtitles(at) -> list[str]:
    """The subtitle of every figure that has one (figures without a title carry none)."""
    return [spec["layout"]["title"]["subtitle"]["text"] for spec in charts(at)
            if "subtitle" in spec["layout"].get("title", {})]


@pytest.mark.slow
def test_the_causal_page_names_the_demo_model_and_its_sentence():
    at = app(view="causal")  # minilm in the sidebar: no decoder
    assert not at.exception and not at.error
    assert any(m.startswith("This view runs toy-translate: minilm has no decoder self-attention") for m in messages(at))
    lines = subtitles(at)
    assert len(lines) >= 5 and all(line.startswith(DEMO) for line in lines), lines
    assert not any(SIDEBAR in line or "minilm" in line for line in lines)


@pytest.mark.slow
def test_the_encoder_decoder_page_names_each_run_it_draws():
    at = app(view="encdec")
    assert not at.exception and not at.error
    assert any(m.startswith("This view runs toy-translate: minilm has no cross-attention") for m in messages(at))
    lines = subtitles(at)
    assert not any(SIDEBAR in line or "minilm" in line for line in lines)
    assert all(line.startswith((DEMO, f"toy-translate-rnn · “{DEMO_SOURCE[:20]}")) for line in lines), lines
    assert any(line.startswith("toy-translate-rnn · ") for line in lines)  # the RNN's alignment, beside
    assert any(" → “la zone" in line for line in lines)  # teacher forcing: the reference it read


@pytest.mark.slow
def test_the_image_page_names_the_captioner_and_the_scene():
    at = app(view="image")
    assert not at.exception and not at.error
    assert any(m.startswith("This view runs show-attend-tell: the sidebar's minilm reads text") for m in messages(at))
    lines = subtitles(at)
    assert lines and all(line.startswith("show-attend-tell · image: scene 7") for line in lines), lines


@pytest.mark.slow
def test_a_text_from_a_file_names_the_file():
    at = app(view="head")
    at.file_uploader(key="text_file").set_value(("notes.txt", b"the cat sat on the mat", "text/plain")).run()
    assert not at.exception and not at.error
    assert subtitles(at)[0].startswith("minilm · file: notes.txt")
    at.file_uploader(key="text_file").set_value(None).run()  # the box's sentence again
    assert subtitles(at)[0].startswith(f"minilm · “{SIDEBAR}")


@pytest.mark.slow
def test_an_uploaded_long_text_read_whole_names_the_file(llama):  # noqa: F811 - the fixture imported above
    at = app(view="head", model=llama)
    at.file_uploader(key="text_file").set_value(("long.txt", long_text().encode(), "text/plain")).run()
    assert not at.exception and not at.error
    assert any(f"{LENGTH + 1:,} tokens" in info.value for info in at.info)  # read whole, blockwise
    [(header, _, _)] = level_maps(at)
    assert header["subtitle"].startswith(f"{llama} · file: long.txt") and header["file"].startswith("attention-viz_hf")
