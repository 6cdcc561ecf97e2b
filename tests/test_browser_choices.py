"""Choices do exactly what was typed, in Chromium: in Head ablation, "3.1" and Enter removes head 3.1
alone (Streamlit's highlighted first row was "Select 3 matches": 3.1, 3.10 and 3.11)."""

from __future__ import annotations

import urllib.parse

import pytest

from browser import settled, wait_for_link

pytestmark = pytest.mark.slow

TIRED = "The animal didn't cross the street because it was too tired."


def test_typing_a_head_and_enter_removes_that_head_alone(app_url, page):
    page.goto(f"{app_url}/?{urllib.parse.urlencode({'view': 'ablation', 'text': TIRED, 'study': '0'})}")
    settled(page)
    box = page.locator("[data-testid='stMultiSelect']").filter(has_text="Heads to remove").locator("input")
    box.click()
    box.type("3.1")
    box.press("Enter")
    page.keyboard.press("Escape")
    assert wait_for_link(page, {"ablate": "3.1"})["ablate"] == "3.1"
    settled(page)
