"""ui/narrow_charts.js's arithmetic without a browser (node runs it on a stub chart): token labels sized
and turned so every token is labelled in the width drawn (the rule of text_width.fitted_ticks), thinned
only below 7 px, subtitles wrapped when wider than the chart. Chromium checks the drawing itself
(tests/test_browser_labels.py)."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
from pathlib import Path

import pytest

from attention_viz.figures.text_width import fitted_ticks

ROOT = Path(__file__).resolve().parents[1]
SUBTITLE = "minilm · “The trophy didn't fit in the suitcase because it was too big.” · layer 3 · head 1"
pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")


def relayout(width: int, window: int, keys: int, plot: tuple[int, int], title: float = 100,
             subtitle: float = 500, label: float = 30) -> dict:
    given = dict(width=width, window=window, keys=keys, rows=keys, plot=plot, title=title, subtitle=subtitle,
                 subtitle_text=SUBTITLE, label=label)
    out = subprocess.run(["node", str(ROOT / "tests" / "narrow_charts_harness.js"),
                          str(ROOT / "attention_viz" / "ui" / "narrow_charts.js"), json.dumps(given)],
                         capture_output=True, text=True, check=True).stdout
    updates = json.loads(out)
    return updates[0] if updates else {}


def test_a_chart_whose_labels_fit_is_left_as_drawn():
    assert relayout(780, 1280, 14, (525, 300)) == {}


@pytest.mark.parametrize("keys, width", [(14, 132), (14, 230), (40, 525), (64, 549), (64, 900)])
def test_every_key_is_labelled_at_the_largest_size_that_fits_as_python_computes_it(keys, width):
    update = relayout(width + 250, 1280, keys, (width, 300))
    shown, every, size = fitted_ticks(keys, width, 60)
    angle = -60
    if size < 12:
        shown, every, size = fitted_ticks(keys, width, 90)
        angle = -90
    if (every, size, angle) == (1, 12, -60):
        assert "xaxis.tickvals" not in update
    else:
        assert len(update["xaxis.tickvals"]) == shown and update["xaxis.tickfont.size"] == size
        assert update["xaxis.tickangle"] == angle
        assert update["xaxis.ticktext"][:2] == ["t0", f"t{every}"]  # the token text, position prefix dropped


def test_a_subtitle_wider_than_its_chart_wraps_and_the_margin_grows():
    update = relayout(382, 1280, 14, (132, 300), subtitle=700)
    lines = update["title.subtitle.text"].split("<br>")
    assert len(lines) == 2 and " ".join(lines) == SUBTITLE
    assert update["margin.t"] == 153 + 18 and update["height"] == 486 + 18


def test_labels_turned_upright_get_the_room_they_reach_into_above_the_plot():
    """30 keys in 525 px: -60° leaves 15 px between neighbours, upright 17.5 px holds 12 px labels, whose
    widest (120 px) then reaches 120 px up instead of 120 sin 60° + 1.3 × 12 cos 60°."""
    update = relayout(775, 1280, 30, (525, 600), label=120)
    assert update["xaxis.tickangle"] == -90 and update["xaxis.tickfont.size"] == 12
    grown = 120 - (120 * math.sin(math.radians(60)) + 1.3 * 12 * math.cos(math.radians(60)))
    assert update["margin.t"] == 153 + math.ceil(grown) + 2 and update["height"] == 486 + math.ceil(grown) + 2
    assert "margin.t" not in relayout(382, 1280, 14, (132, 300), subtitle=300, label=60)  # smaller: no more room
