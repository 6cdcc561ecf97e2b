"""Cost of a head ablation: ``minilm`` at 128 tokens, the forward with its patterns captured (what
the app runs), plain and with heads removed (zero and mean ablation). The removal is one
``masked_fill``/``where`` on the context of the attentions that lose a head, so the target is
≤ 1.2× the plain forward.

    python -m benchmarks.ablation [--tokens 128] [--reps 30] [--threads 1]

Each contender runs in passes of its own (benchmarks/timing.py); reported: median seconds and the
ratio of medians to the plain forward.
"""

from __future__ import annotations

import argparse

import torch

from attention_viz.analysis.ablation import Ablation, parse_heads
from attention_viz.backends.registry import load_backend
from attention_viz.backends.head_effects import make_ablation
from attention_viz.core.names import ENCODER_SELF

from .texts import text_of_tokens
from .timing import in_passes, median, ratio

LIMIT = 1.2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ablation", description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    backend = load_backend("minilm")
    text = text_of_tokens(backend, args.tokens)
    two = parse_heads("2.5,3.1", ENCODER_SELF)
    every_head = tuple((ENCODER_SELF, layer, head) for layer in range(6) for head in range(12))
    ablations = {
        "zero, 2 heads": Ablation(two),
        "mean, 2 heads": make_ablation(backend, two, "mean", backend.probe_texts(8)),
        "zero, all 72 heads": Ablation(every_head),
    }
    contenders = {"plain forward": lambda: backend.forward(text)}
    for name, ablation in ablations.items():
        contenders[name] = lambda ablation=ablation: backend.forward(text, ablation=ablation)
    times = in_passes(contenders, reps=args.reps)
    print(f"minilm, {args.tokens} tokens, patterns captured, {args.threads} thread(s), {args.reps} calls each, in passes of its own")
    print(f"{'contender':<22}{'median ms':>11}{'ratio to plain':>16}")
    worst = 0.0
    for name, values in times.items():
        r = ratio(values, times["plain forward"])
        if name != "plain forward":
            worst = max(worst, r)
        print(f"{name:<22}{median(values) * 1000:>11.1f}{r:>16.3f}")
    verdict = "within" if worst <= LIMIT else "ABOVE"
    print(f"worst ablation ratio {worst:.3f}: {verdict} the {LIMIT}× target")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
