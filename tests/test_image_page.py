"""The Image attention page, headless: a seeded scene from the link, its true description beside
the model's caption (differing words marked) and its maps, the raw grid, another seed; an upload
said to be outside what the model learned; its pure parts load without torch."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
from PIL import Image
from streamlit.testing.v1 import AppTest

from apphelpers import TIMEOUT
from attention_viz.ui.views.image import OUTSIDE


def _page() -> None:
    from attention_viz.ui.views import image

    image.render(None)


def _scene_lines(at: AppTest) -> tuple[str, str]:
    """The page's true-description and model-caption lines, as Markdown."""
    lines = [m.value for m in at.markdown]
    truth = next(v for v in lines if v.startswith("**The scene (true description):**"))
    model = next(v for v in lines if v.startswith("**The model's caption:**"))
    return truth, model


def _words(line: str) -> str:
    """A caption line's words as the reader reads them, without the label and the red marks."""
    return re.sub(r":red\[\*\*(.*?)\*\*\]", r"\1", line.split(":**", 1)[1]).strip()


def test_scene_from_the_link_is_captioned_with_maps():
    from attention_viz.backends.registry import load_backend
    from attention_viz.trained.scenes import generate

    at = AppTest.from_function(_page, default_timeout=TIMEOUT)
    at.query_params["seed"] = "11"
    at.run()
    assert not at.exception and not at.error
    assert at.number_input(key="image_seed").value == 11
    expected = " ".join(load_backend("show-attend-tell").caption_scene(11).words)
    truth, model = _scene_lines(at)
    assert _words(truth) == " ".join(generate(11).caption) and _words(model) == expected
    assert len(at.get("plotly_chart")) == 3  # the word's map, its raw weights, the strip
    at.radio(key="image_map").set_value("raw grid").run()
    assert not at.exception and len(at.get("plotly_chart")) == 3
    at.number_input(key="image_seed").set_value(3).run()
    assert not at.exception
    assert _words(_scene_lines(at)[1]) == " ".join(load_backend("show-attend-tell").caption_scene(3).words)


def test_the_default_scene_is_described_exactly():
    """The scene a visitor sees first (seed 7: a yellow square, a blue triangle, a blue circle)."""
    at = AppTest.from_function(_page, default_timeout=TIMEOUT).run()
    assert not at.exception and at.number_input(key="image_seed").value == 7
    truth, model = _scene_lines(at)
    assert truth == model.replace("**The model's caption:**", "**The scene (true description):**")
    assert ":red[" not in truth + model
    assert "a yellow square left of a blue triangle above a blue circle" in model
    assert any("exactly the scene's description" in c.value for c in at.caption)


def _wrong_caption_page() -> None:
    """The page's caption block for scene 7 given a caption with one wrong word and one object missing."""
    import numpy as np

    from attention_viz.core.caption_result import CaptionResult
    from attention_viz.trained.scenes import generate
    from attention_viz.ui.export import drawn_from
    from attention_viz.ui.views import image

    words = tuple("a blue square left of a blue triangle".split())
    maps = np.full((len(words), 8, 8), 1 / 64, dtype=np.float32)
    caption = CaptionResult("show-attend-tell", words, maps, generate(7).image, seed=7)
    with drawn_from(caption.provenance):  # as the page does around its figures
        image._show(caption)


def test_differing_words_are_marked_in_both_lines():
    at = AppTest.from_function(_wrong_caption_page, default_timeout=TIMEOUT).run()
    assert not at.exception
    truth, model = _scene_lines(at)
    assert model == ("**The model's caption:** a :red[**blue**] square left of a blue triangle")
    assert truth == ("**The scene (true description):** a :red[**yellow**] square left of a blue triangle "
                     ":red[**above**] :red[**a**] :red[**blue**] :red[**circle**]")
    assert any("differs from the scene's description" in c.value for c in at.caption)


def test_an_upload_is_said_to_be_outside_what_the_model_learned():
    at = AppTest.from_function(_page, default_timeout=TIMEOUT).run()
    at.radio(key="image_source").set_value("upload").run()
    assert not at.exception and not at.error and not at.get("plotly_chart")
    assert not at.warning  # nothing said before there is a picture
    rng = np.random.default_rng(0)
    photo = io.BytesIO()
    Image.fromarray(rng.integers(0, 256, (90, 120, 3), dtype=np.uint8)).save(photo, format="PNG")
    at.file_uploader(key="image_upload").set_value(("photo.png", photo.getvalue(), "image/png")).run()
    assert not at.exception and not at.error
    assert [w.value for w in at.warning] == [OUTSIDE]
    assert OUTSIDE.count(".") == 1 and "outside what this model learned" in OUTSIDE  # one sentence
    assert len(at.text) == 1 and not any(m.value.startswith("**The scene") for m in at.markdown)
    assert len(at.get("plotly_chart")) == 3


def test_the_pure_parts_load_without_torch():
    """The figures, the caption result, image input and the scenes load without torch; the page
    itself never imports it (it reaches the model only through the cached backend)."""
    code = ("import sys; import attention_viz.figures.image, attention_viz.core.caption_result, attention_viz.inputs.images, "
            "attention_viz.trained.scenes, attention_viz.analysis.localization; "
            "assert 'torch' not in sys.modules, 'torch imported'")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    page = (Path(__file__).resolve().parents[1] / "attention_viz/ui/views/image.py").read_text(encoding="utf-8")
    assert "import torch" not in page and "backends" not in page
