"""Progress of a long computation, told to whoever is watching, without passing a callback down
every call: the page (or the command line) sets a reporter for the calls it makes (a context
variable, so two sessions' computations never report to each other), and the loops of long jobs
say how far they are. Nothing is reported when nobody watches."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

Reporter = Callable[[str, float], None]  # (what is being done, fraction done in [0, 1])

_reporter: ContextVar[Reporter | None] = ContextVar("attention_viz_progress", default=None)


@contextmanager
def reporting(reporter: Reporter) -> Iterator[None]:
    """Within the block, the loops below report to ``reporter``."""
    token = _reporter.set(reporter)
    try:
        yield
    finally:
        _reporter.reset(token)


class Steps:
    """``total`` equal steps of one job; :meth:`done` after each."""

    def __init__(self, what: str, total: int) -> None:
        self.what, self.total, self.count = what, max(total, 1), 0
        self.reporter = _reporter.get()

    def done(self, steps: int = 1) -> None:
        self.count = min(self.total, self.count + steps)
        if self.reporter is not None:
            self.reporter(self.what, self.count / self.total)


def steps(what: str, total: int) -> Steps:
    return Steps(what, total)


def time_left(fraction: float, elapsed: float) -> str:
    """Words for the time a job still needs, from its pace so far ("" until a step has finished)."""
    if fraction <= 0 or fraction >= 1:
        return ""
    seconds = elapsed * (1 - fraction) / fraction
    return "under a second left" if seconds < 1 else f"about {seconds:.0f} s left" if seconds < 90 else f"about {seconds / 60:.0f} min left"
