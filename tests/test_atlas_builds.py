"""One atlas build at a time, inside the operator's budget, leaving nothing outside the atlas root (issue 40).

Each page build is an ``atlas build`` process with a Ray cluster of its own: before, three clicks on
Build under three new names started three (43 processes, ~6 GB). Now a build while another runs is
refused in one sentence whatever its name and whichever server process is asked
(``ATTENTION_VIZ_ATLAS_BUILDS`` allows more), a page build
gets the CPUs and memory the operator set (``ATTENTION_VIZ_ATLAS_CPUS``, ``ATTENTION_VIZ_ATLAS_MEMORY_MB``),
and the Ray it starts keeps its session folder in a folder of its own that is removed when it stops."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from attention_viz.atlas import jobs, pipeline
from attention_viz.atlas.jobs import BuildJobs
from attention_viz.errors import ModelError
from attention_viz.runtime.settings import ATLAS_BUILDS_ENV, ATLAS_CPUS_ENV, ATLAS_MEMORY_ENV


@pytest.fixture
def started(monkeypatch):
    """Builds that only sleep: the commands a page build would run, and the processes to stop."""
    commands: list[list[str]] = []
    processes: list[subprocess.Popen] = []
    real = subprocess.Popen

    def popen(command, **kwargs):
        commands.append(command)
        processes.append(real([sys.executable, "-c", "import time; time.sleep(60)"], **kwargs))
        return processes[-1]

    monkeypatch.setattr(jobs.subprocess, "Popen", popen)
    for env in (ATLAS_BUILDS_ENV, ATLAS_CPUS_ENV, ATLAS_MEMORY_ENV):
        monkeypatch.delenv(env, raising=False)
    yield commands
    for process in processes:
        process.kill()
        process.wait()


def test_a_second_build_under_another_name_is_refused_in_one_sentence(tmp_path, started):
    builds = BuildJobs()
    builds.start("minilm", "probes", tmp_path / "first")
    with pytest.raises(ModelError) as error:
        builds.start("minilm", "probes", tmp_path / "second")
    message = str(error.value)
    assert "\n" not in message and "one atlas build at a time" in message and ATLAS_BUILDS_ENV in message
    assert len(started) == 1 and not (tmp_path / "second").exists()  # nothing started, nothing written
    builds.start("minilm", "probes", tmp_path / "first")  # the same build again: it is running, nothing new
    assert len(started) == 1


def test_another_server_process_sharing_the_root_is_refused_too(tmp_path, started):
    """Two replicas behind nginx are two processes, each with its own BuildJobs: the slot is the root's."""
    BuildJobs().start("minilm", "probes", tmp_path / "first")
    with pytest.raises(ModelError, match="one atlas build at a time"):
        BuildJobs().start("minilm", "probes", tmp_path / "second")
    assert len(started) == 1


def test_the_operator_may_allow_more(tmp_path, started, monkeypatch):
    monkeypatch.setenv(ATLAS_BUILDS_ENV, "2")
    builds = BuildJobs()
    builds.start("minilm", "probes", tmp_path / "a")
    builds.start("minilm", "probes", tmp_path / "b")
    with pytest.raises(ModelError, match="2 atlas builds at a time"):
        builds.start("minilm", "probes", tmp_path / "c")
    assert len(started) == 2


def test_a_finished_build_frees_its_place(tmp_path, started):
    builds = BuildJobs()
    builds.start("minilm", "probes", tmp_path / "a")
    process = builds._jobs[str(tmp_path / "a")][0]
    process.kill()
    process.wait()
    builds.start("minilm", "probes", tmp_path / "b")
    assert len(started) == 2


def test_a_page_build_runs_inside_the_operators_budget(tmp_path, started, monkeypatch):
    monkeypatch.setenv(ATLAS_CPUS_ENV, "3")
    monkeypatch.setenv(ATLAS_MEMORY_ENV, "1500")
    BuildJobs().start("minilm", "probes", tmp_path / "a")
    command = started[0]
    assert command[command.index("--cpus") + 1] == "3" and command[command.index("--memory-mb") + 1] == "1500"


def test_the_budget_has_defaults_and_a_typo_falls_back_to_them(tmp_path, started, monkeypatch):
    monkeypatch.setenv(ATLAS_CPUS_ENV, "lots")
    BuildJobs().start("minilm", "probes", tmp_path / "a")
    command = started[0]
    assert int(command[command.index("--cpus") + 1]) >= 1 and int(command[command.index("--memory-mb") + 1]) >= 256


def test_the_budget_sizes_the_ray_it_starts():
    cpus, memory, store = pipeline.ray_budget(cpus=3, memory_mb=2000)
    assert cpus == 3 and memory + store == 2000 * 2**20 and 75 * 2**20 <= store < memory


def ray_sessions() -> set[str]:
    root = Path(tempfile.gettempdir()) / "ray"
    return {p.name for p in root.iterdir()} if root.is_dir() else set()


def test_ray_leaves_no_session_folder_behind():
    pytest.importorskip("ray")
    before = ray_sessions()
    with pipeline.ray_session(None, cpus=1, memory_mb=512) as started_here:
        import ray

        assert started_here and ray.cluster_resources()["CPU"] == 1
        session = Path(ray._private.worker._global_node.get_session_dir_path())
        assert session.is_dir() and not str(session).startswith(str(Path(tempfile.gettempdir()) / "ray"))
    assert not ray.is_initialized()
    assert not session.exists() and not session.parent.exists()
    assert ray_sessions() <= before
