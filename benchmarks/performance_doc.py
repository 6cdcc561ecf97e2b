"""docs/performance.md: what each benchmark measures and how to run it, then the tables of the last
``make bench``, generated. Nothing in it is typed by hand but the prose below, which holds no number."""

from __future__ import annotations

INTRO = """\
# Performance

<!-- Written by `make bench` (python -m benchmarks.run --performance docs/performance.md). Do not edit by
hand: run it again. -->

Every figure below is measured by a script in `benchmarks/`, side by side with the baseline a user
would otherwise run, in one process on the machine named in the table's first line. Each contender
is timed in passes of its own, with nothing of ours alive while a baseline runs; a row that needs a
state of its own says so in its name and is compared with baselines measured in the standard state.
Timings on a shared 2-core machine are noisy: each table gives its load average, and ratios measured
in one run are steadier than seconds.

| benchmark | what it measures | command |
|---|---|---|
| `benchmarks.run` | capture cost against `transformers` (SDPA floor, eager with weights), text → every figure, bytes to the browser, peak memory, and Enter → heatmap in headless Chromium; the floors | `make bench` (writes this page and `benchmarks/RESULTS.md`) |
| `benchmarks.load` | many sessions at once against one or two replicas behind nginx (docs/deploy.md) | `python -m benchmarks.load --table` |
| `benchmarks.long` | texts of 8k–32k tokens: the blockwise pass, the app and the browser | `python -m benchmarks.long --tokens 8192 32768 [--app] [--browser]` |
| `benchmarks.offline` | the every-head offline file: size, time to first paint and to interactive, head switches | `python -m benchmarks.offline` |
| `benchmarks.ablation` | a head ablation's cost beside the plain forward | `python -m benchmarks.ablation` |
| `benchmarks.atlas` | the corpus pass on Ray: sentences per second | `python -m benchmarks.atlas` |

The tables of the last `make bench` follow.

"""


def document(tables: str) -> str:
    """The page: the fixed introduction, then ``tables`` (benchmarks.run's markdown) one level down."""
    body = "\n".join("#" + line if line.startswith("#") else line for line in tables.splitlines())
    return INTRO + body + "\n"
