"""Helpers for the real-browser tests: the app served as the README says, and Debian's Chromium
driven by Playwright (never a downloaded browser)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from playwright.sync_api import Browser, Page, sync_playwright

from benchmarks.ports import free_port, wait_until_serving

ROOT = Path(__file__).resolve().parents[1]
# Debian's build of Chromium's headless shell: the same Blink and V8 as the `chromium` package without
# the desktop browser around them, as Playwright runs headless tests by default. The browser tests spend
# ~10% less CPU in it (test_browser.py: 40.2 → 36.4 machine CPU-s; test_browser_hostile.py: 71.9 → 66.1).
CHROMIUM = "/usr/bin/chromium-headless-shell"
# The view of the README's screenshot (and of the test that opens a shared link).
SHARED_VIEW = {"model": "minilm", "text": "The animal didn't cross the street because it was too tired.",
               "view": "head", "layer": "3", "head": "1"}
# The views that draw no chart for the default model, and what each shows instead: with no atlas built, the
# atlas offers to build one; the logit lens reads decoders only, and says so for an encoder (minilm).
NO_CHART = {"atlas": "Build the probes atlas of minilm", "logit_lens": "has no next-token head"}
# view key → its label in the sidebar, as app.py declares them ("head": ("Head", …)).
VIEW_LABELS = dict(re.findall(r'^    "(\w+)": \("([^"]+)"', (ROOT / "app.py").read_text(encoding="utf-8"), re.M))
FLAGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


@contextmanager
def served_app(timeout: float = 90, attempts: int = 3) -> Iterator[str]:
    """`make run` on a free port; yields the base URL once that server answers the health check
    itself (benchmarks/ports.py: a port taken meanwhile by another test's server means a new port)."""
    deadline = time.monotonic() + timeout
    for _ in range(attempts):
        port = free_port()
        log = (open(ROOT / "artifacts" / f"server-{port}.log", "w") if (ROOT / "artifacts").is_dir()
               else subprocess.DEVNULL)
        server = subprocess.Popen(["make", "run", f"PORT={port}"], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                  start_new_session=True, env={**os.environ})
        try:
            if wait_until_serving(server, port, deadline):
                yield f"http://127.0.0.1:{port}"
                return
        finally:
            stop(server)
    raise RuntimeError(f"the app did not start in {attempts} attempts (last exit code {server.poll()})")


def stop(server: subprocess.Popen) -> None:
    """Its whole process group (`make` and the server it started): SIGTERM, SIGKILL after 15 s."""
    try:
        os.killpg(server.pid, signal.SIGTERM)
    except ProcessLookupError:  # the whole group has ended already
        pass
    try:
        server.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()


@contextmanager
def chromium() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            yield browser
        finally:
            browser.close()


VIEWPORT = {"width": 1400, "height": 1000}
# Predicates polled every 100 ms, not on every animation frame (Playwright's default): polling per frame
# keeps the renderer and the GPU process drawing frames, ~0.1 CPU-s per second of waiting here.
POLL_MS = 100


def new_page(browser: Browser, width: int = VIEWPORT["width"], height: int = VIEWPORT["height"]) -> Page:
    """A page in a fresh context (no cookies, no session). Reduced motion: while a script runs, Streamlit's
    animations repaint in software on every frame, about a third of the browser's CPU in a page load here."""
    page = browser.new_page(viewport={"width": width, "height": height}, reduced_motion="reduce")
    page.set_default_timeout(60_000)  # test workers on both cores: a click may wait for a busy server
    return page


def reset(page: Page) -> None:
    """The page as a fresh one for the next test: its Streamlit session ended (a blank document), no
    cookies, no local or session storage, no routes, the default viewport. Only its renderer process
    stays warm."""
    page.evaluate("() => { try { localStorage.clear(); sessionStorage.clear(); } catch (e) {} }")
    page.unroute_all(behavior="ignoreErrors")
    page.goto("about:blank")
    page.context.clear_cookies()
    page.set_viewport_size(VIEWPORT)


# Each margin Plotly's automargin had to move, for every drawn Plotly figure: a moved margin means the
# figure was drawn twice (figures/text_width.py gives margins that hold the labels, legends and colour
# bars). Plotly's own test is used: the margins it settled on (``_size``) against the figure's, more than
# 1 px apart. A push larger than a margin is not enough: a legend at the plot's left edge pushes its
# whole width to the right, which the plot itself holds.
MARGINS_PUSHED = """() => [...document.querySelectorAll('.js-plotly-plot')].flatMap(gd => {
    const layout = gd._fullLayout, title = String(layout.title.text || 'untitled').slice(0, 40);
    return ['l', 'r', 't', 'b'].filter(side => Math.abs(layout._size[side] - layout.margin[side]) > 1)
        .map(side => `${title}: ${side} ${layout._size[side]} > ${layout.margin[side]}`)})"""


# A drawn heatmap: a Plotly one or our levels element (ui/level_canvas.js)
HEATMAP = ".js-plotly-plot .heatmaplayer image, .js-plotly-plot .hm image, .avlc[data-drawn]"


def wait_for_heatmap(page: Page, title: str | None = None, timeout: float = 120_000) -> None:
    """Until a heatmap is drawn and, if given, its title contains ``title``."""
    page.wait_for_selector(HEATMAP, timeout=timeout)
    if title is not None:
        page.wait_for_function(
            """t => [...document.querySelectorAll('.js-plotly-plot .gtitle, .avlc[data-drawn] .avlc-title')]
                   .some(e => e.textContent.includes(t))""",
            arg=title, timeout=timeout, polling=POLL_MS,
        )


def wait_for_link(page: Page, expected: dict[str, str], timeout: float = 60_000) -> dict[str, str]:
    """Until the page's URL carries ``expected`` (the app rewrites it after each run); its parameters."""
    page.wait_for_function(
        """want => { const p = new URLSearchParams(location.search);
                     return Object.entries(want).every(([k, v]) => p.get(k) === v); }""",
        arg=expected, timeout=timeout, polling=POLL_MS,
    )
    return dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(page.url).query))


def settled(page: Page, timeout: float = 120_000) -> None:
    """Until the script run has finished and nothing on the page is stale (left from the run before)."""
    page.wait_for_function(
        """() => !document.querySelector("[data-testid='stStatusWidgetRunningIcon'], "
                                        + "[data-testid='stStatusWidgetRunningManIcon'], [data-stale='true']")""",
        timeout=timeout, polling=POLL_MS,
    )


def open_view(page: Page, view: str) -> None:
    """Pick ``view`` in the sidebar as a person does (a rerun, no page load); return once it is drawn."""
    page.locator("[data-testid='stSidebar'] [data-testid='stRadio']").get_by_text(VIEW_LABELS[view], exact=True).click()
    wait_for_link(page, {"view": view})
    settled(page)


def shared_link(page: Page) -> str:
    """The link in the "Copy link" popover beside the page's title: opened, read, closed again."""
    page.get_by_role("button", name="Copy link").click()
    link = page.locator("[data-testid='stPopoverBody'] [data-testid='stCode'] code").inner_text().strip()
    page.keyboard.press("Escape")
    return link


def x_tick_labels(page: Page, chart: int = 0) -> list[str]:
    plot = page.locator(".js-plotly-plot").nth(chart)
    return plot.locator(".xtick text").all_text_contents()
