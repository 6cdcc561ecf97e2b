import os
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from attention_viz.runtime.settings import apply_process_settings

# The test process is a process start like the CLI's and the server's: offline, and OpenMP threads
# that wait passively (busy-waiting ones starve everything else on a small shared machine).
apply_process_settings()

# atlases the app builds go to a folder of this run (the served app inherits it), never ~/.cache
os.environ["ATTENTION_VIZ_ATLAS_ROOT"] = tempfile.mkdtemp(prefix="attention-viz-atlas-")
# and a build started from the page reads 48 probes (every relation), not the full set
os.environ["ATTENTION_VIZ_ATLAS_CORPUS"] = "probes:48"

# test helpers (browser.py) import as plain modules
sys.path.insert(0, str(Path(__file__).resolve().parent))

from apptest_overhead import lighten_apptest  # noqa: E402  (a test helper, importable from the line above)

lighten_apptest()

# The files that take longest (wall time in a full run, slowest first) start first: xdist's loadfile
# hands files to its workers in collection order, each worker taking the next when it runs short, and a
# long file handed out last runs on alone at the end while the other worker idles. The tests of the app
# in a browser are spread over both workers like any other file (each worker that runs one serves the
# app and starts Chromium once); the two that walk every view of the default sentence run as one unit
# (EVERY_VIEW), so one server computes each view's data once for both.
SLOWEST_FIRST = [
    "test_browser_labels.py", "test_browser_accessibility.py", "test_atlas.py", "test_browser_atlas_build.py",
    "test_browser_hostile.py", "test_every_view.py", "test_browser_links.py", "test_load_benchmark.py",
    "test_scale_out.py", "test_browser_progress.py", "test_browser.py", "test_browser_many.py", "test_cli.py",
    "test_browser_image.py", "test_browser_levels.py", "test_notebook.py", "test_offline_export.py",
    "test_explain_pages.py", "test_browser_first_screen.py", "test_trained_corpus.py", "test_browser_long_link.py",
    "test_bad_input.py", "test_app.py",
]
EVERY_VIEW = ("test_browser_labels.py", "test_browser_accessibility.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep their order
    skip_gpu(items)


# What each file and each worker spent in this run (its tests' setup, call and teardown summed), listed
# after pytest's slowest tests: the figures SLOWEST_FIRST is ordered by, and how even the workers were.
SPENT_BY_FILE: Counter[str] = Counter()
SPENT_BY_WORKER: Counter[str] = Counter()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    SPENT_BY_FILE[report.nodeid.split("::")[0]] += report.duration
    node = getattr(report, "node", None)  # the xdist worker that ran it, on the controller
    SPENT_BY_WORKER[node.gateway.id if node is not None else "this process"] += report.duration


@pytest.hookimpl(trylast=True)  # after pytest's own summary and its slowest tests
def pytest_terminal_summary(terminalreporter) -> None:
    if not SPENT_BY_FILE or hasattr(terminalreporter.config, "workerinput"):
        return
    terminalreporter.write_sep("=", "slowest 15 files (their tests' setup, call and teardown summed)")
    for file, seconds in SPENT_BY_FILE.most_common(15):
        terminalreporter.write_line(f"{seconds:8.2f}s {file}")
    workers = ", ".join(f"{worker} {seconds:.1f}s" for worker, seconds in sorted(SPENT_BY_WORKER.items()))
    terminalreporter.write_line(f"time in tests per worker: {workers}")


def skip_gpu(items: list[pytest.Item]) -> None:
    """Tests marked ``gpu`` need CUDA: where torch sees none the hardware is absent, and they skip."""
    gpu = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu:
        return
    import torch  # only when a gpu test was collected

    if not torch.cuda.is_available():
        for item in gpu:
            item.add_marker(pytest.mark.skip(reason="needs CUDA: torch sees no GPU on this machine"))


def pytest_xdist_make_scheduler(config: pytest.Config, log):
    from xdist.scheduler import LoadFileScheduling

    class EveryViewTogether(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            file = super()._split_scope(nodeid)
            return "every view of the default sentence" if Path(file).name in EVERY_VIEW else file

    return EveryViewTogether(config, log) if config.getvalue("dist") == "loadfile" else None


# The real-browser tests' fixtures: per test process (one xdist worker), from its first browser test to
# its end, the app served as `make run` does, one Chromium and two tabs, one for the app and one for
# pages opened from disk; per test, a tab handed over clean (see browser.reset) and a check that its
# page threw no JavaScript error. Tabs are reused because a page load in a new tab costs Chromium much
# more than one in a tab that has loaded the app before (its renderer is warm); pages from disk get
# their own tab because a tab that goes from the app to a file and back changes renderer, and starts
# cold, each time.
@pytest.fixture(autouse=True)
def torch_threads_kept():
    """A test that sets torch's thread count (an atlas worker made in-process sets it to its share of the
    cores) gets it back afterwards: a float32 forward's last bits depend on how its sums are split over
    threads, so later tests comparing two runs (one cached under the old count) would differ by ~1e-6."""
    torch = sys.modules.get("torch")
    before = torch.get_num_threads() if torch is not None else None
    yield
    torch = sys.modules.get("torch")
    if torch is not None and before is not None and torch.get_num_threads() != before:
        torch.set_num_threads(before)


@pytest.fixture(scope="session")
def app_url() -> Iterator[str]:
    from browser import served_app

    with served_app() as url:
        yield url


@pytest.fixture(scope="session")
def browser():
    """Playwright's sync API, open from the first browser test to the end of the process: its event loop
    counts as running in the main thread, so a later test that needs asyncio runs it in a thread of
    its own (test_scale_out)."""
    from browser import chromium

    with chromium() as b:
        yield b


def _tab(browser):
    from browser import new_page

    tab = new_page(browser)
    yield tab
    tab.context.close()


@pytest.fixture(scope="session")
def app_tab(browser):
    yield from _tab(browser)


@pytest.fixture(scope="session")
def disk_tab(browser):
    yield from _tab(browser)


def _handed_over(tab, allowed: list[str]):
    from browser import reset

    errors: list[str] = []

    def record(error) -> None:
        errors.append(str(error))

    tab.on("pageerror", record)
    yield tab
    tab.remove_listener("pageerror", record)
    reset(tab)
    assert [e for e in errors if e not in allowed] == [], errors


@pytest.fixture
def allowed_page_errors() -> list[str]:
    """Page errors a test provokes on purpose (it appends them); any other fails the test."""
    return []


@pytest.fixture
def page(app_tab, allowed_page_errors):
    """The app's tab, for this test."""
    yield from _handed_over(app_tab, allowed_page_errors)


@pytest.fixture
def disk_page(disk_tab, allowed_page_errors):
    """The tab for pages opened from disk (exported figures, notebook outputs), for this test."""
    yield from _handed_over(disk_tab, allowed_page_errors)


@pytest.fixture
def listen():
    """``listen(page, event, handler)``: a handler removed when the test ends (the tab outlives it)."""
    added = []

    def add(page, event: str, handler) -> None:
        page.on(event, handler)
        added.append((page, event, handler))

    yield add
    for page, event, handler in added:
        page.remove_listener(event, handler)
