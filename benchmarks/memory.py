"""Peak memory of one model run, measured in a fresh process so nothing else is counted:
``python -m benchmarks.memory --tokens 512 --kinds all`` prints one JSON line.

Peaks come from the kernel's high-water mark of this process (VmHWM): once after loading, then,
reset by writing 5 to /proc/self/clear_refs, for the run alone. ``ru_maxrss`` is reported too but
is not clean here: at exec a child inherits the high-water mark of the process that started it
(the benchmark, with two models loaded).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MB = 1024 * 1024


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def measure(tokens: int, kinds: str) -> dict:
    from attention_viz.backends.registry import load_backend
    from benchmarks.texts import text_of_tokens

    backend = load_backend("minilm")
    text = text_of_tokens(backend, tokens)
    loaded_kb, load_peak_kb = _status_kb("VmRSS"), _status_kb("VmHWM")
    Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current RSS
    result = backend.run(text, kinds=None if kinds == "all" else tuple(kinds.split(",")))
    run_peak_kb = _status_kb("VmHWM")
    return {
        "tokens": tokens,
        "kinds": kinds,
        "peak_rss_mb": max(load_peak_kb, run_peak_kb) / 1024,
        "load_peak_rss_mb": load_peak_kb / 1024,
        "rss_after_load_mb": loaded_kb / 1024,
        "run_peak_rss_mb": run_peak_kb / 1024,
        "ru_maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,  # Linux: kB
        "result_arrays_mb": sum(a.nbytes for a in result.arrays.values()) / MB,
    }


def in_subprocess(tokens: int, kinds: str) -> dict:
    command = [sys.executable, "-m", "benchmarks.memory", "--tokens", str(tokens), "--kinds", kinds]
    env = {**os.environ, "HF_HUB_OFFLINE": os.environ.get("HF_HUB_OFFLINE", "1")}
    out = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=512)
    parser.add_argument("--kinds", default="all", help='"all" or comma-separated hook kinds, e.g. "pattern"')
    args = parser.parse_args()
    print(json.dumps(measure(args.tokens, args.kinds)))
