"""In a real browser (Debian's Chromium, headless, driven by Playwright as tests/browser.py does):

* cold start: ``make run`` started → the default page's heatmap drawn; and of it, the first visit:
  the fresh server answering (nothing run yet, no model loaded) → the page's heatmap drawn, and of that
  the server: → the first heatmap's message received by the page (the machine's clock on both sides);
* shared link → heatmap: a link with a sentence the server has not run, opened in a tab that has shown
  the app before (a browser already open) → that sentence's heatmap drawn (page bootstrap included);
* Enter → heatmap: a new text typed into "Sentence", Enter pressed → the heatmap's x tick labels
  are the new text's (long inputs show every k-th token, at most 64 ticks);
* of which the server: Enter → the heatmap's message received by the page (the first websocket
  message after Enter that carries a heatmap trace or our levels element), both read on the page's
  own clock (``performance.now()``): Playwright reports websocket frames to the benchmark late, at
  times together with the drawn check. The rest is the browser drawing it.
"""

from __future__ import annotations

import sys
import time
import urllib.parse
from pathlib import Path

from attention_viz.backends.base import Backend
from attention_viz.figures.axes import ticked

from .texts import text_of_tokens

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from browser import chromium, served_app, wait_for_heatmap  # noqa: E402  (the tests' helpers)

# A Plotly heatmap's x tick labels, or those of our levels element (ui/level_canvas.js: 512 tokens)
TICKS_SHOWN = """expected => {
    const same = ticks => ticks.length === expected.length && ticks.every((t, i) => t === expected[i]);
    const levels = document.querySelector('.avlc[data-drawn]');
    if (levels && same([...levels.querySelectorAll('.avlc-xtick')].map(e => e.textContent))) return true;
    const plot = document.querySelector('.js-plotly-plot');
    if (!plot || !plot.querySelector('.heatmaplayer image, .hm image')) return false;
    return same([...plot.querySelectorAll('.xtick text')].map(e => e.textContent));
}"""
# Before the app's scripts: the machine's clock at the first websocket message that carries a heatmap
# (the first visit's), and the page's clock at Ctrl+Enter and at the first such message after it
# (Streamlit's websocket messages are binary protobuf; the markers are plain bytes).
CLOCK = """(() => {
    const markers = ['"type":"heatmap"', 'attention_viz.level_canvas'];
    const bytes = new TextDecoder('latin1');
    const Native = window.WebSocket;
    window.WebSocket = class extends Native {
        constructor(...args) {
            super(...args);
            this.addEventListener('message', event => {
                const entered = window.__enterAt !== undefined && window.__heatmapAt === undefined;
                if (window.__firstHeatmapAt !== undefined && !entered) return;
                const data = event.data;
                const text = typeof data === 'string' ? data : bytes.decode(new Uint8Array(data));
                if (!markers.some(m => text.includes(m))) return;
                if (window.__firstHeatmapAt === undefined) window.__firstHeatmapAt = Date.now() / 1000;
                if (entered) window.__heatmapAt = performance.now();
            });
        }
    };
    document.addEventListener('keydown', event => {
        if (event.key === 'Enter' && event.ctrlKey) [window.__enterAt, window.__heatmapAt] = [performance.now(), undefined];
    }, true);
})();"""


def expected_ticks(backend: Backend, text: str) -> list[str]:
    """The x tick labels the head view draws for ``text`` (figures/axes.py: every k-th token)."""
    labels = backend.tokenize(text)[0].labels
    return [labels[i] for i in ticked(len(labels))]


def cold_start(timeout_ms: float) -> tuple[float, float, float]:
    """Seconds from starting ``make run`` to the default page's heatmap (the browser already open),
    of them those from the server's first answer (the first visit of a fresh server), and of those the
    ones until the heatmap's message reached the page."""
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.add_init_script(CLOCK)
        start = time.perf_counter()
        with served_app() as url:
            serving, serving_at = time.perf_counter(), time.time()
            page.goto(url)
            wait_for_heatmap(page, timeout=timeout_ms)
            drawn = time.perf_counter()
            message = page.evaluate("() => window.__firstHeatmapAt") - serving_at
            return drawn - start, drawn - serving, message


def link_to_heatmap(backend: Backend, reps: int, timeout_ms: float) -> list[float]:
    """Seconds from opening a shared link (the head view of a sentence the server has not run) in a
    tab that has shown the app before, to that sentence's heatmap."""
    times = []
    with chromium() as browser, served_app() as url:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(url)
        wait_for_heatmap(page, timeout=timeout_ms)
        for variant in range(500, 501 + reps):  # the first one warms this tab's way to a link up
            text = text_of_tokens(backend, 16, variant)
            link = f"{url}/?{urllib.parse.urlencode({'model': 'minilm', 'text': text, 'view': 'head', 'layer': '3', 'head': '1'})}"
            start = time.perf_counter()
            page.goto(link)
            page.wait_for_function(TICKS_SHOWN, arg=expected_ticks(backend, text), timeout=timeout_ms, polling=10)
            times.append(time.perf_counter() - start)
    return times[1:]


def enter_to_heatmap(backend: Backend, lengths: list[int], reps: int,
                     timeout_ms: float) -> tuple[dict[int, list[float]], dict[int, list[float]]]:
    """Seconds from Enter in "Sentence" to the new text's tick labels, and to the heatmap's message
    reaching the browser, ``reps`` new texts per length."""
    times: dict[int, list[float]] = {}
    messages: dict[int, list[float]] = {}
    with chromium() as browser, served_app() as url:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.add_init_script(CLOCK)
        page.goto(url)
        wait_for_heatmap(page, timeout=timeout_ms)
        box = page.get_by_label("Sentence", exact=True).and_(page.locator("textarea"))
        variant = 100  # texts no other measurement used: every Enter is a real model run
        for n in lengths:
            times[n], messages[n] = [], []
            for _ in range(reps + 1):  # the first one warms this length up
                variant += 1
                text = text_of_tokens(backend, n, variant)
                box.fill(text)
                page.wait_for_timeout(300)  # typing done; the clock starts at Enter
                start = time.perf_counter()
                box.press("Control+Enter")
                page.wait_for_function(TICKS_SHOWN, arg=expected_ticks(backend, text), timeout=timeout_ms,
                                       polling=10)
                times[n].append(time.perf_counter() - start)
                enter, heatmap = page.evaluate("() => [window.__enterAt, window.__heatmapAt]")
                messages[n].append((heatmap - enter) / 1000)
            times[n], messages[n] = times[n][1:], messages[n][1:]
    return times, messages


def bench_browser(backend: Backend, lengths: list[int], reps: int, cold_starts: int = 2,
                  timeout_ms: float = 120_000) -> dict:
    times, messages = enter_to_heatmap(backend, lengths, reps, timeout_ms)
    starts = [cold_start(timeout_ms) for _ in range(cold_starts)]
    return {
        "cold_start_s": [whole for whole, _, _ in starts],
        "first_visit_s": [visit for _, visit, _ in starts],
        "first_visit_message_s": [message for _, _, message in starts],
        "link_to_heatmap_s": link_to_heatmap(backend, max(reps // 2, 1), timeout_ms),
        "enter_to_heatmap_s": {str(n): t for n, t in times.items()},
        "enter_to_heatmap_message_s": {str(n): t for n, t in messages.items()},
    }
