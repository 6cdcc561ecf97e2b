"""Redraw the notebook figures docs/notebook.md shows: the pages ``av.show`` returns, drawn offline in
headless Chromium (tests/browser.py's launcher) and saved as PNG next to this file.

Run: ``.venv/bin/python docs/notebook_figures.py``
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import attention_viz as av

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tests"), str(HERE.parent)]  # the tests' browser helpers, and theirs
from browser import chromium  # noqa: E402

TIRED = "The animal didn't cross the street because it was too tired."


def main() -> None:
    result = av.run("minilm", TIRED)
    pair = av.run("toy-translate", "The european economic area was signed in august 1992 .")
    shots = {
        "notebook-head.png": (av.show(result, view="head", layer=3, head=1), "#chart, .js-plotly-plot"),
        "notebook-heads.png": (av.show(pair, view="heads", attention="cross", layer=2, head="mean"), "body[data-drawn]"),
    }
    folder = Path(tempfile.mkdtemp(prefix="notebook-figures-"))
    with chromium() as browser:
        for name, (shown, ready) in shots.items():
            page = browser.new_page(viewport={"width": 1000, "height": shown.height})
            page.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file:") else route.abort())
            page.goto(shown.save(folder / f"{name}.html").as_uri())
            page.wait_for_selector(ready, timeout=60_000)
            page.wait_for_selector(".heatmaplayer image", timeout=60_000)
            page.screenshot(path=HERE / name, full_page=True)
            print(f"wrote {HERE / name}")


if __name__ == "__main__":
    main()
