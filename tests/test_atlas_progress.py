"""A build's progress as the page reads it: each finished batch of a worker adds a line to the atlas
folder's progress log; the records done are what earlier runs left in shards plus those lines; the
time left comes from the pace since the first batch seen. The page redraws it on its own and opens
the atlas when the build is done (tests/test_browser_atlas_build.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from attention_viz.atlas import jobs, layout
from attention_viz.atlas.jobs import BuildJobs, BuildStatus, progress_line
from attention_viz.errors import ModelError
from attention_viz.runtime.access import ATLAS_CORPUS_ENV, page_corpus


def test_progress_lines_add_up(tmp_path: Path):
    assert layout.progress_rows(tmp_path) == 0  # no log yet
    for rows in (16, 16, 7):
        layout.note_progress(tmp_path, rows)
    assert layout.progress_rows(tmp_path) == 39


def test_a_running_build_counts_earlier_shards_and_this_runs_batches(tmp_path: Path, monkeypatch):
    builds = BuildJobs()
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        builds._jobs[str(tmp_path)] = (sleeper, tmp_path / layout.LOG)
        layout.claim(tmp_path)
        layout.write_manifest(tmp_path, {"complete": False, "corpus": {}})
        assert builds.status(tmp_path) == BuildStatus("running", 0, 0)  # still reading the corpus
        assert progress_line(builds.status(tmp_path)).endswith("reading the corpus…")

        # 100 records, 40 of them done by an earlier run: this run has 60 to go
        layout.write_manifest(tmp_path, {"complete": False, "corpus": {"records": 100, "pending": 60}})
        clock = iter([10.0, 10.0, 20.0])
        monkeypatch.setattr(jobs.time, "monotonic", lambda: next(clock))
        status = builds.status(tmp_path)
        assert (status.done, status.total, status.left) == (40, 100, None)  # no batch finished yet
        layout.note_progress(tmp_path, 10)
        status = builds.status(tmp_path)  # the first batch seen: the pace is measured from here
        assert (status.done, status.left) == (50, None)
        assert "50 of 100 sentences · estimating" in progress_line(status)
        layout.note_progress(tmp_path, 20)
        status = builds.status(tmp_path)  # 20 more records in 10 s: 2 a second, 30 to go
        assert (status.done, status.left) == (70, pytest.approx(15.0))
        assert progress_line(status) == "Building the probes atlas: 70 of 100 sentences · under a minute left"
    finally:
        sleeper.kill()
        sleeper.wait()


def test_the_time_left_reads_in_minutes():
    assert progress_line(BuildStatus("running", 10, 3000, left=600.0)).endswith("about 10 min left")
    assert progress_line(BuildStatus("running", 10, 3000, left=29.0)).endswith("under a minute left")


def test_the_page_builds_only_from_the_probes(monkeypatch):
    monkeypatch.delenv(ATLAS_CORPUS_ENV, raising=False)
    assert page_corpus() == "probes"
    monkeypatch.setenv(ATLAS_CORPUS_ENV, "probes:48")
    assert page_corpus() == "probes:48"
    for spec in ("/etc/passwd", "probes:0", "corpus.txt", "probes:48:x"):
        monkeypatch.setenv(ATLAS_CORPUS_ENV, spec)
        with pytest.raises(ModelError, match="probes"):
            page_corpus()
