"""Many users at once against one running server: each browser session sees only its own tokens."""

import urllib.parse

from attention_viz.backends.registry import load_backend
from browser import chromium, served_app, wait_for_heatmap, x_tick_labels

SENTENCES = [
    "Alpha bravo charlie delta",
    "Cats chase mice in barns",
    "Rivers flow toward the sea",
    "Quantum states collapse when measured",
    "Bread rises in a warm oven",
    "Violins play a quiet melody",
    "Glaciers carve deep valleys slowly",
    "Engineers test bridges with weights",
]


def test_eight_concurrent_sessions_see_only_their_own_sentence():
    backend = load_backend("minilm")
    with served_app() as url, chromium() as browser:
        pages = []
        for sentence in SENTENCES:  # all eight sessions are running before any is checked
            page = browser.new_context(reduced_motion="reduce").new_page()
            page.goto(f"{url}/?{urllib.parse.urlencode({'text': sentence, 'view': 'head'})}", wait_until="commit")
            pages.append(page)
        for sentence, page in zip(SENTENCES, pages):
            wait_for_heatmap(page, timeout=120_000)
            labels = x_tick_labels(page)
            assert labels == list(backend.tokenize(sentence)[0].labels), (sentence, labels)
            assert not page.locator("[data-testid='stException']").count()
