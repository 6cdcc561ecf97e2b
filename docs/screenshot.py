"""Make the README's screenshot: the app served as `make run` does, a shared link opened in
Debian's Chromium, the view saved as docs/screenshot.png. Run with `make screenshot`."""

from __future__ import annotations

import sys
import urllib.parse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the browser helpers the real-browser tests use

from browser import SHARED_VIEW, chromium, served_app, wait_for_heatmap  # noqa: E402

OUT = ROOT / "docs" / "screenshot.png"


def main() -> None:
    with served_app() as url, chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(f"{url}/?{urllib.parse.urlencode(SHARED_VIEW)}")
        wait_for_heatmap(page, f"layer {SHARED_VIEW['layer']}, head {SHARED_VIEW['head']}")
        page.wait_for_timeout(500)  # let the colour bar and fonts settle
        page.screenshot(path=str(OUT), full_page=False)
    print(f"wrote {OUT.relative_to(ROOT)} ({OUT.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
