"""The ``induction`` model's card: every number measured through the backend the app runs it with.

    python -m attention_viz.cards.induction [--models-dir DIR] [--sequences 400]

Held-out sequences (a seed training never uses): the loss on each copy, the head detector's
previous-token and induction scores (it is not told where to look), the loss with each head removed
and with every induction head removed together, and induction at every segment length a person could
type. Writes ``evaluation.json`` and ``MODEL_CARD.md`` beside the weights (attention_viz/trained/induction.py
trains them).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from ..analysis.ablation import Ablation, format_head
from ..analysis.detector import detect, top
from ..analysis.probes import repeated_sequence
from ..backends.induction import InductionBackend
from ..core.names import DECODER_SELF
from ..trained.induction import FOLDER, sequence
from ..trained.induction_data import MAX_SEGMENT, MIN_SEGMENT, NAME, SYMBOLS

INDUCTION_SET = 0.5  # induction score above which a head counts as an induction head
PER_LENGTH = 10  # typed texts per segment length in the card's table
EVAL_SEED = 10_000  # evaluation sequences come from a seed training never uses


def eval_sequences(n: int = 400, seed: int = EVAL_SEED) -> list[list[str]]:
    rng = random.Random(f"induction/eval/{seed}")
    return [sequence(rng) for _ in range(n)]


def half_losses(backend, sequences: Sequence[Sequence[str]], ablation=None) -> dict[str, float]:
    """Mean loss on the first copy (every symbol of it) and on the repeated copy (all but its
    first symbol, which nothing announces), through the backend, optionally with heads removed."""
    first, repeated = [], []
    for s in sequences:
        n = len(s) // 2
        _, outputs = backend.forward(" ".join(s), kinds=(), ablation=ablation)
        nll = -outputs.log_probs  # nll[t]: predicting symbol t (0-indexed, after <bos>)
        first.extend(nll[:n])
        repeated.extend(nll[n + 1 :])
    return {"first_half": float(np.mean(first)), "repeated_half": float(np.mean(repeated))}


def typed_texts(length: int, n: int, seed: int = EVAL_SEED) -> list[str]:
    """``n`` texts a person would try on the detector page: ``length`` random symbols, then the same
    again, drawn as the page's "Random repeated sequence" and the probe set draw theirs."""
    rng = random.Random(f"induction/typed/{seed}/{length}")
    return [repeated_sequence(SYMBOLS, length, rng) for _ in range(n)]


def typed_induction(backend, text: str) -> np.ndarray:
    """``[layers, heads]``: the detector's induction score of every head on this one text alone."""
    return detect(backend.run, [text], DECODER_SELF)["induction"]


def by_length(backend, per_length: int = PER_LENGTH) -> list[dict]:
    """For every segment length that fits the context: the best head by the detector's induction
    score over ``per_length`` typed texts (each text scores the same number of rows, so the mean of
    the texts' scores is the detector's score over all of them), the lowest of the texts' own best
    scores, and the loss on the repeated copy."""
    rows = []
    for length in range(MIN_SEGMENT, MAX_SEGMENT + 1):
        texts = typed_texts(length, per_length)
        each = np.stack([typed_induction(backend, text) for text in texts])  # (texts, layers, heads)
        mean = each.mean(axis=0)
        layer, head = (int(i) for i in np.unravel_index(mean.argmax(), mean.shape))
        rows.append({
            "segment_length": length,
            "layer": layer,
            "head": head,
            "induction_score": round(float(mean[layer, head]), 4),
            "lowest_one_text": round(float(each.max(axis=(1, 2)).min()), 4),
            "repeated_half_loss": round(half_losses(backend, [text.split() for text in texts])["repeated_half"], 4),
        })
    return rows


def evaluate(folder: Path = FOLDER, n: int = 400) -> dict:
    """Every number of the model card, measured now."""
    backend = InductionBackend.from_folder(NAME, folder)
    start = time.perf_counter()
    sequences = eval_sequences(n)
    probes = backend.probe_texts(48, seed=EVAL_SEED)
    scores = detect(backend.run, probes, DECODER_SELF)
    # the best head of each score over all layers: the detector is not told where to look
    prev_layer, prev_head, prev_score = top(scores["previous_token"], 1)[0]
    ind_layer, ind_head, ind_score = top(scores["induction"], 1)[0]
    plain = half_losses(backend, sequences)
    heads = backend.model.config.h
    ablations = {}
    for layer in range(2):
        for head in range(heads):
            ablation = Ablation(((DECODER_SELF, layer, head),))
            ablations[format_head((DECODER_SELF, layer, head))] = half_losses(backend, sequences, ablation)["repeated_half"]
    induction_name = format_head((DECODER_SELF, ind_layer, ind_head))
    others = [loss for name, loss in ablations.items() if name != induction_name]
    # every head the detector calls an induction head, removed together (they may back each other up)
    induction_set = tuple((DECODER_SELF, int(l), int(h)) for l, h in zip(*np.nonzero(scores["induction"] > INDUCTION_SET)))
    set_removed = half_losses(backend, sequences, Ablation(induction_set))["repeated_half"] if induction_set else None
    lengths = by_length(backend)
    return {
        "sequences": n,
        "eval_seed": EVAL_SEED,
        "loss": plain,
        "by_length": {"texts_per_length": PER_LENGTH, "rows": lengths,
                      "lowest_induction_score": min(row["induction_score"] for row in lengths),
                      "lowest_one_text": min(row["lowest_one_text"] for row in lengths)},
        "uniform_loss": math.log(len(SYMBOLS)),
        "detector": {
            "probes": len(probes),
            "previous_token": [[round(x, 4) for x in row] for row in scores["previous_token"].tolist()],
            "induction": [[round(x, 4) for x in row] for row in scores["induction"].tolist()],
            "previous_token_head": {"layer": prev_layer, "head": prev_head, "score": prev_score},
            "induction_head": {"layer": ind_layer, "head": ind_head, "score": ind_score},
        },
        "ablation": {
            "mode": "zero",
            "repeated_half_loss_by_head": ablations,
            "induction_head": induction_name,
            "induction_head_removed": ablations[induction_name],
            "other_head_removed_mean": float(np.mean(others)),
            "other_head_removed_max": float(np.max(others)),
            "previous_token_head": format_head((DECODER_SELF, prev_layer, prev_head)),
            "previous_token_head_removed": ablations[format_head((DECODER_SELF, prev_layer, prev_head))],
            "induction_set": [format_head(h) for h in induction_set],
            "induction_set_removed": set_removed,
        },
        "eval_seconds": round(time.perf_counter() - start, 1),
    }


def model_card(evaluation: dict, training: dict, config: dict) -> str:
    """Markdown; every number comes from ``evaluation`` (evaluate()) and ``training`` (training.json)."""
    loss, det, abl = evaluation["loss"], evaluation["detector"], evaluation["ablation"]
    prev, ind = det["previous_token_head"], det["induction_head"]
    hyper = training.get("hyperparameters", {})

    def grid(name: str) -> list[str]:
        rows = det[name]
        lines = ["| layer | " + " | ".join(f"head {h}" for h in range(len(rows[0]))) + " |",
                 "|---|" + "---|" * len(rows[0])]
        lines += [f"| {i} | " + " | ".join(f"{x:.3f}" for x in row) + " |" for i, row in enumerate(rows)]
        return lines

    lines = [
        "# Model card: `induction`",
        "",
        f"A {config['N']}-layer, {config['h']}-head, attention-only decoder (our Transformer, `feed_forward=False`, "
        f"d_model {config['d_model']}, learned positions, pre-LN; {training.get('parameters', '?'):,} parameters), "
        "trained to continue a repeated random sequence. Input: space-separated lowercase letters and digits.",
        "",
        "## Training",
        "",
        f"`{training.get('command')}` — seed {training.get('seed')}, {hyper.get('steps')} steps of "
        f"{hyper.get('batch_size')} sequences (`<bos>` + a random segment of {MIN_SEGMENT}–{MAX_SEGMENT} symbols + "
        f"the same segment again), Adam, peak lr {hyper.get('lr')}, 1 thread: "
        f"{training.get('training_cpu_seconds')} CPU seconds ({training.get('training_seconds')} s wall on "
        f"{training.get('machine')}, shared with other jobs); final training loss {training.get('final_train_loss')}.",
        "",
        f"## Evaluation (`python -m attention_viz.cards.induction`, {evaluation['sequences']} held-out sequences)",
        "",
        "| next-symbol loss (nats) | value |",
        "|---|---|",
        f"| first copy (unpredictable; uniform guess = ln 36 = {evaluation['uniform_loss']:.3f}) | {loss['first_half']:.3f} |",
        f"| repeated copy (all but its first symbol) | {loss['repeated_half']:.3f} |",
        f"| repeated copy, induction head {abl['induction_head']} removed (zero ablation) | {abl['induction_head_removed']:.3f} |",
        f"| repeated copy, one other head removed: mean over the other {len(abl['repeated_half_loss_by_head']) - 1} heads | {abl['other_head_removed_mean']:.3f} |",
        f"| repeated copy, one other head removed: the worst of them | {abl['other_head_removed_max']:.3f} |",
        f"| repeated copy, previous-token head {abl['previous_token_head']} removed | {abl['previous_token_head_removed']:.3f} |",
        f"| repeated copy, all {len(abl['induction_set'])} heads with induction score > {INDUCTION_SET} removed "
        f"({', '.join(abl['induction_set'])}) | {abl['induction_set_removed']:.3f} |",
        "",
        *_reading(abl),
        f"Head detector (`python -m attention_viz heads --model induction`; {det['probes']} probes, not told where to look): "
        f"previous-token head **layer {prev['layer']} head {prev['head']}** (score {prev['score']:.3f}), "
        f"induction head **layer {ind['layer']} head {ind['head']}** (score {ind['score']:.3f}).",
        "",
        "Previous-token score (share of attention on the previous symbol):",
        "",
        *grid("previous_token"),
        "",
        "Induction score (share of attention on the symbol after an earlier copy of the current one):",
        "",
        *grid("induction"),
        "",
        *_length_table(evaluation["by_length"]),
        "Loss on the repeated copy with one head removed (zero ablation), per head:",
        "",
        "| head | loss |",
        "|---|---|",
        *[f"| {name} | {value:.3f} |" for name, value in abl["repeated_half_loss_by_head"].items()],
        "",
        "Limits: the data are uniform random symbols, so the model knows nothing of language; a sequence longer "
        f"than {config['max_len'] - 1} symbols is cut there, and the page says so.",
        "",
    ]
    return "\n".join(lines)


def _length_table(lengths: dict) -> list[str]:
    """Every segment length that fits the context, as a person would type it."""
    return [
        f"Induction on every segment length that fits the context ({MIN_SEGMENT}–{MAX_SEGMENT} symbols, typed twice "
        f"after `<bos>`): {lengths['texts_per_length']} random sequences of each length (no symbol twice in a segment, "
        "as the detector page's \"Random repeated sequence\"), each scored alone by the head detector. Lowest best-head "
        f"score over all lengths: **{lengths['lowest_induction_score']:.3f}**; lowest on a single text: "
        f"{lengths['lowest_one_text']:.3f}.",
        "",
        "| segment length | best head | its induction score | lowest on one text (its best head) | loss on the repeated copy |",
        "|---|---|---|---|---|",
        *[f"| {row['segment_length']} | layer {row['layer']} head {row['head']} | {row['induction_score']:.3f} | "
          f"{row['lowest_one_text']:.3f} | {row['repeated_half_loss']:.3f} |" for row in lengths["rows"]],
        "",
    ]


def _reading(abl: dict) -> list[str]:
    """The plain-language reading of the ablation rows, only where the numbers bear it out."""
    single, together = abl["induction_head_removed"], abl["induction_set_removed"]
    if len(abl["induction_set"]) < 2 or together is None or not (together > single and abl["previous_token_head_removed"] > single):
        return []
    return [
        "Reading: the heads of layer 1 that do induction back each other up, so removing any one of them costs "
        "little; removing them all, or the previous-token head of layer 0 that they read from, brings the "
        "repeated copy back towards the unpredictable first copy. Compare the per-head table.",
        "",
    ]


def write_card(folder: Path = FOLDER, n: int = 400) -> dict:
    evaluation = evaluate(folder, n)
    training = json.loads((folder / "training.json").read_text(encoding="utf-8"))
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))["config"]
    (folder / "evaluation.json").write_text(json.dumps(evaluation, indent=2) + "\n", encoding="utf-8")
    (folder / "MODEL_CARD.md").write_text(model_card(evaluation, training, config), encoding="utf-8")
    return evaluation


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m attention_viz.cards.induction", description=__doc__.split("\n")[0])
    parser.add_argument("--models-dir", type=Path, default=FOLDER)
    parser.add_argument("--sequences", type=int, default=400)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    evaluation = write_card(args.models_dir, args.sequences)
    print(json.dumps({k: evaluation[k] for k in ("loss", "detector", "ablation")}, indent=2)[:3000])
    return 0


if __name__ == "__main__":
    sys.exit(main())
