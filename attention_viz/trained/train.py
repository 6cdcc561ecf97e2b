"""Train a demo translation model on the synthetic corpus (the training data flow: teacher forcing).

    python -m attention_viz.trained.train --model toy-translate      [--seed 0] [--steps N] [--out DIR]
    python -m attention_viz.trained.train --model toy-translate-rnn
    python -m attention_viz.trained.train --model gru-no-attention

Each run is deterministic for a seed (seeded ``random``/``numpy``/``torch``, deterministic torch
algorithms, a fixed number of threads) and writes ``model.safetensors``, ``config.json``,
``src_vocab.json``, ``tgt_vocab.json`` and ``training.json`` into ``--out`` (default: the shipped
folder ``attention_viz/trained/models/<name>/``). ``--tiny`` shrinks the model and the data for smoke
tests. Data: ``corpus.splits(seed=0)`` train split (40 000 pairs); vocabularies from it.

Batches hold sentences of similar source length; Adam with linear warmup then cosine decay,
label smoothing, gradient clipping. The two GRUs get the same sizes, data and budget, so the only
difference between them is the attention.
"""

from __future__ import annotations

from ..runtime.settings import apply_process_settings

if __name__ == "__main__":
    # Before torch loads (run as a command only, never on import): OMP_WAIT_POLICY=PASSIVE — with
    # spinning waits, 2-thread training on shared cores ran ~10× slower than 1 thread (measured here).
    apply_process_settings()

import argparse  # noqa: E402
import os
import math
import platform
import random
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..core.model import TransformerConfig
from . import checkpoint
from .corpus import DEFAULT_SIZES, Pair, splits
from .decoding import decoder_io, greedy, pad, until_eos
from .rnn import RNNConfig, RNNSeq2Seq
from .transformer import TranslationTransformer
from .vocab import Vocab, build_vocabs

CORPUS_SEED = 0


@dataclass(frozen=True)
class Hyper:
    steps: int
    batch_size: int = 64
    lr: float = 1e-3  # peak learning rate
    warmup: int = 500
    final_lr_fraction: float = 0.05  # cosine decay from lr down to lr × this
    label_smoothing: float = 0.1
    clip: float = 1.0
    weight_decay: float = 0.0


# name → (architecture, model config without vocab sizes, hyperparameters)
PRESETS: dict[str, tuple[str, dict, Hyper]] = {
    # Pre-LN at 2e-3 learned faster than the paper's post-LN at 1e-3 (dev exact match after 1000
    # steps: 0.60 vs 0.40) and its cross-attention aligned better than post-LN without dropout.
    "toy-translate": (
        "transformer",
        dict(shape="encoder-decoder", d_model=128, h=4, d_ff=512, N=3, max_len=64, dropout=0.1, norm="pre"),
        Hyper(steps=3000, batch_size=64, lr=2e-3, warmup=400),
    ),
    "toy-translate-rnn": (
        "rnn",
        dict(d_emb=128, d_enc=128, d_dec=256, d_att=128, d_out=256, attention=True, dropout=0.1, max_len=64),
        Hyper(steps=3000, batch_size=64, lr=1e-3, warmup=200),
    ),
    "gru-no-attention": (
        "rnn",
        dict(d_emb=128, d_enc=128, d_dec=256, d_att=128, d_out=256, attention=False, dropout=0.1, max_len=64),
        Hyper(steps=3000, batch_size=64, lr=1e-3, warmup=200),
    ),
}
TINY = {  # smoke tests: seconds, not minutes
    "transformer": dict(d_model=32, h=2, d_ff=64, N=1),
    "rnn": dict(d_emb=16, d_enc=16, d_dec=32, d_att=16, d_out=32),
}


@contextmanager
def deterministic(seed: int, threads: int) -> Iterator[None]:
    """Seed ``random``/``numpy``/``torch``, fix the thread count and ask torch for deterministic
    algorithms; everything is put back afterwards (the smoke tests train inside pytest)."""
    states = random.getstate(), np.random.get_state()
    was_deterministic, old_threads = torch.are_deterministic_algorithms_enabled(), torch.get_num_threads()
    with torch.random.fork_rng(devices=[]):
        random.seed(seed)
        np.random.seed(seed)
        torch.manual_seed(seed)
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(True)
        try:
            yield
        finally:
            torch.use_deterministic_algorithms(was_deterministic)
            torch.set_num_threads(old_threads)
            random.setstate(states[0])
            np.random.set_state(states[1])


def build(architecture: str, config: dict, src_vocab: Vocab, tgt_vocab: Vocab) -> nn.Module:
    if architecture == "transformer":
        model = TranslationTransformer(TransformerConfig(vocab_size=len(src_vocab), tgt_vocab_size=len(tgt_vocab), **config))
        for p in model.parameters():  # as the Annotated Transformer: Glorot for every matrix
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
        return model
    return RNNSeq2Seq(RNNConfig(vocab_size=len(src_vocab), tgt_vocab_size=len(tgt_vocab), **config))


def batches(pairs: list[Pair], batch_size: int, rng: random.Random) -> list[list[int]]:
    """One epoch of index batches: shuffle, sort chunks of 50 batches by source length, cut, shuffle."""
    order = list(range(len(pairs)))
    rng.shuffle(order)
    out = []
    chunk = batch_size * 50
    for start in range(0, len(order), chunk):
        part = sorted(order[start : start + chunk], key=lambda i: (len(pairs[i].source), len(pairs[i].target)))
        out += [part[k : k + batch_size] for k in range(0, len(part), batch_size)]
    rng.shuffle(out)
    return out


def learning_rate(step: int, h: Hyper) -> float:
    if step < h.warmup:
        return h.lr * (step + 1) / h.warmup
    progress = min(1.0, (step - h.warmup) / max(1, h.steps - h.warmup))
    floor = h.lr * h.final_lr_fraction
    return floor + (h.lr - floor) * 0.5 * (1 + math.cos(math.pi * progress))


def tensors(pairs: list[Pair], src_vocab: Vocab, tgt_vocab: Vocab):
    src, src_padding = pad([src_vocab.encode(p.source) for p in pairs])
    tgt_in, tgt_out, tgt_padding = decoder_io([tgt_vocab.encode(p.target) for p in pairs])
    return src, src_padding, tgt_in, tgt_out, tgt_padding


@torch.no_grad()
def exact_match(model: nn.Module, pairs: list[Pair], src_vocab: Vocab, tgt_vocab: Vocab, max_len: int) -> float:
    model.eval()
    hits = 0
    for start in range(0, len(pairs), 200):
        part = sorted(pairs[start : start + 200], key=lambda p: len(p.source))
        src, src_padding = pad([src_vocab.encode(p.source) for p in part])
        for p, ids in zip(part, until_eos(greedy(model, src, src_padding, max_len))):
            hits += tuple(tgt_vocab.decode(ids)) == p.target
    return hits / max(1, len(pairs))


def train(
    name: str,
    out: Path,
    seed: int = 0,
    steps: int | None = None,
    tiny: bool = False,
    train_size: int | None = None,
    dev_size: int | None = None,
    threads: int = 2,
    log_every: int = 100,
    eval_every: int = 1000,
    log=print,
) -> dict:
    """Train preset ``name`` and save it into ``out``; returns the training record (training.json)."""
    architecture, config, hyper = PRESETS[name]
    if tiny:
        config = {**config, **TINY[architecture]}
        hyper = replace(hyper, warmup=min(hyper.warmup, 10), batch_size=16)
    if steps is not None:
        hyper = replace(hyper, steps=steps)
    train_size = train_size or (400 if tiny else DEFAULT_SIZES[0])
    dev_size = dev_size or (50 if tiny else DEFAULT_SIZES[1])
    with deterministic(seed, threads):
        return _train(name, out, architecture, config, hyper, seed, tiny, train_size, dev_size, threads,
                      log_every, eval_every, log)


def _optimize(model: nn.Module, optimizer: torch.optim.Optimizer, batch: tuple, lr: float, hyper) -> float:
    """One teacher-forced step on a batch from :func:`tensors`; returns its loss."""
    src, src_padding, tgt_in, tgt_out, tgt_padding = batch
    for group in optimizer.param_groups:
        group["lr"] = lr
    model.train()
    logits = model.teacher_forced(src, tgt_in, src_padding, tgt_padding)
    loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), tgt_out.reshape(-1),
                           ignore_index=Vocab.PAD, label_smoothing=hyper.label_smoothing)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), hyper.clip)
    optimizer.step()
    return loss.item()


def _run_record(hyper, n_train: int, recent: list[float], dev_em: float, history: list, train_seconds: float,
                cpu_seconds: float, threads: int) -> dict:
    """The training.json fields that describe the run itself (for the model card)."""
    return {
        "hyperparameters": {**asdict(hyper), "optimizer": "Adam(betas=(0.9, 0.98), eps=1e-9)",
                            "schedule": "linear warmup, then cosine decay"},
        "epochs": round(hyper.steps * hyper.batch_size / n_train, 2),
        "final_train_loss": round(sum(recent) / len(recent), 4),
        "dev_exact_match": round(dev_em, 4),
        "dev_history": history,
        "training_seconds": round(train_seconds, 1),  # wall clock (shared machine: noisy)
        "training_cpu_seconds": round(cpu_seconds, 1),  # CPU time of all threads of the process
        "threads": threads,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__}",
    }


def _train(name, out, architecture, config, hyper, seed, tiny, train_size, dev_size, threads, log_every,
           eval_every, log) -> dict:
    t0 = time.perf_counter()
    data = splits(seed=CORPUS_SEED, sizes=(train_size, dev_size, 0))
    train_pairs, dev_pairs = data["train"], data["dev"]
    src_vocab, tgt_vocab = build_vocabs(train_pairs)
    log(f"[{name}] data: {len(train_pairs)} train / {len(dev_pairs)} dev pairs, vocab {len(src_vocab)} → "
        f"{len(tgt_vocab)} ({time.perf_counter() - t0:.1f} s)")

    model = build(architecture, config, src_vocab, tgt_vocab)
    n_params = sum(p.numel() for p in model.parameters())
    log(f"[{name}] {architecture}: {n_params:,} parameters; {hyper}")
    optimizer = torch.optim.Adam(model.parameters(), lr=hyper.lr, betas=(0.9, 0.98), eps=1e-9,
                                 weight_decay=hyper.weight_decay)
    rng = random.Random(seed)
    epoch_batches: list[list[int]] = []
    epochs = 0
    start, cpu_start = time.perf_counter(), time.process_time()
    recent: list[float] = []
    history = []
    for step in range(hyper.steps):
        if not epoch_batches:
            epoch_batches = batches(train_pairs, hyper.batch_size, rng)
            epochs += 1
        batch = [train_pairs[i] for i in epoch_batches.pop()]
        lr = learning_rate(step, hyper)
        recent.append(_optimize(model, optimizer, tensors(batch, src_vocab, tgt_vocab), lr, hyper))
        recent = recent[-log_every:]
        done = step + 1
        if done % log_every == 0 or done == hyper.steps:
            elapsed = time.perf_counter() - start
            log(f"[{name}] step {done}/{hyper.steps} epoch {epochs} loss {sum(recent) / len(recent):.4f} "
                f"lr {lr:.2e} {elapsed:.0f} s")
        if eval_every and done % eval_every == 0 and done < hyper.steps:
            em = exact_match(model, dev_pairs[:500], src_vocab, tgt_vocab, model.config.max_len)
            history.append({"step": done, "dev_exact_match_500": em, "seconds": round(time.perf_counter() - start, 1)})
            log(f"[{name}] step {done}: dev exact match (500 sentences) {em:.4f}")
    train_seconds = time.perf_counter() - start
    cpu_seconds = time.process_time() - cpu_start
    model.eval()
    dev_em = exact_match(model, dev_pairs, src_vocab, tgt_vocab, model.config.max_len)
    log(f"[{name}] done in {train_seconds:.0f} s (CPU {cpu_seconds:.0f} s); dev exact match {dev_em:.4f} ({len(dev_pairs)} sentences)")
    record = {
        "model": name,
        "architecture": architecture,
        "command": "python -m attention_viz.trained.train " + " ".join(sys.argv[1:]) if __name__ == "__main__" else None,
        "seed": seed,
        "tiny": tiny,
        "corpus": {"generator": "attention_viz.trained.corpus.splits", "seed": CORPUS_SEED,
                   "train_pairs": len(train_pairs), "dev_pairs": len(dev_pairs)},
        "vocab": {"source": len(src_vocab), "target": len(tgt_vocab)},
        "parameters": n_params,
        **_run_record(hyper, len(train_pairs), recent, dev_em, history, train_seconds, cpu_seconds, threads),
    }
    checkpoint.save(out, architecture, model, src_vocab, tgt_vocab, record)
    log(f"[{name}] wrote {out}")
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m attention_viz.trained.train", description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, choices=sorted(PRESETS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, help="optimizer steps (default: the preset's)")
    parser.add_argument("--out", type=Path, help="output folder (default: the shipped models folder)")
    parser.add_argument("--tiny", action="store_true", help="tiny model and data (smoke test)")
    parser.add_argument("--train-size", type=int, help="training pairs (default 40000; 400 with --tiny)")
    parser.add_argument("--dev-size", type=int)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--eval-every", type=int, default=1000, help="dev exact match every N steps (0: never)")
    args = parser.parse_args(argv)
    out = args.out or checkpoint.MODELS_DIR / args.model
    train(args.model, out, seed=args.seed, steps=args.steps, tiny=args.tiny, train_size=args.train_size,
          dev_size=args.dev_size, threads=args.threads, eval_every=args.eval_every,
          log=lambda msg: print(msg, flush=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
