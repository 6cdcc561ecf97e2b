"""Make the README's pictures: the app served as `make run` does, each view opened from a link in
Debian's Chromium and saved under docs/. Run with `make screenshot` (tests never write these).

- docs/screenshot.png: the landing view (what a first visitor sees);
- docs/learn-1-basics.png … docs/learn-5-encdec.png: the Learn path, in the sidebar's order;
- docs/beyond-*.png: value-weighted norms, head ablation and the head detector (Beyond attention weights);
- docs/levels-512.png: a 512-token text's head on our levels element (the Head view past 256 × 256 cells).
"""

from __future__ import annotations

import sys
import urllib.parse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT)]  # the browser helpers the real-browser tests use, and theirs

from attention_viz.backends.registry import load_backend  # noqa: E402
from benchmarks.texts import text_of_tokens  # noqa: E402
from browser import chromium, served_app, wait_for_heatmap  # noqa: E402

TRANSLATION = {"model": "toy-translate", "text": "the law was signed ."}
SHOTS = [  # file name, link parameters, a title the page must show first (None: any figure)
    ("screenshot.png", {}, "layer 3, head 1"),
    ("learn-1-basics.png", {"view": "basics"}, None),
    ("learn-2-inside.png", {"view": "inside"}, None),
    ("learn-3-positional.png", {"view": "positional"}, None),
    ("learn-4-causal.png", {**TRANSLATION, "view": "causal"}, None),
    ("learn-5-encdec.png", {**TRANSLATION, "view": "encdec"}, None),
    ("beyond-norms.png", {"view": "head", "layer": "3", "head": "1", "weighting": "norms"}, None),
    ("beyond-ablation.png", {"view": "ablation", "ablate": "3.1,2.5"}, None),
    ("beyond-detector.png", {"model": "induction", "text": "a q 7 m z 3 k b a q 7 m z 3 k b", "view": "detector"},
     None),
    # layer 0, head 2 looks at the previous token (0.8 of its weight on average): the diagonal
    ("levels-512.png", {"view": "head", "layer": "0", "head": "2", "scale": "log",
                        "text": text_of_tokens(load_backend("minilm"), 512)}, "layer 0, head 2"),
]
SCROLL_TO = {"levels-512.png": ".avlc"}  # shots of a figure below the page's first screen


def main() -> None:
    with served_app() as url, chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        for name, params, title in SHOTS:
            page.goto(f"{url}/?{urllib.parse.urlencode(params)}" if params else url)
            wait_for_heatmap(page, title, timeout=180_000) if title else page.wait_for_selector(
                ".js-plotly-plot .main-svg", timeout=180_000)
            page.wait_for_timeout(1500)  # let the remaining figures, colour bars and fonts settle
            if name in SCROLL_TO:
                page.locator(SCROLL_TO[name]).evaluate("e => e.scrollIntoView({block: 'center'})")  # below the app's top bar
            out = ROOT / "docs" / name
            page.screenshot(path=str(out), full_page=False)
            print(f"wrote {out.relative_to(ROOT)} ({out.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
