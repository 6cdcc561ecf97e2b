"""Reading an atlas directory: the corpus-level summary (what ``atlas show`` prints), per-sentence
values of a head, its top sentences, and the token sample. Shards are read one at a time, so memory
stays bounded by a shard, not by the corpus. No torch here."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..errors import ModelError
from . import layout
from .stats import STATS, from_upper, offset_baseline

SUMMARY = "summary.json"


def _grid(values: np.ndarray, layers: int, heads: int) -> list[list[float]]:
    return np.asarray(values, dtype=np.float64).reshape(layers, heads).round(6).tolist()


@dataclass
class Atlas:
    folder: Path
    manifest: dict

    @classmethod
    def open(cls, folder: str | Path, name: str | None = None) -> Atlas:
        """The atlas in ``folder``, or one ModelError sentence for a folder that is not one (no
        manifest, a manifest that is not JSON or lacks its fields, a finished atlas without shards).
        ``name``: how messages call it (the page names atlases, never their server path)."""
        folder = Path(folder)
        called = name or str(folder)
        try:
            manifest = layout.read_manifest(folder)
        except ModelError:
            raise ModelError(f"{called} is not an atlas: its {layout.MANIFEST} is not a JSON object; rebuild it") from None
        if manifest is None:
            raise ModelError(f"{called} is not an atlas (no {layout.MANIFEST}): build one with `atlas build`")
        if manifest.get("schema_version") != layout.SCHEMA_VERSION:
            raise ModelError(f"{called} was built with atlas schema {manifest.get('schema_version')}, "
                             f"this version reads {layout.SCHEMA_VERSION}: rebuild it")
        missing = _missing_fields(manifest)
        if missing:
            raise ModelError(f"{called} is not an atlas this version can read: its {layout.MANIFEST} lacks "
                             f"{', '.join(missing)}; rebuild it")
        if manifest["complete"] and not layout.shard_files(folder):
            raise ModelError(f"{called} has lost its shards ({layout.SHARDS}/ is missing or empty): rebuild it")
        return cls(folder, manifest)

    @property
    def layers(self) -> int:
        return int(self.manifest["layers"])

    @property
    def heads(self) -> int:
        return int(self.manifest["heads"])

    @property
    def complete(self) -> bool:
        return bool(self.manifest.get("complete"))

    def _tables(self, columns: list[str]):
        """Each shard's rows (only ``columns``), a line read twice counted once."""
        seen: set[int] = set()
        for path in layout.shard_files(self.folder):
            try:
                table = pq.read_table(path, columns=["line", *[c for c in columns if c != "line"]])
            except (pa.ArrowInvalid, OSError) as error:  # not Parquet, or not our columns
                reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
                raise ModelError(f"{self.folder}: the shard {path.name} cannot be read ({reason}); rebuild the atlas") from None
            lines = table.column("line").to_numpy()
            fresh = np.array([line not in seen for line in lines.tolist()], dtype=bool)
            seen.update(lines.tolist())
            yield table.filter(pa.array(fresh)) if not fresh.all() else table

    def summary(self) -> dict:
        """The ``atlas show --json`` document (read from ``summary.json`` once the build completed)."""
        cached = self.folder / SUMMARY
        if self.complete and cached.is_file():
            try:
                return json.loads(cached.read_text(encoding="utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError):
                raise ModelError(f"{self.folder}: its {SUMMARY} is not JSON; rebuild the atlas") from None
        return self.aggregate()

    def aggregate(self) -> dict:
        """One pass over the shards: every statistic token-weighted over all query tokens of all
        sentences; relation accuracies; the mean JS divergence between heads."""
        L, H = self.layers, self.heads
        A = L * H
        sentences = tokens = 0
        skipped: list[dict] = []
        truncated: list[dict] = []  # lines longer than the model reads: how many tokens it did not
        sums = {name: np.zeros(A) for name in STATS}
        relation_total: dict[str, int] = defaultdict(int)
        relation_hits: dict[str, np.ndarray] = defaultdict(lambda: np.zeros(A))
        relation_offsets: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
        js_sum, js_count = np.zeros(A * (A - 1) // 2), 0
        columns = ["reason", "n_tokens", "tokens_dropped", *STATS, "rel_names", "rel_from", "rel_to", "rel_pred", "js"]
        for table in self._tables(columns):
            reasons = table.column("reason").to_pylist()
            lines = table.column("line").to_pylist()
            skipped += [{"line": line, "reason": reason} for line, reason in zip(lines, reasons) if reason is not None]
            kept = table.filter(pc.is_null(table.column("reason")))
            if not kept.num_rows:
                continue
            truncated += [{"line": line, "tokens_dropped": dropped} for line, dropped in
                          zip(kept.column("line").to_pylist(), kept.column("tokens_dropped").to_pylist()) if dropped]
            n = kept.column("n_tokens").to_numpy().astype(np.float64)
            sentences += kept.num_rows
            tokens += int(n.sum())
            for name in STATS:
                sums[name] += n @ _matrix(kept.column(name), A)
            for names, dependents, gold, predicted in zip(*(kept.column(c).to_pylist() for c in
                                                            ("rel_names", "rel_from", "rel_to", "rel_pred"))):
                for name, dependent, head_word, prediction in zip(names, dependents, gold, predicted):
                    relation_total[name] += 1
                    relation_hits[name] += np.asarray(prediction) == head_word
                    relation_offsets[name][head_word - dependent] += 1
            js = kept.column("js")
            if js.null_count < kept.num_rows:
                present = js.filter(pc.is_valid(js))
                js_sum += _matrix(present, A * (A - 1) // 2).sum(axis=0)
                js_count += len(present)
        document: dict = {
            "sentences": sentences,
            "skipped": sorted(skipped, key=lambda s: s["line"]),
            "truncated": sorted(truncated, key=lambda t: t["line"]),
            "stats": {name: _grid(sums[name] / tokens, L, H) for name in STATS} if tokens else {},
        }
        if self.manifest["corpus"].get("probes"):
            document["relations"] = {name: _relation(relation_hits[name] / total, relation_offsets[name], total, L, H)
                                     for name, total in sorted(relation_total.items())}
        document["tokens"] = tokens
        document["js"] = {"sentences": js_count,
                          "divergence": from_upper(js_sum / max(js_count, 1), A).round(6).tolist()}
        return document

    def js_matrix(self) -> np.ndarray:
        """Mean Jensen–Shannon divergence between every two heads ``[L·H, L·H]`` (head = layer·H + head)."""
        return np.asarray(self.summary()["js"]["divergence"], dtype=np.float64)

    def values(self, stat: str, layer: int, head: int) -> tuple[np.ndarray, np.ndarray]:
        """(line numbers, per-sentence values) of one head's statistic, over every sentence that ran."""
        if stat not in STATS:
            raise ModelError(f"unknown statistic {stat!r}; choose from {', '.join(STATS)}")
        index = layer * self.heads + head
        lines, values = [], []
        for table in self._tables(["reason", stat]):
            kept = table.filter(pc.is_null(table.column("reason")))
            lines.append(kept.column("line").to_numpy())
            values.append(_matrix(kept.column(stat), self.layers * self.heads)[:, index])
        if not lines:
            return np.zeros(0, np.int64), np.zeros(0)
        return np.concatenate(lines), np.concatenate(values)

    def sentences(self, lines: list[int]) -> dict[int, dict]:
        """Text, token labels and kinds of the given lines."""
        wanted = set(int(line) for line in lines)
        found: dict[int, dict] = {}
        for table in self._tables(["text", "labels", "kinds", "word_ids"]):
            mask = np.isin(table.column("line").to_numpy(), list(wanted))
            for row in table.filter(pa.array(mask)).to_pylist():
                found[row["line"]] = row
        return found

    def top_sentences(self, stat: str, layer: int, head: int, k: int = 5) -> list[dict]:
        """The ``k`` sentences where the head's statistic is highest, with their text and labels."""
        lines, values = self.values(stat, layer, head)
        order = np.lexsort((lines, -values))[:k]
        rows = self.sentences(lines[order].tolist())
        return [{**rows[int(lines[i])], "value": float(values[i])} for i in order]


def truncation_note(truncated: list[dict]) -> str:
    """One sentence: how many lines were longer than the model reads, and by how much."""
    dropped = [t["tokens_dropped"] for t in truncated]
    lines = "1 line was" if len(dropped) == 1 else f"{len(dropped):,} lines were"
    return (f"{lines} longer than the model reads: cut at its limit, {sum(dropped):,} tokens in all not read "
            f"(at most {max(dropped):,} from one line, line {truncated[dropped.index(max(dropped))]['line']})")


def _missing_fields(manifest: dict) -> list[str]:
    """The manifest fields a reader relies on that are absent or of the wrong type."""
    corpus = manifest.get("corpus")
    wanted = {
        "model": isinstance(manifest.get("model"), str),
        "complete": isinstance(manifest.get("complete"), bool),
        "corpus.source": isinstance(corpus, dict) and isinstance(corpus.get("source"), str),
    }
    if manifest.get("complete") is True:
        wanted.update({name: isinstance(manifest.get(name), int) and manifest[name] > 0 for name in ("layers", "heads")})
        wanted["counts"] = isinstance(manifest.get("counts"), dict)
    return [name for name, ok in wanted.items() if not ok]


def _relation(accuracy: np.ndarray, offsets: dict[int, int], total: int, L: int, H: int) -> dict:
    best = int(np.argmax(accuracy))
    offset, baseline = offset_baseline(offsets, total)
    return {
        "count": total,
        "accuracy": _grid(accuracy, L, H),
        "best": {"layer": best // H, "head": best % H, "accuracy": round(float(accuracy[best]), 6)},
        "baseline": {"offset": offset, "accuracy": round(baseline, 6)},
    }


def _matrix(column: pa.ChunkedArray | pa.Array, width: int) -> np.ndarray:
    """A fixed_size_list column without nulls → ``[rows, width]`` float64."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    return column.flatten().to_numpy(zero_copy_only=False).astype(np.float64).reshape(-1, width)



def read_sample(folder: str | Path, columns: list[str]) -> pa.Table:
    """The token sample ordered by (line, position) — the order every index and embedding uses —
    with ``columns`` (e.g. ``q_3``, ``h_0``) gathered from the shards, one shard at a time."""
    folder = Path(folder)
    path = folder / layout.SAMPLE
    if not path.is_file():
        raise ModelError(f"{folder} has no token sample (the build did not finish)")
    sample = pq.read_table(path)
    if not columns:
        return sample
    lines = np.unique(sample.column("line").to_numpy())
    parts, seen = [], set()
    for shard in layout.shard_files(folder):
        table = pq.read_table(shard, columns=["line", *columns])
        line = table.column("line").to_numpy()
        table = table.filter(pa.array(np.isin(line, lines) & ~np.isin(line, list(seen))))
        if not table.num_rows:
            continue
        seen.update(table.column("line").to_pylist())
        lengths = pc.list_value_length(table.column(columns[0])).to_numpy()
        flat = {"line": pa.array(np.repeat(table.column("line").to_numpy(), lengths)),
                "position": pa.array(np.concatenate([np.arange(n) for n in lengths]).astype(np.int32))}
        flat.update({name: pc.list_flatten(table.column(name)) for name in columns})
        parts.append(pa.table(flat))
    gathered = pa.concat_tables(parts).sort_by([("line", "ascending"), ("position", "ascending")])
    if gathered.num_rows != sample.num_rows:
        raise ModelError(f"{folder}: the shards no longer match the sample: rebuild the atlas")
    for name in columns:
        sample = sample.append_column(name, gathered.column(name))
    return sample


def vectors(table: pa.Table, column: str) -> np.ndarray:
    """A fixed_size_list column of the sample as ``[tokens, width]`` float32."""
    data = table.column(column).combine_chunks()
    return data.flatten().to_numpy(zero_copy_only=False).astype(np.float32).reshape(len(data), -1)
