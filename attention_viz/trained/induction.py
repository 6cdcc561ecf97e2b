"""The ``induction`` demo model: a 2-layer attention-only decoder that learns induction heads.

    python -m attention_viz.trained.induction train  [--steps N] [--seed 0] [--out DIR]
    python -m attention_viz.cards.induction          [--models-dir DIR]   (its model card)

Data (seeded, synthetic): ``<bos>`` then a segment of random symbols (lowercase letters and
digits, drawn with replacement), then the same segment again. The first copy cannot be predicted
(loss ≈ ln 36); the second can, by finding the earlier copy of the current symbol and reading
what came after it. A two-layer attention-only model does this with two heads in series
(Elhage et al. 2021, Olsson et al. 2022): a previous-token head in layer 0 writes "my
predecessor was X" into each position, and an induction head in layer 1 looks for the position
whose predecessor is the current symbol and copies it.

Inputs are written as space-separated single symbols ("a 7 q a 7"), so a person can type one.
``train`` writes the model folder (checkpoint.py's format: both vocabularies are the symbols);
:mod:`attention_viz.cards.induction` measures it through the app's own backend (head detector, head
ablation) and writes ``evaluation.json`` and ``MODEL_CARD.md`` next to the weights.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import random
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from ..core.model import Transformer, TransformerConfig
from . import checkpoint
from .induction_data import CONFIG, MAX_SEGMENT, MIN_SEGMENT, NAME, SYMBOLS
from .train import deterministic
from .vocab import Vocab

# enough steps for the induction score to settle at every segment length (the model card measures it)
STEPS, BATCH, LR, WARMUP = 12_000, 32, 1e-3, 200
FOLDER = checkpoint.MODELS_DIR / NAME


def vocab() -> Vocab:
    return Vocab(SYMBOLS)


def sequence(rng: random.Random, length: int | None = None) -> list[str]:
    """One training/evaluation sequence (symbols, without ``<bos>``): a random segment twice."""
    n = length if length is not None else rng.randint(MIN_SEGMENT, MAX_SEGMENT)
    segment = [rng.choice(SYMBOLS) for _ in range(n)]
    return segment + segment


def batch(rng: random.Random, size: int, v: Vocab) -> tuple[torch.Tensor, torch.Tensor]:
    """``(ids (B, T), segment lengths (B,))`` with ``<bos>`` first and right padding."""
    seqs = [sequence(rng) for _ in range(size)]
    length = 1 + max(len(s) for s in seqs)
    ids = torch.full((size, length), Vocab.PAD, dtype=torch.long)
    for row, s in enumerate(seqs):
        ids[row, : len(s) + 1] = torch.tensor([Vocab.BOS, *v.encode(s)])
    return ids, torch.tensor([len(s) // 2 for s in seqs])


def build() -> Transformer:
    model = Transformer(TransformerConfig(vocab_size=len(SYMBOLS) + len(Vocab.SPECIALS), **CONFIG))
    for p in model.parameters():
        if p.dim() > 1:
            nn.init.xavier_uniform_(p)
    return model


def token_losses(model: Transformer, ids: torch.Tensor) -> torch.Tensor:
    """(B, T-1) loss of predicting ``ids[:, t+1]`` from ``ids[:, :t+1]`` (0 where the target is padding)."""
    logits = model.logits(model(ids[:, :-1], tgt_padding=ids[:, :-1] != Vocab.PAD))
    losses = F.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none", ignore_index=Vocab.PAD)
    return losses


def train(out: Path = FOLDER, steps: int = STEPS, seed: int = 0, log=print) -> dict:
    with deterministic(seed, threads=1):
        return _train(out, steps, seed, log)


def _train(out: Path, steps: int, seed: int, log) -> dict:
    v = vocab()
    model = build()
    optimizer = torch.optim.Adam(model.parameters(), lr=LR, betas=(0.9, 0.98), eps=1e-9)
    rng = random.Random(f"induction/train/{seed}")
    start, cpu_start = time.perf_counter(), time.process_time()
    recent: list[float] = []
    for step in range(steps):
        lr = LR * min(1.0, (step + 1) / WARMUP) * (0.5 * (1 + math.cos(math.pi * min(1.0, step / steps))) * 0.95 + 0.05)
        for group in optimizer.param_groups:
            group["lr"] = lr
        ids, _ = batch(rng, BATCH, v)
        model.train()
        losses = token_losses(model, ids)
        loss = losses.sum() / (ids[:, 1:] != Vocab.PAD).sum()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        recent = (recent + [loss.item()])[-100:]
        if (step + 1) % 250 == 0 or step + 1 == steps:
            log(f"[{NAME}] step {step + 1}/{steps} loss {sum(recent) / len(recent):.4f} lr {lr:.2e} "
                f"{time.perf_counter() - start:.0f} s")
    model.eval()
    record = {
        "model": NAME,
        "architecture": "transformer",
        "command": "python -m attention_viz.trained.induction train" + (f" --steps {steps}" if steps != STEPS else ""),
        "seed": seed,
        "data": {"generator": "attention_viz.trained.induction.sequence", "symbols": "".join(SYMBOLS),
                 "segment_length": [MIN_SEGMENT, MAX_SEGMENT], "layout": "<bos> segment segment"},
        "parameters": sum(p.numel() for p in model.parameters()),
        "hyperparameters": {"steps": steps, "batch_size": BATCH, "lr": LR, "warmup": WARMUP,
                            "optimizer": "Adam(betas=(0.9, 0.98), eps=1e-9)", "schedule": "linear warmup, then cosine decay"},
        "final_train_loss": round(sum(recent) / len(recent), 4),
        "training_seconds": round(time.perf_counter() - start, 1),
        "training_cpu_seconds": round(time.process_time() - cpu_start, 1),
        "threads": 1,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__}",
    }
    checkpoint.save(out, "transformer", model, v, v, record)
    log(f"[{NAME}] wrote {out}")
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m attention_viz.trained.induction", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    t = commands.add_parser("train")
    t.add_argument("--steps", type=int, default=STEPS)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--out", type=Path, default=FOLDER)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    train(args.out, args.steps, args.seed, log=lambda m: print(m, flush=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
