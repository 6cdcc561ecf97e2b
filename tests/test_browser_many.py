"""Many users at once against one running server: each browser session sees only its own tokens."""

import urllib.parse

from attention_viz.backends.registry import load_backend
from browser import served_app, wait_for_heatmap, x_tick_labels

# Four tabs: each page load costs Chromium ~4 CPU-s here. Many more sessions at once are
# benchmarks.load's job (30 in its table, without a browser: a step that draws another session's
# sentence counts as an error); test_load_benchmark runs it with two.
SENTENCES = [
    "Alpha bravo charlie delta",
    "Cats chase mice in barns",
    "Quantum states collapse when measured",
    "Glaciers carve deep valleys slowly",
]


def test_concurrent_sessions_on_a_cold_server_see_only_their_own_sentence(page):
    """A server of its own (its first runs all meet a cold start); four tabs, each its own session.
    The test's tab opens the other three as a person opening links in new tabs does: they share its
    renderer process, a third of the browser's CPU of separate browser contexts here."""
    backend = load_backend("minilm")
    links = [f"?{urllib.parse.urlencode({'text': sentence, 'view': 'head'})}" for sentence in SENTENCES]
    with served_app() as url:
        page.goto(f"{url}/{links[0]}", wait_until="commit")
        pages = [page]
        try:
            for link in links[1:]:  # all four sessions are running before any is checked
                with page.expect_popup() as opened:
                    page.evaluate("link => { window.open(link); }", f"{url}/{link}")
                pages.append(opened.value)
            for sentence, tab in zip(SENTENCES, pages):
                wait_for_heatmap(tab, timeout=120_000)
                labels = x_tick_labels(tab)
                assert labels == list(backend.tokenize(sentence)[0].labels), (sentence, labels)
                assert not tab.locator("[data-testid='stException']").count()
        finally:
            for popup in pages[1:]:
                popup.close()
