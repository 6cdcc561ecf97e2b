"""A progress bar for the long jobs a view starts (value zeroing, a probe set, ...): they report
through :mod:`attention_viz.runtime.progress`; the bar appears once a job has run for a second, says
what it is doing and the time left, and goes when the view is drawn.

The jobs run inside cached functions, where Streamlit refuses to draw into an element made outside
(it could not replay it on a cache hit). So the reporter only notes how far the job is, and a
watcher thread of this script run (Streamlit's run context attached) redraws the bar from the note."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import streamlit as st
from streamlit.runtime.scriptrunner import add_script_run_ctx, get_script_run_ctx

from ..runtime.progress import reporting, time_left

QUIET = 1.0  # seconds a job runs before its bar appears: shorter ones would only flicker
EVERY = 0.25  # seconds between redraws of the bar


@contextmanager
def progress_shown() -> Iterator[None]:
    slot = st.empty()
    start = time.monotonic()
    latest: list[tuple[str, float]] = []  # the newest report, replaced (a list: the reporter rebinds nothing)
    stop = threading.Event()

    def watch() -> None:
        shown = None
        while not stop.wait(EVERY):
            if not latest or latest[-1] == shown or time.monotonic() - start < QUIET:
                continue
            shown = latest[-1]
            what, fraction = shown
            left = time_left(fraction, time.monotonic() - start)
            slot.progress(fraction, text=f"{what[:1].upper()}{what[1:]}: {fraction:.0%}" + (f" · {left}" if left else ""))

    def report(what: str, fraction: float) -> None:
        latest[:] = [(what, fraction)]

    watcher = threading.Thread(target=watch, daemon=True, name="attention-viz progress")
    add_script_run_ctx(watcher, get_script_run_ctx())
    watcher.start()
    try:
        with reporting(report):
            yield
    finally:
        stop.set()
        watcher.join()
        slot.empty()
