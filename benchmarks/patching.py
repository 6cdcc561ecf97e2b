"""Cost of activation patching: ``minilm`` on its coreference pair (16 tokens), every site of each
kind, the whole call (clean, corrupt and patched runs). Targets: ``heads`` ≤ 1.5 s, ``resid`` ≤ 3 s.

    python -m benchmarks.patching [--reps 5] [--threads 2]

Beside ours, the plain way: one full forward per site through ``run_with_hooks`` (no batching, no
start at the site's layer), on the same model and sites. TransformerLens's ``patching`` module runs
beside ours on a GPT-2-small shape in benchmarks/versus_transformer_lens.py (``make bench-tl``).
Each contender runs in passes of its own (benchmarks/timing.py); reported: medians.
"""

from __future__ import annotations

import argparse
import os

from attention_viz.runtime.settings import apply_process_settings

apply_process_settings()  # what the CLI and the server run with (passive OpenMP waits), before torch loads

import torch  # noqa: E402

from attention_viz.analysis.patching import PRESETS, SITES  # noqa: E402
from attention_viz.backends.patching import Experiment, patch, replacement  # noqa: E402
from attention_viz.backends.registry import load_backend  # noqa: E402
from attention_viz.core.hooks import run_with_hooks  # noqa: E402

from .timing import in_passes, median  # noqa: E402

TARGETS = {"heads": 1.5, "resid": 3.0}


def one_site_per_forward(experiment: Experiment) -> list[float]:
    """The metric of every site with one whole forward each: what batching and resuming save."""
    with torch.inference_mode():
        return [float(experiment.receiver.measure(run_with_hooks(
            experiment.model, *experiment.receiver.args,
            fwd_hooks=[(site.name, replacement(experiment.cache[site.name], [(0, site.index)]))]))[0])
            for site in experiment.sites]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.patching", description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--sites", nargs="+", choices=SITES, default=["heads", "resid", "patterns"])
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    backend = load_backend("minilm")
    inputs = PRESETS["minilm"].inputs
    tokens = len(backend.tokenize(inputs[0])[0])
    print(f"minilm, {tokens} tokens, {args.threads} thread(s), load average {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} cores, median of {args.reps} calls, each contender in passes of its own")
    print(f"{'site':<16}{'sites':>7}{'ours s':>9}{'one forward per site s':>25}{'speed-up':>10}  target")
    for site in args.sites:
        experiment = Experiment(backend, *inputs, site)
        each = experiment.each()
        plain_values = one_site_per_forward(experiment)
        if max(abs(each[s.cell] - v) for s, v in zip(experiment.sites, plain_values)) > 1e-4:
            raise SystemExit(f"{site}: the batched runs and one forward per site disagree")
        times = in_passes({
            "ours": lambda site=site: patch(backend, *inputs, site),
            "plain": lambda experiment=experiment: one_site_per_forward(experiment),
        }, reps=args.reps, warmup=1)
        ours, plain = median(times["ours"]), median(times["plain"])
        target = TARGETS.get(site)
        verdict = "" if target is None else f"≤ {target} s: {'met' if ours <= target else 'NOT met'}"
        print(f"{site:<16}{len(experiment.sites):>7}{ours:>9.3f}{plain:>25.3f}{plain / ours:>9.1f}×  {verdict}")
    print("TransformerLens beside ours (same GPT-2-small-shaped weights): make bench-tl")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
