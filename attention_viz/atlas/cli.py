"""``python -m attention_viz atlas build|show``: registered by the main CLI (attention_viz/cli/main.py).
Ray and the model are imported only when a build runs."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from ..backends.registry import DEFAULT_MODEL
from .layout import JS_SENTENCES, SAMPLE_TOKENS

if TYPE_CHECKING:
    from .store import Atlas


def add_parser(commands) -> None:
    atlas = commands.add_parser("atlas", help="what every head does across a corpus (built on Ray)")
    actions = atlas.add_subparsers(dest="atlas_command", required=True, parser_class=type(atlas))
    build = actions.add_parser("build", help="run a model over a corpus and write the atlas directory")
    build.add_argument("--model", default=DEFAULT_MODEL, help="model name (see `models`) or hf:<id or folder>")
    build.add_argument("--corpus", required=True,
                       help="a .txt, .jsonl, .csv or .parquet file, a folder of .txt/.jsonl files (read in name order), "
                            "or probes[:N[:SEED]] (built-in, with gold relations)")
    build.add_argument("--out", required=True, help="the atlas directory")
    build.add_argument("--column", default="text", help="the text field of a .jsonl/.csv/.parquet corpus")
    build.add_argument("--address", help="a Ray cluster to join (default: RAY_ADDRESS, else Ray on this machine)")
    build.add_argument("--workers", type=int, help="model workers (default: the cluster's CPUs)")
    build.add_argument("--worker-cpus", type=float, default=0.5,
                       help="CPUs Ray reserves per worker (0.5 leaves room to read and write on a small machine)")
    build.add_argument("--gpus-per-worker", type=float,
                       help="GPUs Ray reserves per worker, which then runs the model on CUDA (a fraction shares a GPU; "
                            "default: 1 where this machine's device is CUDA, else 0: docs/atlas-cluster.md)")
    build.add_argument("--cpus", type=int, help="logical CPUs of the Ray this build starts (default: every core; "
                                                "ignored when joining a cluster)")
    build.add_argument("--memory-mb", type=int, help="memory that Ray may use in all, object store included "
                                                     "(default: Ray's own sizing; ignored when joining a cluster)")
    build.add_argument("--resume", action="store_true", help="finish a killed build from the shards it wrote")
    build.add_argument("--sample-tokens", type=int, default=SAMPLE_TOKENS, help="cap on the q/k/representation sample")
    build.add_argument("--js-sentences", type=int, default=JS_SENTENCES,
                       help="sentences over which head-to-head JS divergences are averaged")
    build.add_argument("--rows-per-file", type=int, default=1024, help="rows per shard file")
    build.add_argument("--no-progress", action="store_true", help="no progress bars")
    show = actions.add_parser("show", help="print an atlas's statistics")
    show.add_argument("dir", help="the atlas directory")
    show.add_argument("--json", action="store_true", help="the machine-readable document")


def run(args: argparse.Namespace) -> int:
    if args.atlas_command == "build":
        from .pipeline import build_atlas

        manifest = build_atlas(
            args.model, args.corpus, args.out, address=args.address, workers=args.workers, resume=args.resume,
            column=args.column, sample_tokens=args.sample_tokens, js_sentences=args.js_sentences,
            worker_cpus=args.worker_cpus, rows_per_file=args.rows_per_file, progress=not args.no_progress,
            gpus_per_worker=args.gpus_per_worker, cpus=args.cpus, memory_mb=args.memory_mb,
        )
        counts = manifest["counts"]
        print(f"wrote {args.out}: {counts['sentences']} sentences, {counts['skipped']} skipped, "
              f"{counts['tokens']} tokens ({counts['sample_tokens']} sampled)")
        return 0
    from .store import Atlas

    atlas = Atlas.open(args.dir)
    summary = atlas.summary()
    document = {key: summary[key] for key in ("sentences", "skipped", "truncated", "stats", "relations") if key in summary}
    if args.json:
        print(json.dumps(document, ensure_ascii=False))
    else:
        print(describe(atlas, document))
    return 0


def describe(atlas: Atlas, document: dict) -> str:
    """A few lines for a person: counts, each statistic's range, the best head per relation."""
    import numpy as np

    from .store import truncation_note

    state = "" if atlas.complete else " (incomplete: finish it with `atlas build --resume`)"
    lines = [f"{atlas.manifest['model']} on {atlas.manifest['corpus']['source']}{state}: "
             f"{document['sentences']} sentences, {len(document['skipped'])} skipped"]
    if document["truncated"]:
        lines.append(f"  {truncation_note(document['truncated'])}")
    for name, grid in document["stats"].items():
        values = np.asarray(grid)
        layer, head = np.unravel_index(int(values.argmax()), values.shape)
        lines.append(f"  {name:<12} mean {values.mean():.3f}  max {values.max():.3f} (layer {layer}, head {head})")
    for name, relation in document.get("relations", {}).items():
        best, baseline = relation["best"], relation["baseline"]
        lines.append(f"  {name:<20} best {best['accuracy']:.2f} (layer {best['layer']}, head {best['head']})  "
                     f"offset {baseline['offset']:+d} baseline {baseline['accuracy']:.2f}  n={relation['count']}")
    return "\n".join(lines)
