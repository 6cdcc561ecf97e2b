"""A link that carries a 2,500-word text, compressed, in a real browser: the page opens with the text in
the sentence box and draws its first window, and the link the page gives back stays under 8 KB."""

from __future__ import annotations

import urllib.parse

import pytest
from prose import english_prose

from attention_viz.inputs.link_text import PARAM, decode, link_value
from browser import settled, shared_link, wait_for_heatmap, wait_for_link

LINK_BYTES = 8_192
pytestmark = pytest.mark.slow  # the served app and Chromium, and a model run of 512 tokens


def test_a_compressed_2500_word_link_opens_to_its_text_drawn_and_gives_back_a_link_under_8_kb(app_url, page):
    text = english_prose(2_500)
    name, value = link_value(text)
    assert name == PARAM
    page.goto(f"{app_url}/?{urllib.parse.urlencode({'model': 'minilm', PARAM: value, 'view': 'head'})}")
    wait_for_heatmap(page)  # the first window's ~510 tokens: our levels element
    wait_for_link(page, {"window": "1", "view": "head"})
    settled(page)
    assert page.locator("textarea[aria-label='Sentence']").input_value() == text
    page.get_by_text("(window 1 of", exact=False).first.wait_for()
    shared = shared_link(page)
    for link in (shared, page.url):
        size = len(link.encode("utf-8"))
        print(f"link read back: {size:,} bytes")
        assert size <= LINK_BYTES
        query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(link).query))
        assert "text" not in query and decode(query[PARAM], 20_000) == text
