import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from attention_viz.settings import apply_process_settings

# The test process is a process start like the CLI's and the server's: offline, and OpenMP threads
# that wait passively (busy-waiting ones starve everything else on a small shared machine).
apply_process_settings()

# atlases the app builds go to a folder of this run (the served app inherits it), never ~/.cache
os.environ["ATTENTION_VIZ_ATLAS_ROOT"] = tempfile.mkdtemp(prefix="attention-viz-atlas-")

# test helpers (browser.py) import as plain modules
sys.path.insert(0, str(Path(__file__).resolve().parent))


# The real-browser tests' fixtures: per test process (one xdist worker), the app served as `make run`
# does, one Chromium and one tab; per test, that tab handed over clean (see browser.reset) and a check
# that the page threw no JavaScript error. The tab is reused because a page load in a new tab costs
# Chromium ~8 CPU-s here and one in a tab that has loaded the app before ~2.5 (its renderer is warm).
@pytest.fixture(scope="session")
def app_url() -> Iterator[str]:
    from browser import served_app

    with served_app() as url:
        yield url


@pytest.fixture(scope="session")
def browser():
    from browser import chromium

    with chromium() as b:
        yield b


@pytest.fixture(scope="session")
def tab(browser):
    from browser import new_page

    tab = new_page(browser)
    yield tab
    tab.context.close()


@pytest.fixture
def page(tab):
    from browser import reset

    errors: list[str] = []
    record = lambda e: errors.append(str(e))  # noqa: E731 - the handler removed below
    tab.on("pageerror", record)
    yield tab
    tab.remove_listener("pageerror", record)
    reset(tab)
    assert not errors, errors


@pytest.fixture
def listen(page):
    """``listen(event, handler)``: a handler on the test's page, removed when the test ends (the tab
    outlives the test)."""
    added = []

    def add(event: str, handler) -> None:
        page.on(event, handler)
        added.append((event, handler))

    yield add
    for event, handler in added:
        page.remove_listener(event, handler)
