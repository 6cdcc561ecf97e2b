"""Two costs of Streamlit's AppTest that are its own, not the app's, taken off every test run.

Measured on test_every_view.py alone (51 tests, `-n 0`): 71.6 → 58.1 CPU-s.

* Each ``AppTest.run`` scans every installed distribution's metadata for v2 custom components
  (``scan_component_manifests``: ~200 packages' METADATA parsed as e-mail), ~0.2 CPU-s a run. The
  installed packages don't change during a test session and the app has no such component, so
  the first scan's answer is kept.
* While a script runs, AppTest waits for it by waking every millisecond
  (``require_widgets_deltas``), which takes the GIL from the script it waits for. Here it wakes
  every 10 ms; the timeout and its error are unchanged.
"""

from __future__ import annotations

import functools
import time

import streamlit.components.v2.manifest_scanner as manifest_scanner
import streamlit.testing.v1.local_script_runner as local_script_runner

POLL_S = 0.01


def _wait_for_script(runner: local_script_runner.LocalScriptRunner, timeout: float = 3) -> None:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if runner.script_stopped():
            return
        time.sleep(POLL_S)
    runner.request_stop()  # as Streamlit's own: stop the script before failing, or it runs on
    runner.join()
    raise RuntimeError(f"AppTest script run timed out after {timeout}(s)")


def lighten_apptest() -> None:
    manifest_scanner.scan_component_manifests = functools.cache(manifest_scanner.scan_component_manifests)
    local_script_runner.require_widgets_deltas = _wait_for_script
