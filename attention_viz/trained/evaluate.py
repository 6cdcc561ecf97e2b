"""Score the shipped demo models on the held-out test split and write their model card.

    python -m attention_viz.trained.evaluate [--sample N] [--models-dir DIR]

* **Exact match** — greedy translation (the inference data flow) equal to the gold target, word
  for word; overall, per source-length bucket and per source length.
* **Alignment accuracy** — teacher-forced on the gold target (the training data flow), the
  decoder row that predicts target word ``j`` attends most (argmax over source positions) to
  the gold ``alignment[j]``. For the Transformer per (layer, head) and for the head average of
  each layer; for the GRU its single attention. Counted over the target words whose alignment is
  ``content=True`` (a French word that translates an English word: the headline number), and
  over all target words (also the inserted article of a bare plural and the inserted auxiliary of
  a simple past, aligned by convention to the noun / verb that triggers them). The ``<eos>``
  prediction is not counted (it has no gold alignment).

Writes ``scores.json``, ``MODEL_CARD.md`` and ``accuracy_vs_length.svg`` into the models folder:
every number in the card comes from this run (and from each model's ``training.json``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from . import checkpoint, report
from .checkpoint import TrainedModel
from .corpus import DEFAULT_SIZES, LENGTH_BUCKETS, Pair, length_bucket, splits
from .decoding import cross_attention, translate

MODEL_NAMES = ("toy-translate", "toy-translate-rnn", "gru-no-attention")
CORPUS_SEED = 0


def held_out_pairs(n: int | None = None) -> list[Pair]:
    """The held-out test split of ``corpus.splits(seed=0)`` (the first ``n`` of its shuffled order)."""
    pairs = splits(seed=CORPUS_SEED, sizes=(0, 0, DEFAULT_SIZES[2]))["test"]
    return pairs if n is None else pairs[:n]


def exact_match(dm: TrainedModel, pairs: Sequence[Pair]) -> dict:
    """Greedy exact match overall, per length bucket and per source length (with counts)."""
    outputs = translate(dm, [p.source for p in pairs])
    hits: dict[str, list[int]] = defaultdict(list)
    by_length: dict[int, list[int]] = defaultdict(list)
    for p, out in zip(pairs, outputs):
        ok = int(tuple(out) == p.target)
        hits[length_bucket(len(p.source))].append(ok)
        by_length[len(p.source)].append(ok)
    all_hits = [h for v in hits.values() for h in v]
    return {
        "overall": float(np.mean(all_hits)),
        "n": len(all_hits),
        "buckets": {f"{lo}-{hi}": _mean_n(hits.get(f"{lo}-{hi}", [])) for lo, hi in LENGTH_BUCKETS},
        "by_length": {str(k): _mean_n(v) for k, v in sorted(by_length.items())},
    }


def _mean_n(values: list[int]) -> dict:
    return {"accuracy": float(np.mean(values)) if values else None, "n": len(values)}


def alignment_accuracy(dm: TrainedModel, pairs: Sequence[Pair]) -> dict:
    """Argmax-vs-gold alignment accuracy per (layer, head) and per layer head average.

    Returns ``{"content": {...}, "all": {...}}``, each with ``heads`` ([layers][heads]),
    ``head_mean`` ([layers]), ``best`` (the best of all of them) and ``n`` (target words counted).
    """
    patterns = cross_attention(dm, [p.source for p in pairs], [p.target for p in pairs])
    out = {}
    for variant in ("content", "all"):
        heads_hit, mean_hit, count = None, None, 0
        for p, att in zip(pairs, patterns):  # att: (layers, heads, T, S)
            keep = np.array([c or variant == "all" for c in p.content])
            gold = np.array(p.alignment)[keep]
            att = att[:, :, keep, :]
            h = (att.argmax(-1) == gold).sum(-1)  # (layers, heads)
            m = (att.mean(1).argmax(-1) == gold).sum(-1)  # (layers,)
            heads_hit = h if heads_hit is None else heads_hit + h
            mean_hit = m if mean_hit is None else mean_hit + m
            count += int(keep.sum())
        heads = heads_hit / count
        head_mean = mean_hit / count
        layers, n_heads = heads.shape
        candidates = [(float(heads[i, k]), f"layer {i} head {k}") for i in range(layers) for k in range(n_heads)]
        candidates += [(float(head_mean[i]), f"layer {i} head average") for i in range(layers)]
        best_index = max(range(len(candidates)), key=lambda i: candidates[i][0])
        best = candidates[best_index]
        where = divmod(best_index, n_heads) if best_index < layers * n_heads else (best_index - layers * n_heads, None)
        out[variant] = {
            "heads": heads.round(6).tolist(),
            "head_mean": head_mean.round(6).tolist(),
            "best": {"accuracy": best[0], "where": best[1], **_misses(pairs, patterns, *where, variant)},
            "n": count,
        }
    return out


ENGLISH_DETERMINERS = frozenset({"the", "a", "an", "this", "these", "some"})


def _misses(pairs: Sequence[Pair], patterns: list[np.ndarray], layer: int, head: int | None, variant: str) -> dict:
    """How many argmax misses of one head (``None``: the layer's head average) are determiners that
    look further right, at their noun phrase ("la" attends to "Area", not only to "the": a determiner agrees with its noun)."""
    misses = determiner_misses = 0
    for p, att in zip(pairs, patterns):
        rows = att[layer].mean(0) if head is None else att[layer, head]  # (T, S)
        for j, (gold, predicted) in enumerate(zip(p.alignment, rows.argmax(-1))):
            if (variant == "content" and not p.content[j]) or predicted == gold:
                continue
            misses += 1
            determiner_misses += int(p.source[gold] in ENGLISH_DETERMINERS and int(predicted) > gold)
    return {"misses": misses, "determiner_misses": determiner_misses}


def evaluate_model(dm: TrainedModel, pairs: Sequence[Pair]) -> dict:
    start = time.perf_counter()
    scores = {"exact_match": exact_match(dm, pairs)}
    if dm.has_attention:
        scores["alignment"] = alignment_accuracy(dm, pairs)
    scores["eval_seconds"] = round(time.perf_counter() - start, 1)
    return scores


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m attention_viz.trained.evaluate", description=__doc__.split("\n")[0])
    parser.add_argument("--models-dir", type=Path, default=checkpoint.MODELS_DIR)
    parser.add_argument("--sample", type=int, help="score only the first N test pairs (default: all 2000)")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    pairs = held_out_pairs(args.sample)
    models, scores = {}, {}
    for name in MODEL_NAMES:
        folder = args.models_dir / name
        if checkpoint.missing_files(folder):
            print(f"{name}: not trained yet ({folder}); run python -m attention_viz.trained.train --model {name}")
            continue
        dm = checkpoint.load(folder)
        models[name] = {
            "architecture": dm.architecture,
            "config": json.loads((folder / "config.json").read_text(encoding="utf-8"))["config"],
            "training": dm.training,
            "weights_bytes": (folder / "model.safetensors").stat().st_size,
        }
        scores[name] = evaluate_model(dm, pairs)
        em = scores[name]["exact_match"]
        line = f"{name}: exact match {em['overall']:.4f} on {em['n']} test pairs; " + ", ".join(
            f"{b} {v['accuracy']:.3f}" for b, v in em["buckets"].items()
        )
        if "alignment" in scores[name]:
            best = scores[name]["alignment"]["content"]["best"]
            line += f"; alignment {best['accuracy']:.4f} ({best['where']})"
        print(line, flush=True)
    result = {"test_pairs": len(pairs), "test_split_pairs": DEFAULT_SIZES[2], "corpus_seed": CORPUS_SEED, "models": models, "scores": scores}
    args.models_dir.mkdir(parents=True, exist_ok=True)
    (args.models_dir / "scores.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    (args.models_dir / report.CHART).write_text(report.accuracy_chart(scores), encoding="utf-8")
    (args.models_dir / "MODEL_CARD.md").write_text(report.model_card(result), encoding="utf-8")
    print(f"wrote {args.models_dir / 'MODEL_CARD.md'}, {report.CHART} and scores.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
