"""Shared helpers for the AppTest (headless Streamlit) tests."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
from streamlit.testing.v1 import AppTest

from attention_viz.figures.level_canvas import read_payload

APP = str(Path(__file__).resolve().parents[1] / "app.py")
TIMEOUT = 120  # a cold model load is longer than AppTest's default 3 s


def app(**params: str) -> AppTest:
    """The app run once with these query parameters."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    for key, value in params.items():
        at.query_params[key] = value
    return at.run()


def charts(at: AppTest) -> list[dict]:
    """Every Plotly figure on the page, as the JSON Streamlit sends."""
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def level_maps(at: AppTest) -> list[tuple[dict, np.ndarray, np.ndarray]]:
    """Every levels heatmap on the page (our own element, ui/level_canvas.py): header, palette, levels."""
    return [read_payload(element.proto.bytes) for element in at.get("bidi_component")
            if element.proto.component_name == "attention_viz.level_canvas"]


CODE_SPAN = re.compile(r"(?<![\\`])(`+) ?(.*?) ?\1(?!`)")


def plain(markdown: str) -> str:
    """A message as the user reads it: the page escapes user text for Markdown and puts anything
    link-like in code spans (ui/plain.py)."""
    parts = CODE_SPAN.split(markdown)  # [text, fence, code, text, fence, code, ..., text]
    texts = [re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", t) for t in parts[::3]]
    return "".join(t + (parts[3 * i + 2] if 3 * i + 2 < len(parts) else "") for i, t in enumerate(texts))


def outside_code(markdown: str) -> str:
    """What Markdown interprets: the text with its code spans removed."""
    return CODE_SPAN.sub("", markdown)


def messages(at: AppTest) -> list[str]:
    """Every error, warning and info box on the page, as the user reads it."""
    return [plain(m.value) for m in (*at.error, *at.warning, *at.info)]


def switch_view(at: AppTest, view: str) -> AppTest:
    """Pick ``view`` in the sidebar: the radio of its section (Learn or Explore)."""
    for radio in at.sidebar.radio:
        if radio.key.startswith("nav_") and radio.format_func(view) in radio.options:
            return radio.set_value(view).run()
    raise KeyError(view)
