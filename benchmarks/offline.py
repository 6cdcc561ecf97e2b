"""The every-head offline page (``av.export(result, path, view="heads")``) on minilm at 128 and 512
tokens, opened from disk in headless Chromium (Debian's, driven by Playwright as tests/browser.py
does) with every non-file request aborted:

* file size, and how long writing it takes;
* opening, in a fresh browser each time (a reader opening the file gets no code cache; a second load
  of plotly.js in the same browser costs a tenth of the first): seconds from navigation start to
  - first heatmap painted: the page's canvas preview of the opening head, painted before plotly.js runs;
  - interactive: plotly.js executed and the Plotly heatmap drawn in the preview's place;
  both as the page's own performance marks (taken two animation frames after drawing, i.e. painted),
  and the renderer's CPU seconds until interactive (which other load on a shared machine does not
  inflate as much as wall time), beside a page holding plotly.js alone (what any offline Plotly file
  pays before it can draw anything);
* head switch: a new head chosen in the page → redrawn and painted (measured inside the page:
  change event → draw done → two animation frames); layer switch likewise (it inflates a layer).

bertviz is no dependency, so it is not measured here; the printout ends with a footnote giving an
earlier measurement of its head view file, with its source, outside the measured table.

Run: ``python -m benchmarks.offline [--lengths 128 512] [--loads 3] [--switches 8]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import attention_viz as av
from attention_viz.backends.registry import load_backend
from attention_viz.figures.offline import page_html

from .texts import text_of_tokens

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from browser import chromium  # noqa: E402  (the tests' helper: Debian's Chromium, the project's flags)

# Not measured by this script: a footnote with its source, never a column of the measured table.
BERTVIZ_FOOTNOTE = ("Footnote, not measured here: bertviz's head view file was 53 MB at 128 tokens and 869 MB at 512 "
                    "(Chromium never drew it), and blank offline at any size (it loads require.js from a CDN), "
                    "as measured for this project's issue 18 with bertviz installed.")
PREVIEW, INTERACTIVE = "attention-viz:preview", "attention-viz:interactive"  # the heads page's marks
PLOTLY_ALONE = "plotly-alone"
SWITCH = """async ([select, value]) => {
    const start = performance.now(), element = document.getElementById(select);
    element.value = value;
    element.dispatchEvent(new Event('change'));
    await document.body.attentionViz.drawn;
    await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
    return performance.now() - start;
}"""


def _offline_page(browser):
    page = browser.new_page(viewport={"width": 1300, "height": 1100})
    page.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file:") else route.abort())
    return page


def renderer_cpu(cdp) -> float:
    """CPU seconds used so far by Chromium's renderer processes (on a busy shared machine wall time
    mostly measures the other processes; CPU time does not)."""
    return sum(p["cpuTime"] for p in cdp.send("SystemInfo.getProcessInfo")["processInfo"] if p["type"] == "renderer")


def cold_open(path: Path, marks: tuple[str, ...]) -> tuple[float, ...]:
    """Seconds from navigation start to each performance mark in ``marks``, then the renderer's CPU
    seconds until the last one, for ``path`` opened in a browser just started."""
    with chromium() as browser:
        cdp = browser.new_browser_cdp_session()
        page = _offline_page(browser)
        cpu = renderer_cpu(cdp)
        page.goto(path.as_uri(), wait_until="commit")
        page.wait_for_function("m => performance.getEntriesByName(m).length", arg=marks[-1], timeout=120_000)
        used = renderer_cpu(cdp) - cpu
        times = page.evaluate("ms => ms.map(m => performance.getEntriesByName(m)[0].startTime / 1000)", list(marks))
        page.close()
    return (*times, used)


def switches(browser, path: Path, n: int) -> tuple[list[float], list[float]]:
    """Milliseconds per head switch (layer 0, heads 1..n) and per layer switch (layers 1..5)."""
    page = _offline_page(browser)
    page.goto(path.as_uri())
    page.wait_for_selector("body[data-drawn]", timeout=120_000)
    heads = [page.evaluate(SWITCH, ["head", str(h % 12)]) for h in range(1, n + 1)]
    layers = [page.evaluate(SWITCH, ["layer", str(layer)]) for layer in range(1, 6)]
    page.close()
    return heads, layers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[128, 512])
    parser.add_argument("--loads", type=int, default=3, help="page loads per length (median reported)")
    parser.add_argument("--switches", type=int, default=8, help="head switches per length")
    args = parser.parse_args()
    backend = load_backend("minilm")
    folder = Path(tempfile.mkdtemp(prefix="offline-bench-"))
    plotly_only = folder / "plotly-only.html"
    plotly_only.write_text(page_html("plotly.js alone", "", f"performance.mark({PLOTLY_ALONE!r})"), encoding="utf-8")
    baseline = [cold_open(plotly_only, (PLOTLY_ALONE,)) for _ in range(args.loads)]
    rows = []
    for n in args.lengths:
        result = backend.run(text_of_tokens(backend, n))
        start = time.perf_counter()
        path = av.export(result, folder / f"heads-{n}.html")
        written = time.perf_counter() - start
        loads = [cold_open(path, (PREVIEW, INTERACTIVE)) for _ in range(args.loads)]
        with chromium() as browser:
            heads, layers = switches(browser, path, args.switches)
        rows.append((n, path.stat().st_size / 1e6, written, _median(loads, 0), _median(loads, 1), _median(loads, 2),
                     statistics.median(heads), max(heads), statistics.median(layers), max(layers)))
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"minilm (6 layers × 12 heads), headless Chromium, network blocked, a fresh browser per page load; "
          f"load average {load} on {os.cpu_count()} CPUs; medians of {args.loads} page loads")
    print(f"plotly.js alone (any offline Plotly page pays this before drawing): {_median(baseline, 0):.2f} s, "
          f"renderer CPU {_median(baseline, 1):.2f} s")
    print(f"{'tokens':>6} {'file MB':>8} {'write s':>8} {'first heatmap painted s':>24} {'interactive s':>14} "
          f"{'(renderer CPU s)':>17} {'head switch ms (median/max)':>28} {'layer switch ms (median/max)':>29}")
    for n, size, written, painted, interactive, cpu, head, head_max, layer, layer_max in rows:
        print(f"{n:>6} {size:>8.1f} {written:>8.2f} {painted:>24.2f} {interactive:>14.2f} {cpu:>17.2f} "
              f"{head:>19.0f} / {head_max:<6.0f} {layer:>20.0f} / {layer_max:<6.0f}")
    print(BERTVIZ_FOOTNOTE)


def _median(rows: list[tuple[float, ...]], index: int) -> float:
    return statistics.median(row[index] for row in rows)


if __name__ == "__main__":
    main()
