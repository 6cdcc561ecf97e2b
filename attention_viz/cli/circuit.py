"""``python -m attention_viz circuit``: the edges between a decoder's heads that carry the difference
between a clean and a corrupt input, and how much of it the top edges keep (see
:mod:`attention_viz.analysis.circuit`). Registered by cli/main.py."""

from __future__ import annotations

import argparse
import json

from ..analysis.circuit import DEFAULT_TOP, IG_STEPS, MAX_IG_STEPS, METHODS, Circuit, check_steps
from ..analysis.patching import resolve_inputs
from ..backends.registry import load_backend
from ..errors import ModelError
from .common import add_placement_options, placement

CIRCUIT_MODEL = "induction"  # the app's default model is an encoder, which has no circuit here


def add_parser(commands) -> None:
    circuit = commands.add_parser("circuit", help="the edges between heads that carry the difference between two "
                                                  "inputs (edge attribution patching), checked by running the circuit")
    circuit.add_argument("--model", default=CIRCUIT_MODEL, help=f"a pre-LN decoder (see `models`) or hf:<id or folder>; "
                                                                 f"default {CIRCUIT_MODEL}, the shipped decoder")
    circuit.add_argument("--clean", help="the input whose answer the circuit should keep (default: the model's preset)")
    circuit.add_argument("--corrupt", help="the same number of tokens, differing in the fact under test")
    circuit.add_argument("--answer", help="the clean input's next token, one token")
    circuit.add_argument("--wrong", help="the corrupt input's next token, one token")
    circuit.add_argument("--method", choices=list(METHODS), default="eap",
                         help="; ".join(f"{name}: {what}" for name, what in METHODS.items()))
    circuit.add_argument("--steps", type=int,
                         help=f"eap-ig's interpolation steps between the corrupt and the clean input, 1 to "
                              f"{MAX_IG_STEPS} (default {IG_STEPS}); each is one forward and backward")
    circuit.add_argument("--top", type=int, default=DEFAULT_TOP,
                         help=f"how many edges (largest |score|) make the circuit (default {DEFAULT_TOP})")
    circuit.add_argument("--json", action="store_true",
                         help='print {"nodes", "edges": [{"from", "to", "score"}], "faithfulness": {"edges", '
                              '"metric_kept"}, "steps" (eap-ig; null for eap), ...}')
    add_placement_options(circuit)


def cmd_circuit(args: argparse.Namespace) -> int:
    if args.top < 0:
        raise ModelError(f"--top must be 0 or more, got {args.top}")
    if args.steps is not None and args.method != "eap-ig":
        raise ModelError("--steps sets eap-ig's interpolation steps: add --method eap-ig")
    steps = check_steps(IG_STEPS if args.steps is None else args.steps)
    clean, corrupt, answer, wrong = resolve_inputs(args.model, args.clean, args.corrupt, args.answer, args.wrong)
    from ..backends.circuit import circuit  # torch loads with the model, not with the argument parser

    result = circuit(load_backend(args.model, **placement(args)), clean, corrupt, answer, wrong, args.method, args.top,
                     steps)
    print(json.dumps(result.to_dict(), ensure_ascii=False) if args.json else summary(result))
    return 0


def summary(result: Circuit) -> str:
    """The metric on each input, the circuit's edges and the share of the gap it keeps."""
    steps = f" over {result.steps} steps" if result.steps else ""
    lines = [f"{result.model}: {result.method}{steps}, metric {result.metric}",
             f"clean {result.clean:.4f}, corrupt {result.corrupt:.4f}",
             f"top {result.top} edges of {int(result.graph.allowed().sum())} (score: (a_clean − a_corrupt) · gradient):"]
    lines += [f"  {e['from']:>8} → {e['to']:<8} {e['score']:+.4f}" for e in result.edges()]
    lines.append(f"the circuit alone keeps {result.metric_kept:.3f} of the clean − corrupt gap "
                 f"(metric {result.circuit_metric:.4f})")
    return "\n".join(lines)
