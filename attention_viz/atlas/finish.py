"""After the corpus pass: the capped token sample, the neighbour indexes, the summary and the
manifest marked complete. Runs in the driver, reading the shards one at a time."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..errors import ModelError
from . import layout
from .neighbors import build_indexes
from .store import SUMMARY, Atlas


def dimensions(out: Path) -> dict:
    """layers, heads, kv_heads and d_k (0 without q/k), d_model (0 without layer outputs), from the
    shard schema: queries are ``heads · d_k`` wide, keys ``kv_heads · d_k``."""
    for path in layout.shard_files(out):
        table = pq.read_table(path, columns=["layers", "heads"])
        if table.num_rows:
            schema = pq.read_schema(path)
            heads = int(table["heads"][0].as_py())
            d_k = schema.field("q_0").type.value_type.list_size // heads if "q_0" in schema.names else 0
            kv_heads = schema.field("k_0").type.value_type.list_size // d_k if d_k else 0
            d_model = schema.field("h_0").type.value_type.list_size if "h_0" in schema.names else 0
            return {"layers": int(table["layers"][0].as_py()), "heads": heads, "kv_heads": kv_heads,
                    "d_k": d_k, "d_model": d_model}
    raise ModelError(f"{out} has no shards: the build wrote nothing")


def chosen_lines(out: Path, cap: int) -> np.ndarray:
    """The sampled sentences kept under the token cap, lowest priority first (a fixed hash of the
    line number, so the choice is the same however the build was split or resumed)."""
    parts = []
    for path in layout.shard_files(out):
        table = pq.read_table(path, columns=["line", "priority", "n_tokens", "sampled"])
        parts.append(table.filter(pc.equal(table.column("sampled"), True)))
    table = pa.concat_tables(parts) if parts else None
    if table is None or not table.num_rows:
        return np.zeros(0, np.int64)
    lines = table.column("line").to_numpy()
    lines, first = np.unique(lines, return_index=True)
    priority = table.column("priority").to_numpy()[first]
    n_tokens = table.column("n_tokens").to_numpy()[first]
    order = np.lexsort((lines, priority))
    keep = order[np.cumsum(n_tokens[order]) <= cap]
    return np.sort(lines[keep])


def write_sample(out: Path, lines: np.ndarray) -> int:
    """``sample.parquet``: one row per token of the chosen sentences — (line, position), label, kind.
    Their q/k and layer outputs stay in the shards (no second copy). Returns the token count."""
    parts, seen = [], set()
    for shard in layout.shard_files(out):
        table = pq.read_table(shard, columns=["line", "labels", "kinds"])
        line = table.column("line").to_numpy()
        table = table.filter(pa.array(np.isin(line, lines) & ~np.isin(line, list(seen))))
        if not table.num_rows:
            continue
        seen.update(table.column("line").to_pylist())
        lengths = pc.list_value_length(table.column("labels")).to_numpy()
        parts.append(pa.table({
            "line": pa.array(np.repeat(table.column("line").to_numpy(), lengths)),
            "position": pa.array(np.concatenate([np.arange(n) for n in lengths]).astype(np.int32)),
            "label": pc.list_flatten(table.column("labels")),
            "kind": pc.list_flatten(table.column("kinds")),
        }))
    schema = pa.schema([("line", pa.int64()), ("position", pa.int32()), ("label", pa.string()), ("kind", pa.int8())])
    sample = pa.concat_tables(parts).cast(schema) if parts else schema.empty_table()
    sample = sample.sort_by([("line", "ascending"), ("position", "ascending")])
    pq.write_table(sample, Path(out) / layout.SAMPLE)
    return sample.num_rows


def finish(out: Path, manifest: dict) -> dict:
    out = Path(out)
    dims = dimensions(out)
    manifest.update(dims)
    layout.write_manifest(out, manifest)
    for stale in (layout.SAMPLE, SUMMARY):
        layout.remove(out, stale)
    sample = write_sample(out, chosen_lines(out, manifest["sample_tokens"]))
    if sample and dims["d_model"]:
        build_indexes(out, dims["layers"])
    summary = Atlas(out, manifest).aggregate()
    (out / SUMMARY).write_text(json.dumps(summary), encoding="utf-8")
    manifest["counts"] = {
        "sentences": summary["sentences"], "skipped": len(summary["skipped"]), "tokens": summary["tokens"],
        "sample_tokens": sample, "js_sentences": summary["js"]["sentences"],
    }
    manifest["complete"] = True
    layout.write_manifest(out, manifest)
    return manifest
