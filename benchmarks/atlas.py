"""The atlas corpus pass, measured side by side in one run:
``python -m benchmarks.atlas [--sentences 2000] [--rss 1000,10000]``.

1. sentences/s on ``probes:N`` with minilm: a plain single-process loop (the same worker class and
   shard writing, no Ray), Ray Data with 1 worker, Ray Data with 2 workers. Each timing includes
   loading the model (in the loop, and in every Ray actor); Ray's own start-up (``ray.init``) is
   reported separately. Overhead = Ray-1-worker time / loop time (goal ≤ 1.15).
2. peak RSS of a whole ``atlas build`` (driver, Ray's processes and workers: the process tree,
   sampled every 0.2 s) at two corpus sizes: it should not grow with the corpus.

Timings on a shared 2-core machine are noisy; the ratios come from one run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MB = 1024 * 1024


def plain_loop(corpus: str, folder: Path) -> tuple[float, int]:
    """The pass without Ray: the same AtlasWorker over the same pending files, shards via pyarrow."""
    import pyarrow.parquet as pq

    from attention_viz.atlas import layout
    from attention_viz.atlas.pipeline import PENDING_SCHEMA, plan
    from attention_viz.atlas.sources import Source
    from attention_viz.atlas.worker import AtlasWorker

    import numpy as np

    the_plan = plan(Source(corpus), folder, np.zeros(0, np.int64), layout.SAMPLE_TOKENS, layout.JS_SENTENCES, False)
    (folder / layout.SHARDS).mkdir()
    start = time.perf_counter()
    worker = AtlasWorker("minilm", the_plan.sample_below, the_plan.js_below)
    for i, path in enumerate(sorted((folder / layout.PENDING).glob("*.parquet"))):
        pq.write_table(worker(pq.read_table(path, schema=PENDING_SCHEMA)), folder / layout.SHARDS / f"{i:06d}.parquet")
    return time.perf_counter() - start, the_plan.records


def ray_pass(corpus: str, folder: Path, workers: int) -> float:
    import numpy as np

    from attention_viz.atlas import layout
    from attention_viz.atlas.pipeline import plan, run_ray
    from attention_viz.atlas.sources import Source

    the_plan = plan(Source(corpus), folder, np.zeros(0, np.int64), layout.SAMPLE_TOKENS, layout.JS_SENTENCES, False)
    start = time.perf_counter()
    run_ray("minilm", folder, the_plan, workers, 0.5, 1024, False)
    return time.perf_counter() - start


def throughput(sentences: int) -> dict:
    import ray

    corpus = f"probes:{sentences}"
    with tempfile.TemporaryDirectory() as scratch:
        loop_s, n = plain_loop(corpus, Path(scratch) / "loop")
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        start = time.perf_counter()
        ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING")
        startup_s = time.perf_counter() - start
        try:
            one_s = ray_pass(corpus, Path(scratch) / "ray1", 1)
            two_s = ray_pass(corpus, Path(scratch) / "ray2", 2)
        finally:
            ray.shutdown()
    return {
        "sentences": n,
        "plain_loop_per_s": round(n / loop_s, 1),
        "ray_1_worker_per_s": round(n / one_s, 1),
        "ray_2_workers_per_s": round(n / two_s, 1),
        "ray_startup_s": round(startup_s, 1),
        "ray_overhead_1_worker": round(one_s / loop_s, 3),
        "per_sentence_ms_plain": round(1000 * loop_s / n, 2),
    }


def _tree_rss(pid: int) -> int:
    """Resident bytes of ``pid`` and every descendant (Ray's processes and workers included)."""
    total, stack = 0, [pid]
    while stack:
        current = stack.pop()
        try:
            for line in Path(f"/proc/{current}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
            for task in Path(f"/proc/{current}/task").iterdir():
                stack += [int(c) for c in (task / "children").read_text().split()]
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
    return total


def peak_rss(sentences: int) -> dict:
    with tempfile.TemporaryDirectory() as scratch:
        command = [sys.executable, "-m", "attention_viz", "atlas", "build", "--corpus", f"probes:{sentences}",
                   "--out", str(Path(scratch) / "atlas"), "--workers", "2", "--no-progress"]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "RAY_AUTH_MODE": "disabled"}
        start = time.perf_counter()
        build = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        peak = 0
        while build.poll() is None:
            peak = max(peak, _tree_rss(build.pid))
            time.sleep(0.2)
        if build.returncode:
            raise SystemExit(f"atlas build of {sentences} sentences failed ({build.returncode})")
        return {"sentences": sentences, "peak_rss_mb": round(peak / MB), "seconds": round(time.perf_counter() - start)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=2000)
    parser.add_argument("--rss", default="1000,10000", help="corpus sizes for the peak-RSS builds ('' to skip)")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    report = {"throughput": throughput(args.sentences)}
    print(json.dumps(report["throughput"]), flush=True)
    report["peak_rss"] = []
    for size in [int(s) for s in args.rss.split(",") if s.strip()]:
        report["peak_rss"].append(peak_rss(size))
        print(json.dumps(report["peak_rss"][-1]), flush=True)


if __name__ == "__main__":
    main()
