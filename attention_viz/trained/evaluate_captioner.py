"""Score the shipped captioner on held-out scenes and write its model card.

    python -m attention_viz.trained.evaluate_captioner [--scenes N] [--folder DIR]

* **Exact match** — the greedy caption equals the scene's caption, word for word; overall and by
  number of objects (1, 2, 3).
* **Localization** — for every colour or shape word the model emits that names the right object
  (the word equals the gold caption's word at the same position), the share of that step's
  attention inside the object's gold box (:func:`attention_viz.analysis.localization.mass_in_box`),
  against the share a uniform map would put there (box area / image area); also how often the
  most attended region overlaps the box.

Test scenes are ``split_seeds("test", N)``: seeds no training run ever draws. Writes
``scores.json`` and ``MODEL_CARD.md`` into the model's folder; every number in the card comes from
this run and the folder's ``training.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import torch

from ..analysis.localization import mass_in_box, uniform_share
from ..core.hooks import capture
from . import caption_checkpoint, scenes
from .captioner import ShowAttendTell, images_to_tensor
from .checkpoint import MODELS_DIR
from .vocab import Vocab

NAME = "show-attend-tell"
DEFAULT_SCENES = 1000


@torch.no_grad()
def greedy_with_attention(model: ShowAttendTell, vocab: Vocab, images: list) -> list[tuple[list[str], np.ndarray]]:
    """(words, attention (len(words), L)) of each image's greedy caption (``<eos>`` step dropped)."""
    model.eval()
    with capture(kinds=("pattern",)) as recorded:
        ys = model.greedy_decode(images_to_tensor(images), Vocab.BOS, Vocab.EOS)
    pattern = recorded.steps(model.cross_attn.pattern.name)[-1][:, 0].numpy()  # (B, steps, L)
    out = []
    for row, att in zip(ys, pattern):
        words = vocab.decode(row[1:].tolist())
        out.append((words, att[: len(words)]))
    return out


def evaluate(model: ShowAttendTell, vocab: Vocab, seeds: range, batch: int = 100) -> dict:
    grid, size = model.config.grid, model.config.image_size
    by_count: dict[int, list[int]] = {1: [], 2: [], 3: []}
    local: dict[str, list[tuple[float, float, bool]]] = {"colour": [], "shape": []}
    first_errors: Counter[str] = Counter()
    for start in range(0, len(seeds), batch):
        part = [scenes.generate(s) for s in seeds[start : start + batch]]
        for scene, (words, att) in zip(part, greedy_with_attention(model, vocab, [s.image for s in part])):
            by_count[len(scene.objects)].append(int(tuple(words) == scene.caption))
            if tuple(words) != scene.caption:
                first_errors[first_error(scene, words)] += 1
            for t in range(len(words)):
                box = scene.named_box(words, t)
                if box is None:
                    continue
                amap = att[t].reshape(grid, grid)
                peak = np.unravel_index(int(amap.argmax()), amap.shape)
                peak_box = np.zeros_like(amap)
                peak_box[peak] = 1.0
                local[scene.word_role(t)].append((mass_in_box(amap, box, size, size), uniform_share(box, size, size),
                                    mass_in_box(peak_box, box, size, size) > 0))
    n = sum(len(v) for v in by_count.values())
    hits = sum(sum(v) for v in by_count.values())
    return {
        "scenes": n,
        "exact_match": hits / n,
        "by_objects": {str(k): {"n": len(v), "exact_match": (sum(v) / len(v)) if v else None} for k, v in by_count.items()},
        "localization": {role: _summary(rows) for role, rows in [*local.items(), ("all", local["colour"] + local["shape"])]},
        "first_errors": dict(first_errors.most_common()),
    }


def first_error(scene: scenes.Scene, words: list[str]) -> str:
    """Where a wrong caption first leaves the scene's: "the relation after object k", "the colour
    (or shape) of object k", "the caption's end" (it stops early or runs on), or "the grammar"."""
    t = next((i for i, (a, b) in enumerate(zip(scene.caption, words)) if a != b), None)
    if t is None:
        return "the caption's end"
    owner = scene.word_objects[t]
    if owner is not None:
        return f"the {scene.word_role(t)} of object {owner + 1}"
    named = sum(w == "a" for w in scene.caption[:t])  # objects begun before word t
    if named and {scene.caption[t], words[t]} & {"above", "left"}:
        return f"the relation after object {named}"
    return "the grammar"


def _summary(rows: list[tuple[float, float, bool]]) -> dict:
    if not rows:
        return {"words": 0}
    inside, uniform, peak = (np.array(c, dtype=np.float64) for c in zip(*rows))
    return {
        "words": len(rows),
        "mass_in_box": float(inside.mean()),
        "uniform_share": float(uniform.mean()),
        "ratio": float(inside.mean() / uniform.mean()),
        "words_above_uniform": float((inside > uniform).mean()),
        "peak_in_box": float(peak.mean()),
    }


def _encoder_extras(config: dict) -> str:
    """What the encoder adds to the paper's plain conv stack, as a sentence (empty when nothing)."""
    extras = []
    if config.get("batch_norm"):
        extras.append("batch-normalized")
    if config.get("coords"):
        extras.append("read two coordinate channels beside the RGB pixels (CoordConv)")
    return f" The encoder's convolutions are {' and '.join(extras)}." if extras else ""


def _context_dropout(config: dict) -> str:
    p = config.get("context_dropout")
    if not p:
        return ""
    return (f"context dropout {p} (in training a step's context ẑ_t skips the LSTM with that chance, so what the "
            "model saw a word earlier is unreliable memory and it looks again when it writes the shape), ")


def _object_mix(hyper: dict) -> str:
    mix = hyper.get("objects")
    if not mix or len(set(mix)) == 1:
        return ""
    return "; " + ", ".join(f"{100 * p:.0f} % with {k} object{'s' * (k > 1)}" for k, p in enumerate(mix, 1))


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f} %"


def model_card(scores: dict, training: dict, config: dict, weights_bytes: int) -> str:
    """The card as Markdown, from this run's scores and the folder's training record."""
    loc = scores["localization"]
    hyper = training.get("hyperparameters", {})
    command = training.get("command") or "python -m attention_viz.trained.train_captioner"
    lines = [
        "# show-attend-tell: model card",
        "",
        "<!-- Generated by `python -m attention_viz.trained.evaluate_captioner` from scores.json and "
        "training.json. Do not edit by hand: re-run the command. -->",
        "",
        "A small image captioner after Xu et al. 2015, *Show, Attend and Tell*: a CNN encoder turns a "
        f"{config['image_size']}×{config['image_size']} image into a grid of {scores['grid']}×{scores['grid']} "
        f"region features, and an LSTM decoder ({config['d_dec']} units) with soft (deterministic) additive "
        f"attention over the regions writes the caption, one attention map per word.{_encoder_extras(config)} "
        "Trained with the paper's doubly stochastic regularization. Code: `attention_viz/trained/captioner.py`.",
        "",
        "## Data",
        "",
        "Synthetic scenes (`attention_viz/trained/scenes.py`): one to three coloured shapes (4 colours × 3 shapes, "
        "10–16 pixels) on a noisy dark background, each in its own cell of a 3×3 layout, captioned by a small "
        "grammar in reading order, e.g. “a red circle above a blue square left of a green triangle”. Gold "
        "boxes are known by construction. Training draws fresh scenes every step "
        f"({training.get('data', {}).get('train_scenes', '–')} scenes, none repeated{_object_mix(hyper)}); the "
        "test scenes come from a seed range training never uses, with the generator's own mix (one, two or "
        "three objects equally often).",
        "",
        "## Training",
        "",
        f"`{command}` — {training.get('parameters', 0):,} parameters "
        f"({weights_bytes / 1e6:.2f} MB float32 safetensors), {hyper.get('steps')} steps of "
        f"{hyper.get('batch_size')} scenes, Adam at {hyper.get('lr')} with warmup and cosine decay, "
        f"doubly stochastic λ = {hyper.get('doubly_stochastic')}, {_context_dropout(config)}"
        f"{training.get('threads')} thread(s): "
        f"{training.get('training_seconds', 0) / 60:.1f} min wall clock "
        f"({training.get('training_cpu_seconds', 0) / 60:.1f} CPU min) on a shared machine. "
        f"Final word loss {training.get('final_word_loss')}, dev exact match "
        f"{_pct(training.get('dev_exact_match'))}.",
        "",
        f"## Held-out scores ({scores['scenes']} test scenes)",
        "",
        f"**Caption exact match: {_pct(scores['exact_match'])}** (greedy decoding).",
        "",
        "| objects in the scene | scenes | exact match |",
        "|---|---|---|",
    ]
    lines += [f"| {k} | {v['n']} | {_pct(v['exact_match'])} |" for k, v in scores["by_objects"].items()]
    lines += [
        "",
        "Where the wrong captions first leave the scene's: "
        + (", ".join(f"{where} ({n})" for where, n in scores.get("first_errors", {}).items()) or "none wrong")
        + ".",
        "",
        "**Localization.** For each colour or shape word the model emits that names the right object, the "
        "share of that word's attention inside the object's gold box, against the share a uniform map "
        "would give (box area / image area); “peak in box”: the most attended region overlaps the box.",
        "",
        "| words | counted | attention in box | uniform map | ratio | above uniform | peak in box |",
        "|---|---|---|---|---|---|---|",
    ]
    for role in ("colour", "shape", "all"):
        s = loc[role]
        if not s["words"]:
            lines.append(f"| {role} | 0 | – | – | – | – | – |")
            continue
        lines.append(f"| {role} | {s['words']} | {_pct(s['mass_in_box'])} | {_pct(s['uniform_share'])} | "
                     f"{s['ratio']:.1f}× | {_pct(s['words_above_uniform'])} | {_pct(s['peak_in_box'])} |")
    lines += [
        "",
        "## Use",
        "",
        "`python -m attention_viz caption --scene 7 --out result.npz` (or `--image FILE` for a PNG/JPEG, fitted "
        f"into {config['image_size']}×{config['image_size']}); the app's Image attention page, which shows a "
        "generated scene's true description beside the model's caption. The model knows only this grammar's "
        "twelve objects on a dark, noisy background: a photograph is outside what it learned, so the caption "
        "and maps it writes for one are not a description of it.",
        "",
        f"Evaluation took {scores['eval_seconds']} s.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m attention_viz.trained.evaluate_captioner",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--folder", type=Path, default=MODELS_DIR / NAME)
    parser.add_argument("--scenes", type=int, default=DEFAULT_SCENES, help=f"test scenes (default {DEFAULT_SCENES})")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    trained = caption_checkpoint.load(args.folder)
    start = time.perf_counter()
    scores = evaluate(trained.model, trained.vocab, scenes.split_seeds("test", args.scenes))
    scores["grid"] = trained.model.config.grid
    scores["eval_seconds"] = round(time.perf_counter() - start, 1)
    config = json.loads((args.folder / "config.json").read_text(encoding="utf-8"))["config"]
    weights = (args.folder / "model.safetensors").stat().st_size
    (args.folder / "scores.json").write_text(json.dumps(scores, indent=2) + "\n", encoding="utf-8")
    (args.folder / "MODEL_CARD.md").write_text(model_card(scores, trained.training, config, weights), encoding="utf-8")
    all_words = scores["localization"]["all"]
    print(f"{NAME}: exact match {scores['exact_match']:.4f} on {scores['scenes']} test scenes; by objects "
          + ", ".join(f"{k}: {v['exact_match']:.3f}" for k, v in scores["by_objects"].items() if v["n"])
          + f"; attention in box {all_words.get('mass_in_box', 0):.3f} vs uniform {all_words.get('uniform_share', 0):.3f}"
          f" over {all_words['words']} words")
    print(f"wrote {args.folder / 'MODEL_CARD.md'} and scores.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
