"""Side-by-side timing, each contender in passes of its own: a pass is one contender called
``reps`` times in a row, so no contender runs in a state another one left (memory it keeps alive,
pages it mapped, caches it warmed). Passes alternate over rounds (A B C, then C B A, ...), so a slow
stretch of this noisy shared machine falls on every contender alike. Reported as medians, and
ratios as ratios of medians."""

from __future__ import annotations

import ctypes
import gc
import resource
import statistics
import time
from collections.abc import Callable

_libc = ctypes.CDLL(None)


def _pass(run: Callable[[], object], reps: int, warmup: int, faults: list[int] | None, fresh_memory: bool,
          after: Callable[[object], None] | None) -> list[float]:
    for _ in range(warmup):
        run()
    times = []
    for _ in range(reps):
        gc.collect()
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        start = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - start)
        if faults is not None:
            faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
        if after is not None:
            after(result)
        del result  # freeing the output is not part of the call
        if fresh_memory:
            _libc.malloc_trim(0)
    return times


def in_passes(
    contenders: dict[str, Callable[[], object]],
    reps: int,
    rounds: int = 2,
    warmup: int = 2,
    faults: dict | None = None,
    fresh_memory: bool = False,
    between: Callable[[], None] | None = None,
) -> dict[str, list[float]]:
    """Seconds per call of each contender, ``reps`` calls split over ``rounds`` passes each.

    ``faults``, if given, receives each call's minor page faults (memory the kernel had to map and
    zero). ``fresh_memory=True`` hands freed memory back to the kernel after every call (glibc's
    malloc_trim), so every call's output lands in fresh pages; otherwise the allocator may recycle
    the previous call's memory. ``between()``, if given, runs before every pass (e.g. to release
    memory a contender keeps), untimed.
    """
    names = list(contenders)
    times: dict[str, list[float]] = {name: [] for name in names}
    per_round = [reps // rounds + (1 if r < reps % rounds else 0) for r in range(rounds)]
    for r, count in enumerate(per_round):
        for name in names if r % 2 == 0 else names[::-1]:
            if between is not None:
                between()
            gc.collect()
            counts = faults.setdefault(name, []) if faults is not None else None
            times[name] += _pass(contenders[name], count, warmup, counts, fresh_memory, None)
    return times


def kept_pass(run: Callable[[], object], reps: int, warmup: int = 2, faults: list[int] | None = None,
              after: Callable[[object], None] | None = None) -> list[float]:
    """One contender alone, in a state it makes itself: ``after(output)`` runs after each call,
    untimed (e.g. keeping the output alive as an app's cache does)."""
    gc.collect()
    return _pass(run, reps, warmup, faults, False, after)


def median(values: list[float]) -> float:
    return statistics.median(values)


def ratio(numerator: list[float], denominator: list[float]) -> float:
    """The ratio of the medians: passes are not paired call by call."""
    return statistics.median(numerator) / statistics.median(denominator)
