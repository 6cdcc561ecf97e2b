"""The Image attention page, headless: a seeded scene from the link, its caption and maps, the raw
grid, another seed; its pure parts load without torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from streamlit.testing.v1 import AppTest

from apphelpers import TIMEOUT


def _page() -> None:
    from attention_viz.ui.views import image

    image.render(None)


def test_scene_from_the_link_is_captioned_with_maps():
    from attention_viz.backends.registry import load_backend

    at = AppTest.from_function(_page, default_timeout=TIMEOUT)
    at.query_params["seed"] = "11"
    at.run()
    assert not at.exception and not at.error
    assert at.number_input(key="image_seed").value == 11
    expected = " ".join(load_backend("show-attend-tell").caption_scene(11).words)
    assert [t.value for t in at.text] == [expected]
    assert len(at.get("plotly_chart")) == 3  # the word's map, its raw weights, the strip
    at.radio(key="image_map").set_value("raw grid").run()
    assert not at.exception and len(at.get("plotly_chart")) == 3
    at.number_input(key="image_seed").set_value(3).run()
    assert not at.exception
    assert [t.value for t in at.text] == [" ".join(load_backend("show-attend-tell").caption_scene(3).words)]


def test_upload_mode_waits_for_a_file():
    at = AppTest.from_function(_page, default_timeout=TIMEOUT).run()
    at.radio(key="image_source").set_value("upload").run()
    assert not at.exception and not at.error and not at.get("plotly_chart")


def test_the_pure_parts_load_without_torch():
    """The figures, the caption result, image input and the scenes load without torch; the page
    itself never imports it (it reaches the model only through the cached backend)."""
    code = ("import sys; import attention_viz.figures.image, attention_viz.caption, attention_viz.images, "
            "attention_viz.trained.scenes, attention_viz.analysis.localization; "
            "assert 'torch' not in sys.modules, 'torch imported'")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    page = (Path(__file__).resolve().parents[1] / "attention_viz/ui/views/image.py").read_text(encoding="utf-8")
    assert "import torch" not in page and "backends" not in page
