"""Train the Show, Attend and Tell captioner on synthetic scenes (teacher forcing).

    python -m attention_viz.trained.train_captioner [--seed 0] [--steps N] [--out DIR] [--tiny]

Data: a fresh batch of scenes every step, seeds ``split_seeds("train", ...)`` in order, so no
scene is seen twice and none of the dev/test scenes is ever seen; half of them hold three objects
(``CaptionHyper.objects``), since relations and later objects are what the model gets wrong
longest. Loss: cross-entropy of the
next word (``<eos>`` included) plus the doubly stochastic regularization ``λ Σ_i (1 − Σ_t α_ti)²``.
Adam with linear warmup then cosine decay, gradient clipping (the translation trainer's schedule).
Deterministic for a seed and a thread count; writes ``config.json``, ``model.safetensors``,
``vocab.json`` and ``training.json`` into ``--out`` (default: the shipped folder
``attention_viz/trained/models/show-attend-tell/``).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from . import caption_checkpoint, scenes
from .captioner import CaptionerConfig, ShowAttendTell, doubly_stochastic_penalty, images_to_tensor
from .checkpoint import MODELS_DIR
from .decoding import decoder_io
from .train import Hyper, deterministic, learning_rate
from .vocab import Vocab

NAME = "show-attend-tell"


@dataclass(frozen=True)
class CaptionHyper(Hyper):
    doubly_stochastic: float = 0.0005  # λ of eq. 14 (see the model card for what it does here)
    # chance of 1, 2, 3 objects in a training scene: relations and later objects are what is hard
    # to learn, and only scenes with more objects teach them
    objects: tuple[float, ...] = (1 / 3, 1 / 3, 1 / 3)


MODEL = dict(channels=(16, 32, 64), coords=True, batch_norm=True, d_feat=64, d_emb=32, d_dec=256, d_att=64,
             max_len=16, dropout=0.1, context_dropout=0.5)
HYPER = CaptionHyper(steps=3000, batch_size=32, lr=2e-3, warmup=100, label_smoothing=0.0, objects=(0.2, 0.3, 0.5))
TINY = dict(channels=(4, 8, 8), d_feat=8, d_emb=8, d_dec=16, d_att=8)


def caption_vocab() -> Vocab:
    """The fixed vocabulary of the scene grammar (the same for every seed)."""
    return Vocab(scenes.WORDS)


def batch_tensors(batch: list[scenes.Scene], vocab: Vocab):
    images = images_to_tensor([s.image for s in batch])
    tgt_in, tgt_out, _ = decoder_io([vocab.encode(s.caption) for s in batch])
    return images, tgt_in, tgt_out


@torch.no_grad()
def greedy_captions(model: ShowAttendTell, vocab: Vocab, images: list) -> list[tuple[str, ...]]:
    """Greedy captions (the inference data flow) of uint8 images, as word tuples."""
    model.eval()
    ys = model.greedy_decode(images_to_tensor(images), Vocab.BOS, Vocab.EOS)
    return [tuple(vocab.decode(row[1:].tolist())) for row in ys]


def exact_match(model: ShowAttendTell, vocab: Vocab, batch: list[scenes.Scene]) -> float:
    hits = 0
    for start in range(0, len(batch), 100):
        part = batch[start : start + 100]
        hits += sum(c == s.caption for c, s in zip(greedy_captions(model, vocab, [s.image for s in part]), part))
    return hits / max(1, len(batch))


def train(
    out: Path,
    seed: int = 0,
    steps: int | None = None,
    tiny: bool = False,
    dev_size: int = 300,
    threads: int = 1,
    log_every: int = 100,
    eval_every: int = 500,
    log=print,
) -> dict:
    """Train the captioner and save it into ``out``; returns the training record (training.json)."""
    config = {**MODEL, **(TINY if tiny else {})}
    hyper = replace(HYPER, steps=steps if steps is not None else HYPER.steps)
    with deterministic(seed, threads):
        return _train(out, config, hyper, seed, tiny, dev_size, threads, log_every, eval_every, log)


def _train(out, config, hyper: CaptionHyper, seed, tiny, dev_size, threads, log_every, eval_every, log) -> dict:
    vocab = caption_vocab()
    model = ShowAttendTell(CaptionerConfig(vocab_size=len(vocab), **config))
    n_params = sum(p.numel() for p in model.parameters())
    log(f"[{NAME}] {n_params:,} parameters; {hyper}")
    dev = [scenes.generate(s) for s in scenes.split_seeds("dev", dev_size)]
    optimizer = torch.optim.Adam(model.parameters(), lr=hyper.lr, betas=(0.9, 0.98), eps=1e-9)
    start, cpu_start = time.perf_counter(), time.process_time()
    recent: list[tuple[float, float]] = []
    history = []
    # the training seeds: one fresh range per run seed, so another --seed also sees other scenes
    first = seed * hyper.steps * hyper.batch_size
    counts = np.random.default_rng(seed).choice(np.arange(1, scenes.MAX_OBJECTS + 1), p=hyper.objects,
                                                size=(hyper.steps, hyper.batch_size))
    for step in range(hyper.steps):
        seeds = scenes.split_seeds("train", hyper.batch_size, first + step * hyper.batch_size)
        batch = [scenes.generate(s, int(n)) for s, n in zip(seeds, counts[step])]
        images, tgt_in, tgt_out = batch_tensors(batch, vocab)
        lr = learning_rate(step, hyper)
        for group in optimizer.param_groups:
            group["lr"] = lr
        model.train()
        logits, alpha = model(images, tgt_in)
        words = F.cross_entropy(logits.reshape(-1, logits.size(-1)), tgt_out.reshape(-1),
                                ignore_index=Vocab.PAD, label_smoothing=hyper.label_smoothing)
        penalty = doubly_stochastic_penalty(alpha, tgt_out != Vocab.PAD)
        loss = words + hyper.doubly_stochastic * penalty
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), hyper.clip)
        optimizer.step()
        recent = (recent + [(words.item(), penalty.item())])[-log_every:]
        done = step + 1
        if done % log_every == 0 or done == hyper.steps:
            mean_words = sum(w for w, _ in recent) / len(recent)
            mean_penalty = sum(p for _, p in recent) / len(recent)
            log(f"[{NAME}] step {done}/{hyper.steps} word loss {mean_words:.4f} coverage penalty "
                f"{mean_penalty:.2f} lr {lr:.2e} {time.perf_counter() - start:.0f} s")
        if eval_every and done % eval_every == 0 and done < hyper.steps:
            em = exact_match(model, vocab, dev)
            history.append({"step": done, "dev_exact_match": em, "seconds": round(time.perf_counter() - start, 1)})
            log(f"[{NAME}] step {done}: dev exact match {em:.4f} ({len(dev)} scenes)")
    train_seconds = time.perf_counter() - start
    cpu_seconds = time.process_time() - cpu_start
    dev_em = exact_match(model, vocab, dev)
    log(f"[{NAME}] done in {train_seconds:.0f} s (CPU {cpu_seconds:.0f} s); dev exact match {dev_em:.4f}")
    record = {
        "model": NAME,
        "architecture": caption_checkpoint.ARCHITECTURE,
        "command": _command(sys.argv[1:]) if __name__ == "__main__" else None,
        "seed": seed,
        "tiny": tiny,
        "data": {"generator": "attention_viz.trained.scenes.generate",
                 "train_seeds": f"split_seeds('train', {hyper.steps * hyper.batch_size}, start={first})",
                 "train_scenes": hyper.steps * hyper.batch_size, "dev_scenes": len(dev)},
        "vocab": len(vocab),
        "parameters": n_params,
        "hyperparameters": {**asdict(hyper), "optimizer": "Adam(betas=(0.9, 0.98), eps=1e-9)",
                            "schedule": "linear warmup, then cosine decay"},
        "final_word_loss": round(sum(w for w, _ in recent) / len(recent), 4),
        "final_coverage_penalty": round(sum(p for _, p in recent) / len(recent), 3),
        "dev_exact_match": round(dev_em, 4),
        "dev_history": history,
        "training_seconds": round(train_seconds, 1),  # wall clock (shared machine: noisy)
        "training_cpu_seconds": round(cpu_seconds, 1),
        "threads": threads,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__}",
    }
    model.eval()
    caption_checkpoint.save(out, model, vocab, record)
    log(f"[{NAME}] wrote {out}")
    return record


def _command(argv: list[str]) -> str:
    """The command line that trained the model, without ``--out`` (where it went changes nothing)."""
    kept = [a for i, a in enumerate(argv) if a != "--out" and (i == 0 or argv[i - 1] != "--out")
            and not a.startswith("--out=")]
    return " ".join(["python -m attention_viz.trained.train_captioner", *kept])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m attention_viz.trained.train_captioner",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, help=f"optimizer steps (default {HYPER.steps})")
    parser.add_argument("--out", type=Path, help="output folder (default: the shipped models folder)")
    parser.add_argument("--tiny", action="store_true", help="tiny model (smoke test)")
    parser.add_argument("--dev-size", type=int, default=300)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--eval-every", type=int, default=500, help="dev exact match every N steps (0: never)")
    args = parser.parse_args(argv)
    train(args.out or MODELS_DIR / NAME, seed=args.seed, steps=args.steps, tiny=args.tiny,
          dev_size=args.dev_size, threads=args.threads, eval_every=args.eval_every,
          log=lambda msg: print(msg, flush=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
