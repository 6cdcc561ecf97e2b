"""A progress bar for the long jobs a view starts (value zeroing, a probe set, ...): they report
through :mod:`attention_viz.runtime.progress`; the bar appears once a job has run for a second, says
what it is doing and the time left, and goes when the view is drawn."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import streamlit as st

from ..runtime.progress import reporting, time_left

QUIET = 1.0  # seconds a job runs before its bar appears: shorter ones would only flicker


@contextmanager
def progress_shown() -> Iterator[None]:
    slot = st.empty()
    start = time.monotonic()

    def report(what: str, fraction: float) -> None:
        elapsed = time.monotonic() - start
        if elapsed >= QUIET:
            left = time_left(fraction, elapsed)
            slot.progress(fraction, text=f"{what[:1].upper()}{what[1:]}: {fraction:.0%}" + (f" · {left}" if left else ""))

    try:
        with reporting(report):
            yield
    finally:
        slot.empty()
