"""The corpus pass on Ray Data: read → batches grouped by length → ``map_batches`` with a model actor →
Parquet shards, then the atlas is finished (sample, neighbour indexes, manifest).

1. The driver streams the source once (bounded memory): it hashes it, counts it, and writes the
   rows not yet done to ``pending/`` in row groups of sentences of similar length.
2. Ray Data reads ``pending/``, runs :class:`~attention_viz.atlas.worker.AtlasWorker` actors (one
   model each) over batches, and writes the shards with pyarrow (``write_parquet``). ``ray.init()``
   is local unless ``address``/``RAY_ADDRESS`` names a cluster; the code is the same.
3. :func:`attention_viz.atlas.finish.finish` keeps the capped token sample, builds the faiss
   indexes and writes the manifest with ``complete: true``.

The folder is claimed first (:func:`~attention_viz.atlas.layout.claim`): a build writes and removes
only in a folder it made, marked so, never in someone else's.

A killed build leaves complete shards (and perhaps one torn file, dropped on resume); ``resume``
runs only the records no shard holds. Which sentences are sampled depends only on the record's line
number (a hash) and the corpus size, so a resumed atlas equals an uninterrupted one.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import ModelError
from ..runtime.settings import DEVICE_ENV
from . import layout
from .sources import Record, Source

PENDING_SCHEMA = pa.schema([
    ("line", pa.int64()), ("text", pa.string()), ("reason", pa.string()), ("priority", pa.float64()),
    ("words", pa.int32()), ("rel_names", pa.list_(pa.string())), ("rel_from", pa.list_(pa.int32())),
    ("rel_to", pa.list_(pa.int32())),
])
LENGTH_BUCKET = 4  # sentences whose word counts share len // 4 run in the same batches
# rows per pending file, the block Ray reads and a worker's model call: about a second of work (all a killed
# worker loses); Ray bundles smaller files up to it
BATCH_ROWS = 16
SAMPLE_MARGIN = 1.2  # sample a little more than the estimate needs; finish() trims to the cap


@dataclass(frozen=True)
class Plan:
    records: int  # records in the whole source
    pending: int  # records this run will process
    sample_below: float
    js_below: float


def priority(line: int) -> float:
    """A uniform number in [0, 1) fixed by the line number alone (splitmix64): which sentences are
    sampled never depends on how the corpus was split among workers or runs."""
    z = (line * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return ((z ^ (z >> 31)) >> 11) / float(1 << 53)


def done_lines(out: Path) -> np.ndarray:
    """Line numbers already in a shard. A shard torn by a kill (no footer) is removed: it is redone."""
    done = []
    for path in layout.shard_files(out):
        try:
            done.append(pq.read_table(path, columns=["line"]).column("line").to_numpy())
        except (pa.ArrowInvalid, OSError):
            path.unlink()
    return np.unique(np.concatenate(done)) if done else np.zeros(0, np.int64)


def _pending_rows(records: Iterator[Record], done: np.ndarray, writer: Callable[[list[dict]], None]) -> tuple[int, int, int]:
    """Stream the records into length buckets; flush a bucket when it holds a batch."""
    buckets: dict[int, list[dict]] = {}
    total = words_total = pending = 0
    done_set = set(done.tolist())
    for record in records:
        total += 1
        words = len(record.text.split())
        words_total += words
        if record.line in done_set:
            continue
        pending += 1
        bucket = buckets.setdefault(words // LENGTH_BUCKET, [])
        bucket.append({
            "line": record.line, "text": record.text, "reason": record.reason, "priority": priority(record.line),
            "words": words, "rel_names": [r[0] for r in record.relations],
            "rel_from": [r[1] for r in record.relations], "rel_to": [r[2] for r in record.relations],
        })
        if len(bucket) >= BATCH_ROWS:
            writer(bucket)
            buckets[words // LENGTH_BUCKET] = []
    for key in sorted(buckets):
        if buckets[key]:
            writer(buckets[key])
    return total, words_total, pending


class _PendingWriter:
    """One file per flushed bucket: a file is the unit Ray reads, so each becomes one block of
    BATCH_ROWS sentences of similar length (and a small corpus still spreads over every worker)."""

    def __init__(self, folder: Path) -> None:
        self.folder, self.files = folder, 0

    def __call__(self, rows: list[dict]) -> None:
        pq.write_table(pa.Table.from_pylist(rows, schema=PENDING_SCHEMA), self.folder / f"part-{self.files:06d}.parquet")
        self.files += 1


def plan(source: Source, out: Path, done: np.ndarray, sample_tokens: int, js_sentences: int,
         progress: bool) -> Plan:
    """Write ``pending/`` and decide the sampling thresholds from the corpus size."""
    folder = out / layout.PENDING
    layout.remove(out, layout.PENDING)  # a killed build's leftovers; refused in a folder we did not make
    layout.remove(out, layout.PROGRESS)  # the progress of a run before this one
    folder.mkdir(parents=True)
    records = source.records()
    if progress:
        from tqdm import tqdm

        records = tqdm(records, desc="reading corpus", unit=" lines", mininterval=1.0)
    total, words, pending = _pending_rows(records, done, _PendingWriter(folder))
    if total == 0:
        raise ModelError(f"the corpus {source.spec} is empty: nothing to build")
    estimated_tokens = 1.3 * words + 2 * total  # WordPiece ≈ 1.3 tokens a word, plus [CLS]/[SEP]
    return Plan(
        records=total,
        pending=pending,
        sample_below=min(1.0, SAMPLE_MARGIN * sample_tokens / max(estimated_tokens, 1.0)),
        js_below=min(1.0, js_sentences / total),
    )


def read_pending(batch: pa.Table) -> pa.Table:
    """The corpus rows of the pending files named in ``batch`` (a Ray Data task)."""
    return pa.concat_tables([pq.read_table(path, schema=PENDING_SCHEMA) for path in batch.column("path").to_pylist()])


MIN_BUILD_MB = 256  # the least memory a build's Ray is given: its object store alone needs 75 MB
MIN_OBJECT_STORE = 75 * 2**20  # Ray's own minimum
OBJECT_STORE_SHARE = 4  # a quarter of a build's memory holds the object store (the batches between steps)


def ray_budget(cpus: int, memory_mb: int) -> tuple[int, int, int]:
    """Logical CPUs, memory the workers may reserve and the object store's bytes, of a Ray that is
    given ``cpus`` and ``memory_mb`` in all."""
    if cpus < 1 or memory_mb < MIN_BUILD_MB:
        raise ModelError(f"a build needs at least 1 CPU and {MIN_BUILD_MB} MB, got {cpus} and {memory_mb} MB")
    total = memory_mb * 2**20
    store = max(MIN_OBJECT_STORE, total // OBJECT_STORE_SHARE)
    return cpus, total - store, store


@contextmanager
def ray_session(address: str | None = None, cpus: int | None = None, memory_mb: int | None = None) -> Iterator[bool]:
    """Ray joined at ``address`` / ``RAY_ADDRESS`` (yields False: the cluster is someone else's, and
    ``cpus``/``memory_mb`` are its own), or started here (yields True) with ``cpus`` logical CPUs (None:
    every core) and, with ``memory_mb``, that much memory in all; shut down on the way out. A Ray
    started here keeps its session folder (logs, sockets, spilled objects) in a folder of its own,
    removed when it stops: nothing is left in the system's temporary folder."""
    import ray

    if ray.is_initialized():
        yield False
        return
    if not os.access(Path.home(), os.W_OK):  # Ray writes ~/.ray/auth_token otherwise
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    address = address or os.environ.get("RAY_ADDRESS")
    temp = None if address else Path(tempfile.mkdtemp(prefix="attention-viz-ray-"))
    try:
        try:
            if address:
                ray.init(address=address, logging_level="WARNING")
            else:
                sizes = {}
                if memory_mb is not None:
                    cpus, memory, store = ray_budget(cpus or 1, memory_mb)
                    sizes = {"_memory": memory, "object_store_memory": store}
                ray.init(num_cpus=cpus or os.cpu_count(), include_dashboard=False, logging_level="WARNING",
                         _temp_dir=str(temp), **sizes)
        except (ConnectionError, RuntimeError, ValueError) as error:
            raise ModelError(f"cannot start or join Ray ({address or 'local'}): {str(error).splitlines()[0]}") from None
        try:
            yield True
        finally:
            ray.shutdown()
    finally:
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)


def worker_gpus(requested: float | None, model: str) -> float:
    """GPUs Ray reserves per model worker: as asked (``--gpus-per-worker``), else one where ``model``
    would run on CUDA on this machine (ATTENTION_VIZ_DEVICE, or auto with a GPU; a model that runs
    on the CPU only stays there), else none."""
    if requested is not None:
        if requested < 0:
            raise ModelError(f"--gpus-per-worker must be 0 or more, got {requested:g}")
        return requested
    from ..backends.registry import HF_PREFIX, planned_placement
    from ..runtime.device import resolve

    placement = resolve() if model.startswith(HF_PREFIX) else planned_placement(model)
    return 1.0 if placement.device == "cuda" else 0.0


def run_ray(model: str, out: Path, plan_: Plan, workers: int | None, worker_cpus: float,
            rows_per_file: int, progress: bool, gpus: float = 0.0) -> None:
    """The model workers each reserve ``gpus`` GPUs (a fraction shares one) and load the model on
    CUDA there; with none they run on the CPU."""
    import ray

    from .worker import AtlasWorker

    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = progress
    context.verbose_stats_logs = False
    cluster_gpus = ray.cluster_resources().get("GPU", 0)
    if gpus and not cluster_gpus:
        raise ModelError(f"--gpus-per-worker {gpus:g} asks for GPUs, but the Ray cluster has none: "
                         "use 0 to run on the CPUs, or join a cluster with GPU nodes (--address)")
    if workers is None:  # as many as the cluster holds at once (a worker waiting for a GPU holds up the pool)
        workers = max(1, int(cluster_gpus / gpus) if gpus else int(ray.cluster_resources().get("CPU", 1)))
    # Ray shows a worker only the GPUs it reserved (CUDA_VISIBLE_DEVICES): the model goes on them, or stays on the CPU
    on_gpu = {"num_gpus": gpus, "runtime_env": {"env_vars": {DEVICE_ENV: "cuda"}}} if gpus else {}
    # One block per pending file (one batch of similar-length sentences each): read_parquet would
    # merge small files into one block, leaving a single task for all the workers.
    files = sorted(str(path) for path in (out / layout.PENDING).glob("*.parquet"))
    dataset = ray.data.from_items([{"path": path} for path in files], override_num_blocks=len(files))
    # One reader at a time: a pending file reads in milliseconds, and each concurrent reader is a Ray
    # worker process of its own (~2 CPU-s to start) that the model workers wait behind on a small machine.
    dataset = dataset.map_batches(read_pending, batch_size=1, batch_format="pyarrow", num_cpus=0.25,
                                  compute=ray.data.TaskPoolStrategy(size=1))
    shards = dataset.map_batches(
        AtlasWorker,
        fn_constructor_kwargs={"model": model, "sample_below": plan_.sample_below, "js_below": plan_.js_below,
                               "progress": str(out)},
        batch_size=BATCH_ROWS,
        batch_format="pyarrow",
        compute=ray.data.ActorPoolStrategy(size=workers),
        num_cpus=worker_cpus,
        **on_gpu,
    )
    try:
        shards.write_parquet(str(out / layout.SHARDS), min_rows_per_file=rows_per_file)
    except ray.exceptions.RayError as error:
        raise ModelError(worker_failure(error)) from None


def worker_failure(error: BaseException) -> str:
    """One line naming what went wrong inside a worker, in the worker's own words. Ray wraps the
    worker's exception (a RayTaskError around Ray Data's UserCodeException around it, or an
    ActorDiedError that keeps only the text of a constructor's traceback), each layer with its own
    traceback and advice; the exception the worker raised is the cause the user can act on."""
    chain: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and not any(current is seen for seen in chain):
        chain.append(current)
        inner = getattr(current, "cause", None)  # RayTaskError.cause; else `raise ... from`
        current = inner if isinstance(inner, BaseException) else current.__cause__
    original = next((e for e in reversed(chain) if not type(e).__module__.startswith("ray.")), None)
    if original is not None:
        name, text = type(original).__name__, str(original)
    else:
        name, text = _last_raised("\n".join(str(e) for e in chain))
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if name is None:  # nothing raised inside: a worker died (killed, out of memory)
        return (f"a Ray worker stopped ({lines[0] if lines else type(error).__name__}); the shards written so far "
                "are kept: run again with --resume")
    message = lines[0] if lines else ""
    if name == ModelError.__name__:
        return f"a Ray worker failed: {message}"
    return f"a Ray worker failed: {name}: {message}" if message else f"a Ray worker failed: {name}"


RAISED = re.compile(r"^(?:[A-Za-z_]\w*\.)*([A-Za-z_]\w*(?:Error|Exception|Interrupt|Exit)): (.*)$")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _last_raised(text: str) -> tuple[str | None, str]:
    """The last ``module.SomeError: message`` line of a traceback kept as text (the exception it ended in)."""
    for line in reversed(ANSI.sub("", text).splitlines()):
        found = RAISED.match(line.strip())
        if found and not found.group(1).startswith("Ray"):
            return found.group(1), found.group(2)
    return None, text


def _check_model(model: str) -> None:
    """Refuse an unknown or missing model here, in one line, before Ray starts workers that would fail."""
    from ..backends.registry import HF_PREFIX, MODELS, availability, unknown_model_message

    if model.startswith(HF_PREFIX):
        return  # a folder or hub id: the worker's load says what is wrong
    if model not in MODELS:
        raise ModelError(unknown_model_message(model))
    ok, why = availability(model)
    if not ok:
        raise ModelError(why)


def build_atlas(
    model: str,
    corpus: str,
    out: str | Path,
    *,
    address: str | None = None,
    workers: int | None = None,
    resume: bool = False,
    column: str = "text",
    sample_tokens: int = layout.SAMPLE_TOKENS,
    js_sentences: int = layout.JS_SENTENCES,
    worker_cpus: float = 0.5,
    rows_per_file: int = 1024,
    progress: bool = True,
    gpus_per_worker: float | None = None,
    cpus: int | None = None,
    memory_mb: int | None = None,
) -> dict:
    """Build (or, with ``resume``, finish) the atlas of ``model`` over ``corpus`` in ``out``; returns the manifest.
    ``gpus_per_worker``: see :func:`worker_gpus`; ``cpus``, ``memory_mb``: see :func:`ray_session`."""
    from .finish import finish

    out = Path(out)
    _check_model(model)
    source = Source(corpus, column)
    source.check()
    if workers is not None and workers < 1:
        raise ModelError("--workers must be at least 1")
    gpus = worker_gpus(gpus_per_worker, model)
    digest = source.sha256()
    previous = layout.read_manifest(out)
    if previous is not None or layout.shard_files(out):
        if not resume:
            raise ModelError(f"{out} already holds an atlas: pass --resume to finish it, or choose another --out")
        if previous is not None and previous.get("schema_version") != layout.SCHEMA_VERSION:
            raise ModelError(f"{out} holds an atlas of another version: build a new one in another folder")
        corpus_of = previous.get("corpus") if previous is not None else None
        if previous is not None and (previous.get("model"), isinstance(corpus_of, dict) and corpus_of.get("sha256")) != (model, digest):
            raise ModelError(f"{out} holds an atlas of {previous.get('model')} on another corpus: it cannot be resumed with this one")
    created = not out.exists()
    layout.claim(out)  # before anything is written or removed: never in someone else's folder
    manifest = {
        "schema_version": layout.SCHEMA_VERSION, "model": model, "complete": False,
        "corpus": {"source": corpus, "column": column, "sha256": digest, "probes": source.is_probes},
        "sample_tokens": sample_tokens, "js_sentences": js_sentences,
    }
    layout.write_manifest(out, manifest)
    try:
        the_plan = plan(source, out, done_lines(out), sample_tokens, js_sentences, progress)
    except ModelError:
        if created:  # nothing worth resuming: leave no half-made atlas behind
            shutil.rmtree(out, ignore_errors=True)
        raise
    manifest["corpus"]["records"] = the_plan.records
    manifest["corpus"]["pending"] = the_plan.pending  # this run's share: the rest is in shards already
    manifest["sampling"] = {"sample_below": the_plan.sample_below, "js_below": the_plan.js_below}
    layout.write_manifest(out, manifest)
    if the_plan.pending:
        with ray_session(address, cpus, memory_mb):
            run_ray(model, out, the_plan, workers, worker_cpus, rows_per_file, progress, gpus)
    layout.remove(out, layout.PENDING)
    return finish(out, manifest)
