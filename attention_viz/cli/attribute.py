"""``python -m attention_viz attribute``: direct logit attribution on a decoder (see
:mod:`attention_viz.analysis.logit_attribution`). Registered by main.py."""

from __future__ import annotations

import argparse
import json

from ..analysis.logit_attribution import LogitAttribution
from ..backends.registry import DEFAULT_MODEL, load_backend
from .common import add_placement_options, placement


def add_parser(commands) -> None:
    attribute = commands.add_parser("attribute", help="how much each head and MLP writes the answer straight into "
                                                      "the logits: direct logit attribution (decoders)")
    attribute.add_argument("--model", default=DEFAULT_MODEL, help="a decoder: induction or hf:<id or folder of a "
                                                                  "decoder (Llama, Qwen, Gemma, Mistral, Phi-3, OLMo …)>; "
                                                                  "Gemma 2's logits are split before their final "
                                                                  "soft-cap")
    attribute.add_argument("--text", required=True, help="the input; the answer is its next token")
    attribute.add_argument("--answer", required=True, help="the next token credited (one token)")
    attribute.add_argument("--wrong", required=True, help="the token it is compared with (one token)")
    attribute.add_argument("--position", type=int,
                           help="the position whose next-token logits are split (default: the last; negative "
                                "counts from the end)")
    attribute.add_argument("--json", action="store_true",
                           help='print {"tokens", "metric", "heads": [[...] per layer], "mlp", "embed", "rest", '
                                '"total"}')
    add_placement_options(attribute)


def cmd_attribute(args: argparse.Namespace) -> int:
    from ..backends.logit_attribution import attribute  # torch loads with the model, not with the parser

    result = attribute(load_backend(args.model, **placement(args)), args.text, args.answer, args.wrong, args.position)
    print(json.dumps(result.to_dict(), ensure_ascii=False) if args.json else summary(result))
    return 0


def summary(result: LogitAttribution) -> str:
    """The heads' contributions as a table (layers × heads), the MLPs', and the largest parts."""
    layers, heads = result.heads.shape
    lines = [f"{result.model}: {result.metric} = {result.total:.4f}",
             "direct contribution of each head (through the final norm, its scale frozen):",
             " " * 9 + "".join(f"{f'h{h}':>8}" for h in range(heads)) + ("     mlp" if result.mlp.any() else "")]
    for layer in range(layers):
        mlp = f"{result.mlp[layer]:8.3f}" if result.mlp.any() else ""
        lines.append(f"layer {layer:<3}" + "".join(f"{v:8.3f}" for v in result.heads[layer]) + mlp)
    lines.append(f"embed {result.embed:.4f}, rest (biases) {result.rest:.4f}; parts sum to {result.parts_sum:.4f}")
    lines.append("largest: " + ", ".join(f"{name} ({value:+.3f})" for name, value in result.largest()))
    return "\n".join(lines)
