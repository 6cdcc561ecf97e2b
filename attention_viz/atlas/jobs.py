"""Atlas builds started from the app: a separate ``atlas build`` process (Ray never starts inside
the web server), its progress read from what its workers write as they go (the progress log, and the
shards of earlier runs), its error output kept in the atlas folder (``build.log``), never beside it.

Each build starts a Ray cluster of its own (a dozen processes): at most ``ATTENTION_VIZ_ATLAS_BUILDS``
(default 1) run at once over an atlas root, whoever asks, under whatever name and from whichever
server process (a lock file per slot in the root, held by the running build), and one more is
refused in a sentence; each gets the CPUs and memory the operator set for page builds."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq

from ..errors import ModelError
from ..runtime.settings import (
    ATLAS_BUILDS_ENV,
    ATLAS_CPUS_ENV,
    ATLAS_MEMORY_ENV,
    DEFAULT_ATLAS_MEMORY_MB,
    half_the_cores,
    whole_number,
)
from . import layout
from .pipeline import MIN_BUILD_MB


@dataclass(frozen=True)
class BuildStatus:
    state: str  # "absent" | "running" | "done" | "failed"
    done: int = 0  # corpus records in the shards so far
    total: int = 0  # records in the corpus (0 until the build has read it)
    message: str = ""
    left: float | None = None  # seconds still to go, estimated from this run's pace so far (None: no pace yet)


def records_done(out: Path) -> int:
    rows = 0
    for path in layout.shard_files(out):
        try:
            rows += pq.read_metadata(path).num_rows
        except (OSError, ValueError):  # the shard being written
            pass
    return rows


class BuildJobs:
    def __init__(self) -> None:
        self._jobs: dict[str, tuple[subprocess.Popen, Path]] = {}
        self._first: dict[str, tuple[float, int]] = {}  # folder → (when, records) at the first batch seen done
        self._lock = threading.Lock()

    def start(self, model: str, corpus: str, out: str | Path) -> None:
        out = Path(out)
        with self._lock:
            job = self._jobs.get(str(out))
            if job is not None and job[0].poll() is None:
                return
            slot = take_slot(out.parent)
            try:
                resume = ["--resume"] if layout.read_manifest(out) is not None else []
                layout.claim(out)  # the log goes inside, so the folder must be one a build may write in
                log = out / layout.LOG
                command = [sys.executable, "-m", "attention_viz", "atlas", "build", "--model", model, "--corpus",
                           corpus, "--out", str(out), "--no-progress", *resume, *page_budget()]
                with open(log, "w", encoding="utf-8") as stderr:
                    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=stderr, pass_fds=(slot,),
                                               env={**os.environ, "HF_HUB_OFFLINE": os.environ.get("HF_HUB_OFFLINE", "1")})
            finally:
                os.close(slot)  # the build holds its copy, and with it the slot, until it exits
            self._jobs[str(out)] = (process, log)
            self._first.pop(str(out), None)

    def status(self, out: str | Path) -> BuildStatus:
        out = Path(out)
        manifest = layout.read_manifest(out)
        total = int((manifest or {}).get("corpus", {}).get("records", 0))
        with self._lock:
            job = self._jobs.get(str(out))
        if manifest is not None and manifest.get("complete"):
            return BuildStatus("done", total, total)
        if job is None:
            return BuildStatus("absent", records_done(out), total)
        process, log = job
        if process.poll() is None:
            return self._running(out, manifest or {}, total)
        lines = [line for line in log.read_text(encoding="utf-8", errors="replace").splitlines() if line.startswith("error:")]
        return BuildStatus("failed", records_done(out), total, lines[-1] if lines else f"exit code {process.returncode}")

    def _running(self, out: Path, manifest: dict, total: int) -> BuildStatus:
        """Records done = those earlier runs left in shards + the batches this run's workers finished.
        The pace is measured from the first finished batch on, so loading the models and starting Ray
        (before any batch) do not stretch the estimate."""
        pending = manifest.get("corpus", {}).get("pending")
        if not total or pending is None:  # still reading the corpus
            return BuildStatus("running", records_done(out), total)
        done_now = layout.progress_rows(out)
        done = min(total, total - int(pending) + done_now)
        now = time.monotonic()
        with self._lock:
            first = self._first.setdefault(str(out), (now, done_now)) if done_now else None
        left = None
        if first is not None and now > first[0] and done_now > first[1]:
            pace = (done_now - first[1]) / (now - first[0])  # records a second
            left = (total - done) / pace
        return BuildStatus("running", done, total, left=left)


SLOT = ".attention-viz-build-{}.lock"  # in the atlas root: one file per build allowed at once


def take_slot(root: Path) -> int:
    """A file descriptor holding one of the ``ATTENTION_VIZ_ATLAS_BUILDS`` build slots of the atlas root
    (an exclusive ``flock`` on its slot file), or a ModelError when every slot is held. The lock belongs
    to the open file, so a build started with the descriptor holds its slot until it exits, however
    many server processes share the root and whichever of them started it."""
    allowed = whole_number(ATLAS_BUILDS_ENV, 1)
    root.mkdir(parents=True, exist_ok=True)
    for i in range(allowed):
        slot = os.open(root / SLOT.format(i), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(slot, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return slot
        except BlockingIOError:
            os.close(slot)
    at_once = "one atlas build at a time" if allowed == 1 else f"{allowed} atlas builds at a time"
    raise ModelError(f"Another atlas build is running and this server runs {at_once} ({ATLAS_BUILDS_ENV}): "
                     "try again when it has finished.")


def page_budget() -> list[str]:
    """The ``atlas build`` options that size a page build's Ray: the operator's CPUs and memory."""
    cpus = whole_number(ATLAS_CPUS_ENV, half_the_cores())
    memory = whole_number(ATLAS_MEMORY_ENV, DEFAULT_ATLAS_MEMORY_MB, minimum=MIN_BUILD_MB)
    return ["--cpus", str(cpus), "--memory-mb", str(memory)]


def progress_line(status: BuildStatus, corpus: str = "probes") -> str:
    """What the page says under its progress bar while a build runs."""
    if not status.total:
        return f"Building the {corpus} atlas: reading the corpus…"
    line = f"Building the {corpus} atlas: {status.done:,} of {status.total:,} sentences"
    if status.left is None:  # no batch finished twice yet: the workers are starting
        return f"{line} · estimating the time left…"
    minutes = round(status.left / 60)
    return f"{line} · {'under a minute' if minutes < 1 else f'about {minutes} min'} left"
