"""Process-wide settings, applied where a process starts (the CLI, the Streamlit server), never on
import: a library must not change the environment of whoever imports it.

Call :func:`apply_process_settings` before torch is imported; the OpenMP and allocator variables
are read once, when torch loads.
"""

from __future__ import annotations

import gc
import logging
import os

ALLOW_DOWNLOAD_ENV = "ATTENTION_VIZ_ALLOW_DOWNLOAD"
# the operator's opt-in to a checkpoint's own Python (transformers' trust_remote_code): off by default
ALLOW_REMOTE_CODE_ENV = "ATTENTION_VIZ_ALLOW_REMOTE_CODE"
DEVICE_ENV = "ATTENTION_VIZ_DEVICE"  # cpu, cuda or auto (see runtime/device.py)
DTYPE_ENV = "ATTENTION_VIZ_DTYPE"  # float32, bfloat16 or float16
# What one server lets its visitors cause (docs/deploy.md, "Work a visitor can cause"):
ATLAS_BUILDS_ENV = "ATTENTION_VIZ_ATLAS_BUILDS"  # atlas builds the app runs at once (default 1)
ATLAS_CPUS_ENV = "ATTENTION_VIZ_ATLAS_CPUS"  # logical CPUs of the Ray a page build starts (default: half the cores)
ATLAS_MEMORY_ENV = "ATTENTION_VIZ_ATLAS_MEMORY_MB"  # that Ray's memory: object store and tasks (default 2048)
CACHE_MB_ENV = "ATTENTION_VIZ_CACHE_MB"  # bytes the cached results and figures may hold (default 1024)
DOWNLOAD_MB_ENV = "ATTENTION_VIZ_DOWNLOAD_MB"  # the largest file the page builds for a download (default 256)
DEFAULT_DOWNLOAD_MB = 256
DEFAULT_ATLAS_MEMORY_MB = 2048  # the model workers of a probes build (minilm: well under 1 GB each) and their batches
DEFAULT_CACHE_MB = 1024


def whole_number(env: str, default: int, minimum: int = 1) -> int:
    """The operator's whole number in ``env``, or ``default`` when it is unset or not a whole number
    ≥ ``minimum`` (said in the log: a typo in a setting must not keep the server from starting)."""
    raw = os.environ.get(env, "").strip()
    if not raw:
        return default
    if not raw.isdigit() or int(raw) < minimum:
        logging.getLogger("attention_viz").warning("%s=%r is not a whole number ≥ %d: using %d", env, raw, minimum,
                                                   default)
        return default
    return int(raw)


def half_the_cores() -> int:
    return max(1, (os.cpu_count() or 2) // 2)


def downloads_allowed() -> bool:
    """The user's explicit opt-in to fetching models from the hub."""
    return os.environ.get(ALLOW_DOWNLOAD_ENV) == "1"


def remote_code_allowed() -> bool:
    """The operator's explicit opt-in to running a checkpoint's own modelling code."""
    return os.environ.get(ALLOW_REMOTE_CODE_ENV) == "1"


def requested_placement() -> tuple[str | None, str | None]:
    """The operator's device and dtype (``ATTENTION_VIZ_DEVICE``, ``ATTENTION_VIZ_DTYPE``), None where
    unset; runtime/device.py checks and resolves them."""
    return (os.environ.get(DEVICE_ENV, "").strip() or None, os.environ.get(DTYPE_ENV, "").strip() or None)


def apply_process_settings() -> None:
    """Offline unless downloads are allowed, and the torch tuning measured in benchmarks/.

    * ``HF_HUB_OFFLINE`` / ``TRANSFORMERS_OFFLINE``: without them an unreachable hub costs ~48 s of
      DNS waiting before an error. (The hf backend is offline without them too: it passes
      ``local_files_only``; these also cover what transformers looks up on its own.)
    * ``OMP_WAIT_POLICY=PASSIVE``: busy-waiting OpenMP threads starve the Python thread on a small
      shared machine.
    * ``THP_MEM_ALLOC_ENABLE=1``: 2 MB pages cut the page faults of the patterns a long run
      writes (one fault per 2 MB instead of per 4 kB).

    * ``TRANSFORMERS_VERBOSITY=error``, ``HF_HUB_DISABLE_PROGRESS_BARS=1``: a checkpoint with unused
      weights otherwise prints transformers' multi-line load report (and a progress bar) on stderr,
      where the CLI's errors are one line and the server's log is for the server.

    Values the user already set are kept.
    """
    if not downloads_allowed():
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")


_heap_frozen = False


def freeze_startup_heap() -> None:
    """Once per process, after the server's first run: hide everything alive then (torch,
    transformers, plotly, pandas, the loaded model) from the cyclic garbage collector.

    Streamlit collects every generation after each run (``runner.postScriptGC``), to keep a
    server's memory flat; walking those millions of long-lived objects was ~70% of the server's
    CPU per run (benchmarks/load: 0.28 → 0.07 CPU-s per step). Objects made later are still
    collected after every run; frozen ones are still freed by reference counting.
    """
    global _heap_frozen
    if not _heap_frozen:
        _heap_frozen = True
        gc.collect()
        gc.freeze()
