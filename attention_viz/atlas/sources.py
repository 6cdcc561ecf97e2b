"""Corpus readers: a source spec → records ``(line, text, reason, relations)``, streamed.

Supported: ``.txt`` (one sentence a line), ``.jsonl`` (a string field, ``text`` by default),
``.csv`` (a named column, ``text`` by default), ``.parquet`` (a string column), a folder of
``.txt``/``.jsonl`` files (read in name order, as if one file), and ``probes`` / ``probes:N`` /
``probes:N:SEED`` (the built-in template corpus with gold relations).

``line`` is the record's 1-based number in the source (for .txt and .jsonl the file's line number;
in a folder, the files' lines counted on from one file to the next).
A record that cannot be read (bad JSON, missing field, empty text) carries a ``reason`` and is
recorded as skipped by the build; a file that is not UTF-8, not found or not a supported format is
a :class:`ModelError` (one line) before anything runs.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..errors import ModelError
from . import probes

FORMATS = (".txt", ".jsonl", ".csv", ".parquet")
FOLDER_FORMATS = (".txt", ".jsonl")  # line-numbered files, so a folder's lines number on from file to file
PROBES = "probes"
ACCEPTED = "a .txt, .jsonl, .csv or .parquet file, a folder of .txt/.jsonl files, or probes"


@dataclass(frozen=True)
class Record:
    line: int
    text: str
    reason: str | None = None  # why it cannot be used; None for a usable record
    relations: tuple[tuple[str, int, int], ...] = ()


@dataclass(frozen=True)
class Source:
    spec: str
    column: str = "text"

    @property
    def is_probes(self) -> bool:
        return self.spec == PROBES or self.spec.startswith(PROBES + ":")

    @property
    def path(self) -> Path:
        return Path(self.spec)

    def probe_size(self) -> tuple[int, int]:
        parts = self.spec.split(":")[1:]
        try:
            n = int(parts[0]) if parts else probes.DEFAULT_SIZE
            seed = int(parts[1]) if len(parts) > 1 else probes.DEFAULT_SEED
        except ValueError:
            raise ModelError(f"{self.spec!r}: use probes, probes:N or probes:N:SEED") from None
        if n < 1 or len(parts) > 2:
            raise ModelError(f"{self.spec!r}: use probes, probes:N or probes:N:SEED with N ≥ 1")
        return n, seed

    def files(self) -> list[Path]:
        """A folder's corpus files, in name order (the order their lines are numbered in)."""
        return sorted((path for path in self.path.iterdir() if path.suffix.lower() in FOLDER_FORMATS and path.is_file()),
                      key=lambda path: path.name)

    def check(self) -> None:
        """Refuse a source that cannot be read at all, before anything starts."""
        if self.is_probes:
            self.probe_size()
            return
        if self.path.is_dir():
            if not self.files():
                raise ModelError(f"the folder {self.spec} holds no .txt or .jsonl files: a corpus is {ACCEPTED}")
            return
        if self.path.suffix.lower() not in FORMATS:
            raise ModelError(f"unsupported corpus format {self.path.name!r}: a corpus is {ACCEPTED}")
        if not self.path.is_file():
            raise ModelError(f"corpus not found: {self.spec}")

    def sha256(self) -> str:
        """Identity of the corpus: the file's bytes, or the probes' size, seed and template version."""
        self.check()
        if self.is_probes:
            n, seed = self.probe_size()
            return hashlib.sha256(f"probes:{n}:{seed}:v{probes.VERSION}".encode()).hexdigest()
        digest = hashlib.sha256()
        for path in self.files() if self.path.is_dir() else [self.path]:
            if self.path.is_dir():  # a file's name and size too: renaming or splitting a file changes the corpus
                digest.update(f"{path.name}\0{path.stat().st_size}\0".encode())
            with open(path, "rb") as file:
                for chunk in iter(lambda: file.read(1 << 20), b""):
                    digest.update(chunk)
        return digest.hexdigest()

    def records(self) -> Iterator[Record]:
        """Every record in source order; memory stays bounded whatever the corpus size."""
        self.check()
        if self.is_probes:
            yield from _probe_records(*self.probe_size())
            return
        if self.path.is_dir():
            yield from _folder_records(self.files(), self.column)
            return
        yield from READERS[self.path.suffix.lower()](self.path, self.column)


def _probe_records(n: int, seed: int) -> Iterator[Record]:
    for i, probe in enumerate(probes.generate(n, seed), start=1):
        yield Record(i, probe.text, None, probe.relations)


def _record(line: int, text: str) -> Record:
    return Record(line, text, "empty line" if not text.strip() else None)


def _decoded_lines(path: Path) -> Iterator[tuple[int, str]]:
    with open(path, "rb") as file:
        for number, raw in enumerate(file, start=1):
            try:
                yield number, raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError as error:
                raise ModelError(
                    f"{path.name} is not UTF-8 (line {number}, byte {error.start + 1}): re-save it as UTF-8") from None


def _txt(path: Path, _: str) -> Iterator[Record]:
    for number, text in _decoded_lines(path):
        yield _record(number, text.removeprefix("\ufeff") if number == 1 else text)


def _jsonl(path: Path, column: str) -> Iterator[Record]:
    for number, line in _decoded_lines(path):
        if not line.strip():
            yield Record(number, "", "empty line")
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as error:
            yield Record(number, "", f"not JSON: {error.msg} (column {error.colno})")
            continue
        if not isinstance(value, dict) or column not in value:
            yield Record(number, "", f"no {column!r} field")
        elif not isinstance(value[column], str):
            yield Record(number, "", f"{column!r} is not a string")
        else:
            yield _record(number, value[column])


def _csv(path: Path, column: str) -> Iterator[Record]:
    with open(path, "rb") as raw:
        text = io.TextIOWrapper(raw, encoding="utf-8-sig", errors="strict", newline="")
        try:
            reader = csv.DictReader(text)
            if reader.fieldnames is None:
                return
            if column not in reader.fieldnames:
                raise ModelError(f"{path.name} has no column {column!r} (columns: {', '.join(reader.fieldnames)})")
            for number, row in enumerate(reader, start=1):
                value = row.get(column)
                if value is None:
                    yield Record(number, "", f"row has no {column!r} value")
                else:
                    yield _record(number, value)
        except UnicodeDecodeError as error:
            raise ModelError(f"{path.name} is not UTF-8 (byte {error.start + 1} of a read block): re-save it as UTF-8") from None
        except csv.Error as error:
            raise ModelError(f"{path.name} is not valid CSV: {error}") from None


def _parquet(path: Path, column: str) -> Iterator[Record]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        file = pq.ParquetFile(path)
    except (pa.ArrowInvalid, OSError) as error:
        raise ModelError(f"{path.name} is not a Parquet file: {error}") from None
    names = file.schema_arrow.names
    if column not in names:
        raise ModelError(f"{path.name} has no column {column!r} (columns: {', '.join(names)})")
    kind = file.schema_arrow.field(column).type
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        raise ModelError(f"column {column!r} of {path.name} holds {kind}, not text")
    number = 0
    for batch in file.iter_batches(batch_size=4096, columns=[column]):
        for value in batch.column(0).to_pylist():
            number += 1
            yield Record(number, "", "empty value") if value is None else _record(number, value)


READERS = {".txt": _txt, ".jsonl": _jsonl, ".csv": _csv, ".parquet": _parquet}


def _folder_records(files: list[Path], column: str) -> Iterator[Record]:
    """Each file's records, numbered on from the previous file's last line."""
    offset = 0
    for path in files:
        last = 0
        for record in READERS[path.suffix.lower()](path, column):
            last = record.line
            yield Record(offset + record.line, record.text, record.reason, record.relations)
        offset += last
