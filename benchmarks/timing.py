"""Side-by-side timing: every contender once per repetition, interleaved, so a slow moment of this
noisy 2-core machine hits all of them alike. Reported as medians and median per-repetition ratios."""

from __future__ import annotations

import ctypes
import gc
import resource
import statistics
import time
from collections.abc import Callable

_libc = ctypes.CDLL(None)


def interleaved(
    contenders: dict[str, Callable[[], object]],
    reps: int,
    warmup: int = 2,
    faults: dict | None = None,
    fresh_memory: bool = False,
    after: Callable[[str, object], None] | None = None,
) -> dict[str, list[float]]:
    """Seconds per call of each contender; the order rotates every repetition (no one always goes first).

    ``faults``, if given, receives each call's minor page faults: fresh memory the kernel had to map
    and zero, about 2 µs a 4 kB page on this virtual machine (75 MB of patterns: ~40 ms).
    ``fresh_memory=True`` hands freed memory back to the kernel between calls (glibc's malloc_trim),
    so every call's output lands in fresh pages, as a new sentence does in the app, whose cache keeps
    the earlier results; otherwise the allocator may recycle the previous call's memory.
    ``after(name, output)``, if given, runs after each timed call, untimed.
    """
    for run in contenders.values():
        for _ in range(warmup):
            run()
    names = list(contenders)
    times: dict[str, list[float]] = {name: [] for name in names}
    for rep in range(reps):
        shift = rep % len(names)
        for name in names[shift:] + names[:shift]:
            gc.collect()
            before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            start = time.perf_counter()
            result = contenders[name]()
            times[name].append(time.perf_counter() - start)
            if faults is not None:
                faults.setdefault(name, []).append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
            if after is not None:
                after(name, result)
            del result  # freeing the output is not part of the call
            if fresh_memory:
                _libc.malloc_trim(0)
    return times


def median(values: list[float]) -> float:
    return statistics.median(values)


def ratio(numerator: list[float], denominator: list[float]) -> float:
    """Median of the per-repetition ratios: robust to the machine slowing down mid-run."""
    return statistics.median(a / b for a, b in zip(numerator, denominator))
