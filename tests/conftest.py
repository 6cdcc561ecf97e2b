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


# The real-browser tests' fixtures: per test module, the app served as `make run` does and one
# Chromium; per test, a fresh page that fails the test if the page threw a JavaScript error.
@pytest.fixture(scope="module")
def app_url() -> Iterator[str]:
    from browser import served_app

    with served_app() as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    from browser import chromium

    with chromium() as b:
        yield b


@pytest.fixture
def page(browser):
    from browser import new_page

    page = new_page(browser)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    yield page
    page.close()
    assert not errors, errors
