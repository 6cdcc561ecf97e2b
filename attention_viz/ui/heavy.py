"""Heavy work on a shared server: at most a few computations at once, one more is refused.

A class on one 2-core server shares it: a probe-set run, the coreference study or max-flow on a
long sentence takes seconds of CPU, and a queue of them would stall every student's slider. So a
heavy computation takes a slot first; when none is free the page says so in one line (nothing is
cached, the next try computes) instead of waiting. Light work (a forward, a figure) never asks.
The operator sets the number of slots with ``ATTENTION_VIZ_HEAVY_SLOTS`` (default: half the cores).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from ..errors import ServerBusy
from ..runtime.settings import half_the_cores, whole_number

HEAVY_SLOTS_ENV = "ATTENTION_VIZ_HEAVY_SLOTS"


def configured_slots() -> int:
    """The operator's number, or half the cores when it is unset or not a whole number ≥ 1."""
    return whole_number(HEAVY_SLOTS_ENV, half_the_cores())


class HeavyGate:
    """At most ``slots`` heavy computations at once in this process; one more is refused, not queued.
    Work already holding a slot may start more heavy work inside it (the study runs the probe set)."""

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self._free = threading.BoundedSemaphore(slots)
        self._held = threading.local()  # this thread's depth of heavy work

    @contextmanager
    def __call__(self, what: str) -> Iterator[None]:
        depth = getattr(self._held, "depth", 0)
        if depth == 0 and not self._free.acquire(blocking=False):
            raise ServerBusy(f"The server is busy with other heavy work, so {what} was not started. "
                             "Try again in a moment; everything else on the page works meanwhile.")
        self._held.depth = depth + 1
        try:
            yield
        finally:
            self._held.depth = depth
            if depth == 0:
                self._free.release()


heavy = HeavyGate(configured_slots())  # one per server process: sessions are threads of it
