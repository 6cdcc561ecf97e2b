"""Where things live in an atlas directory, and the JSON manifest.

```
DIR/.attention-viz-atlas   the marker: `atlas build` made this folder (it removes or rewrites nothing in a folder without it)
DIR/build.log              a build started from the app: its error output
DIR/progress.log           one line per batch a worker finished in the current run: its row count
DIR/manifest.json          model, corpus hash, counts, dimensions, schema version, complete?
DIR/pending/part-*.parquet  the corpus rows still to run (a build's input; removed when it completes)
DIR/shards/*.parquet        one row per corpus record, written by the Ray workers (see pipeline.SCHEMA)
DIR/sample.parquet          the capped token sample: (line, position), label, kind (vectors stay in the shards)
DIR/neighbors/layer_*.faiss inner-product index per layer over the sample's (unit) layer outputs
DIR/embeddings/*.npz        joint query–key embeddings, computed on request and cached
```
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from ..errors import ModelError

SCHEMA_VERSION = 2  # 2: keys per KV head (grouped-query models), tokens dropped per line
MARKER = ".attention-viz-atlas"
LOG = "build.log"
PROGRESS = "progress.log"  # appended by every worker (one short write a batch), read by the page's progress bar
MANIFEST = "manifest.json"
PENDING = "pending"
SHARDS = "shards"
SAMPLE = "sample.parquet"
NEIGHBORS = "neighbors"
EMBEDDINGS = "embeddings"

# Build defaults (here, so the command line can show them without importing pyarrow or Ray).
SAMPLE_TOKENS = 25_000  # cap on the q/k/representation sample: 50k points in the joint Q–K view (AttentionViz: ~60k)
JS_SENTENCES = 1000  # sentences whose head-to-head JS divergences are averaged (Clark et al. used 1,000)


def read_manifest(out: Path) -> dict | None:
    """The manifest, None when there is none, ModelError when the file is not a JSON object."""
    path = Path(out) / MANIFEST
    if not path.is_file():
        return None
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        manifest = None
    if not isinstance(manifest, dict):
        raise ModelError(f"{out} is not an atlas: its {MANIFEST} is not an atlas manifest (not a JSON object)")
    return manifest


def claim(out: Path) -> None:
    """Make ``out`` a folder a build may write in: a new or empty folder gets the marker; a folder
    with the marker is ours already; anything else (someone's files) is refused, untouched."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ModelError(f"{out} is a file, not a folder: choose a new folder for the atlas")
    if (out / MARKER).is_file():
        return
    if out.is_dir() and any(out.iterdir()):
        raise ModelError(f"{out} is not empty and was not made by `atlas build`: choose a new or empty folder")
    out.mkdir(parents=True, exist_ok=True)
    (out / MARKER).write_text("made by attention-viz atlas build: it may remove pending/, shards/ and the rest here\n",
                              encoding="utf-8")


def write_manifest(out: Path, manifest: dict) -> None:
    """Written to a temporary file and renamed, so a killed build never leaves half a manifest."""
    path = Path(out) / MANIFEST
    temporary = path.with_suffix(".json.tmp")
    temporary.write_text(json.dumps(manifest, indent=2, sort_keys=True), encoding="utf-8")
    os.replace(temporary, path)


def note_progress(out: Path, rows: int) -> None:
    """Add a finished batch of ``rows`` records to the run's progress. One short append: writes of a
    line in append mode never interleave, so workers in several processes share the file safely."""
    with open(Path(out) / PROGRESS, "a", encoding="utf-8") as log:
        log.write(f"{rows}\n")


def progress_rows(out: Path) -> int:
    """Records the workers of the current run have finished so far (0 before the first batch)."""
    try:
        text = (Path(out) / PROGRESS).read_text(encoding="utf-8")
    except OSError:
        return 0
    return sum(int(line) for line in text.splitlines() if line.strip().isdigit())


def shard_files(out: Path) -> list[Path]:
    folder = Path(out) / SHARDS
    return sorted(folder.glob("*.parquet")) if folder.is_dir() else []


def remove(out: Path, name: str) -> None:
    """Remove ``out/name`` (a file or a folder of ours: pending/, a stale sample), only where the
    marker says a build made ``out``."""
    out = Path(out)
    target = out / name
    if not target.exists() and not target.is_symlink():
        return
    if not (out / MARKER).is_file():
        raise ModelError(f"{out} was not made by `atlas build`: nothing in it is removed; choose a new or empty folder")
    if target.is_dir() and not target.is_symlink():
        shutil.rmtree(target)
    else:
        target.unlink()
