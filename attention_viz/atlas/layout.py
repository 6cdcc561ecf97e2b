"""Where things live in an atlas directory, and the JSON manifest.

```
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
from pathlib import Path

SCHEMA_VERSION = 1
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
    path = Path(out) / MANIFEST
    if not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


def write_manifest(out: Path, manifest: dict) -> None:
    """Written to a temporary file and renamed, so a killed build never leaves half a manifest."""
    path = Path(out) / MANIFEST
    temporary = path.with_suffix(".json.tmp")
    temporary.write_text(json.dumps(manifest, indent=2, sort_keys=True), encoding="utf-8")
    os.replace(temporary, path)


def shard_files(out: Path) -> list[Path]:
    folder = Path(out) / SHARDS
    return sorted(folder.glob("*.parquet")) if folder.is_dir() else []
