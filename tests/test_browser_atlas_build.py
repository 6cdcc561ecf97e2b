"""The atlas page's build, as a person sees it: a click starts it, the page shows its progress with
no Refresh button to press, and when the build is done the atlas opens by itself, without a reload.
(The served app builds 48 probes here: ATTENTION_VIZ_ATLAS_CORPUS in conftest.py.)"""

from __future__ import annotations

import urllib.parse

import pytest

from browser import settled, wait_for_link

pytestmark = pytest.mark.slow


def test_a_build_shows_its_progress_then_opens_the_atlas_without_a_reload(app_url, page):
    page.goto(f"{app_url}/?{urllib.parse.urlencode({'view': 'atlas', 'atlas': 'progress-check'})}")
    wait_for_link(page, {"view": "atlas"})
    settled(page)
    loads = []
    page.on("load", lambda _: loads.append(1))
    page.get_by_role("button", name="Build the probes atlas of minilm").click()
    progress = page.get_by_text("Building the probes atlas", exact=False)
    progress.first.wait_for(timeout=60_000)
    assert page.get_by_role("button", name="Refresh").count() == 0
    # the atlas's own caption ("minilm on probes:48: 48 sentences, …") appears with no reload
    page.get_by_text("48 sentences, 0 skipped", exact=False).first.wait_for(timeout=300_000)
    assert loads == []
    assert progress.count() == 0
    shown = page.evaluate("() => document.body.innerText")
    assert "/" + "tmp" not in shown and "attention-viz-atlas-" not in shown  # no server path on the page
