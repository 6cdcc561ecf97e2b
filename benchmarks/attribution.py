"""Attribution patching beside activation patching: seconds per call (the whole call: the clean and
corrupt runs, then one backward, or one patched run per site batched) and how well the estimates
agree with the measurements (Pearson r of the restored fractions), on each model's preset pair.

    python -m benchmarks.attribution [--models induction minilm toy-translate] [--reps 3] [--threads 2]

An ``hf:`` folder of a decoder we run may be named too, with ``--clean/--corrupt/--answer/--wrong``.
Each contender runs in passes of its own (benchmarks/timing.py); reported: medians.
"""

from __future__ import annotations

import argparse
import os

from attention_viz.runtime.settings import apply_process_settings

apply_process_settings()  # what the CLI and the server run with (passive OpenMP waits), before torch loads

import torch  # noqa: E402

from attention_viz.analysis.attribution_patching import agreement  # noqa: E402
from attention_viz.analysis.patching import SITES, resolve_inputs  # noqa: E402
from attention_viz.backends.attribution_patching import attribution_patch  # noqa: E402
from attention_viz.backends.patching import patch  # noqa: E402
from attention_viz.backends.registry import load_backend  # noqa: E402

from .timing import in_passes, median  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.attribution", description=__doc__.split("\n")[0])
    parser.add_argument("--models", nargs="+", default=["induction", "minilm", "toy-translate"])
    parser.add_argument("--clean")
    parser.add_argument("--corrupt")
    parser.add_argument("--answer")
    parser.add_argument("--wrong")
    parser.add_argument("--sites", nargs="+", choices=SITES, default=list(SITES))
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    print(f"{args.threads} thread(s), load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores, median of "
          f"{args.reps} calls, each contender in passes of its own")
    print(f"{'model':<16}{'tokens':>7}{'site':>16}{'sites':>7}{'activation s':>14}{'attribution s':>15}"
          f"{'speed-up':>10}{'r':>8}")
    for model in args.models:
        backend = load_backend(model)
        inputs = resolve_inputs(model, args.clean, args.corrupt, args.answer, args.wrong)
        tokens = len(backend.tokenize(inputs[0])[0])
        for site in args.sites:
            measured, estimated = patch(backend, *inputs, site), attribution_patch(backend, *inputs, site)
            r = agreement(measured, estimated)
            times = in_passes({
                "activation": lambda site=site: patch(backend, *inputs, site),
                "attribution": lambda site=site: attribution_patch(backend, *inputs, site),
            }, reps=args.reps, warmup=1)
            slow, fast = median(times["activation"]), median(times["attribution"])
            sites = int((~torch.isnan(torch.from_numpy(measured.patched))).sum())
            shown = "-" if r is None else f"{r:.3f}"
            print(f"{model:<16}{tokens:>7}{site:>16}{sites:>7}{slow:>14.3f}{fast:>15.3f}{slow / fast:>9.1f}×{shown:>8}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
