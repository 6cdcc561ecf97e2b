"""The load test still drives the app it measures: sessions open a link and take every step (layer,
head, the Explore section's views) against real servers, with no error, and it prints the JSON line
the issue fixed (an app change that renames a widget would otherwise go unnoticed). It runs the way
docs/deploy.md sizes a 2-core machine: two replicas behind nginx, each session with its sticky key."""

from __future__ import annotations

import json
import subprocess
import sys

from browser import ROOT

from benchmarks.load import CONTRACT


def test_sessions_behind_two_replicas_take_every_step_without_an_error_and_print_the_contract():
    done = subprocess.run([sys.executable, "-m", "benchmarks.load", "--sessions", "2", "--replicas", "2", "--json",
                           "--timeout", "300"], cwd=ROOT, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert tuple(result) == CONTRACT
    assert result["sessions"] == 2 and result["errors"] == 0, result  # every step drew its own sentence's heatmap
    assert 0 < result["p50_s"] <= result["p95_s"] and result["rss_mb"] > 0


def test_the_hostile_mix_measures_the_ordinary_visitors_alone_and_beside_hostile_links():
    done = subprocess.run([sys.executable, "-m", "benchmarks.load", "--sessions", "1", "--hostile", "1",
                           "--timeout", "300"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["errors_alone"] == 0 and result["errors_hostile"] == 0, result
    assert 0 < result["p95_s_alone"] and 0 < result["p95_s_hostile"] and result["hostile_links"] >= 1
