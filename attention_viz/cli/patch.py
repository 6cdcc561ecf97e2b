"""``python -m attention_viz patch``: activation patching between a clean and a corrupt input
(see :mod:`attention_viz.analysis.patching`). Registered by cli.py."""

from __future__ import annotations

import argparse
import json

import numpy as np

from ..analysis.patching import SITE_DESCRIPTIONS, SITES, Patching, resolve_inputs
from ..backends.registry import DEFAULT_MODEL, load_backend
from .common import add_placement_options, placement

METHODS = ("activation", "attribution")


def add_parser(commands) -> None:
    patch = commands.add_parser("patch", help="which heads (or layers × positions) carry the difference between "
                                              "two inputs: activation patching")
    patch.add_argument("--model", default=DEFAULT_MODEL, help="model name (see `models`) or hf:<id or folder>")
    patch.add_argument("--clean", help="the input whose answer is restored (default: the model's preset pair)")
    patch.add_argument("--corrupt", help="the same number of tokens, differing in the fact under test")
    patch.add_argument("--answer", help="the clean input's answer: one token (decoders: the next token; "
                                        "toy-translate: a French word; minilm: a candidate word in the text)")
    patch.add_argument("--wrong", help="the corrupt input's answer, one token")
    patch.add_argument("--site", choices=SITES, default="heads",
                       help="; ".join(f"{site}: {what}" for site, what in SITE_DESCRIPTIONS.items()))
    patch.add_argument("--noising", action="store_true",
                       help="run the clean input with one corrupt value instead (what each site is needed for)")
    patch.add_argument("--method", choices=METHODS, default="activation",
                       help="activation: one patched run per site; attribution: every site estimated at once from "
                            "one backward, (a_clean − a_corrupt) · ∂metric/∂a (Nanda 2023)")
    patch.add_argument("--token", help="encoders: the token whose representation is compared (default: the "
                                       "first pronoun)")
    patch.add_argument("--json", action="store_true",
                       help='print {"tokens", "corrupt_tokens", "metric", "clean", "corrupt", SITE: [[...] per layer]}')
    add_placement_options(patch)


def cmd_patch(args: argparse.Namespace) -> int:
    clean, corrupt, answer, wrong = resolve_inputs(args.model, args.clean, args.corrupt, args.answer, args.wrong)
    from ..backends.attribution_patching import attribution_patch  # torch loads with the model, not with the parser
    from ..backends.patching import patch

    run = attribution_patch if args.method == "attribution" else patch
    result = run(load_backend(args.model, **placement(args)), clean, corrupt, answer, wrong, args.site, args.noising,
                 args.token)
    if args.json:
        print(json.dumps(result.to_dict(), ensure_ascii=False))
        return 0
    print(summary(result, args.method))
    return 0


def summary(result: Patching, method: str = "activation") -> str:
    """The restored fractions as a table (rows × heads, or rows × positions), and the top sites."""
    restored = result.restored
    lines = [f"{result.model}: {method} patching, {'noising' if result.noising else 'denoising'}, site {result.site}",
             f"metric: {result.metric}; clean {result.clean:.4f}, corrupt {result.corrupt:.4f}",
             ("estimated " if method == "attribution" else "") + "restored fraction (patched − corrupt) / (clean − corrupt):"]
    if restored.ndim == 3:  # head_positions: each head's best position
        lines.append("(each head's largest over positions)")
        restored = np.nanmax(restored, axis=2)
    columns = ([f"h{h}" for h in range(restored.shape[1])] if result.site != "resid"
               else [str(p) for p in range(restored.shape[1])])
    width = max(len(r) for r in result.rows)
    lines.append(" " * width + "".join(f"{c:>7}" for c in columns))
    lines += [f"{row:>{width}}" + "".join("      -" if np.isnan(v) else f"{v:7.2f}" for v in values)
              for row, values in zip(result.rows, restored)]
    if result.site == "resid":
        lines.append("positions: " + " ".join(f"{p}:{label}" for p, label in enumerate(result.tokens)))
        if result.target_tokens is not None:
            lines.append("decoder positions: " + " ".join(f"{p}:{t}" for p, t in enumerate(result.target_tokens)))
    order = np.argsort(-np.nan_to_num(result.restored, nan=-np.inf), axis=None)[:3]
    cells = [np.unravel_index(i, result.restored.shape) for i in order]
    lines.append("top: " + ", ".join(f"{cell_name(result, c)} ({result.restored[c]:.2f})" for c in cells))
    lines += [f"warning: {result.warning}"] if result.warning else []
    return "\n".join(lines)


def cell_name(result: Patching, cell: tuple[int, ...]) -> str:
    """"layer 2 head 3", "layer 3 at 10 'it'", "layer 2 head 3 at 10 'it'"."""
    row, *rest = (int(i) for i in cell)
    if result.site == "resid":
        return f"{result.rows[row]} at {rest[0]} {position_label(result, row, rest[0])!r}"
    name = f"{result.rows[row]} head {rest[0]}"
    return name if len(rest) == 1 else f"{name} at {rest[1]} {position_label(result, row, rest[1])!r}"


def position_label(result: Patching, row: int, position: int) -> str:
    """The clean token at ``position`` of the input that row reads (the target for decoder rows of an
    encoder–decoder)."""
    reads_target = result.target_tokens is not None and not result.rows[row].startswith("encoder")
    labels = result.target_tokens if reads_target else result.tokens
    return labels[position] if position < len(labels) else "?"
