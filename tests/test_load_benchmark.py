"""The load test still drives the app it measures: one session opens a link and takes every step
(layer, head, the Explore section's views) against a real server, with no error, and prints the
JSON line the issue fixed (an app change that renames a widget would otherwise go unnoticed)."""

from __future__ import annotations

import json
import subprocess
import sys

from browser import ROOT

from benchmarks.load import CONTRACT


def test_one_session_takes_every_step_without_an_error_and_prints_the_contract():
    done = subprocess.run([sys.executable, "-m", "benchmarks.load", "--sessions", "1", "--json", "--timeout", "300"],
                          cwd=ROOT, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert tuple(result) == CONTRACT
    assert result["sessions"] == 1 and result["errors"] == 0, result  # every step drew the right heatmap
    assert 0 < result["p50_s"] <= result["p95_s"] and result["rss_mb"] > 0
