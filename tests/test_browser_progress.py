"""A job longer than a second shows live progress with the time left, in the browser: value zeroing
of a 100-token text (six layers, each re-run on copies of its input) fills a bar layer by layer
while the page waits, and the bar is gone once the view is drawn."""

from __future__ import annotations

import time
import urllib.parse

import pytest

from browser import HEATMAP, settled, wait_for_heatmap

pytestmark = pytest.mark.slow

TEXT = " ".join(["the animal did not cross the street because it was too tired and the road was wide"] * 6)


def test_value_zeroing_shows_its_progress_then_the_heatmap(app_url, page):
    page.goto(f"{app_url}/?{urllib.parse.urlencode({'text': TEXT, 'view': 'head', 'weighting': 'value_zeroing'})}")
    seen: set[str] = set()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not page.locator(HEATMAP).count():  # drawn once the job is done
        seen |= {text for text in page.locator("[data-testid='stProgress']").all_inner_texts() if text}
        page.wait_for_timeout(100)
    wait_for_heatmap(page)
    settled(page)
    assert any(text.startswith("Value zeroing, encoder layers: ") and "left" in text for text in seen), seen
    assert page.locator("[data-testid='stProgress']").count() == 0
