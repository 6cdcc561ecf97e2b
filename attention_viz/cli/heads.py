"""The command line beyond attention weights: ``run --value-norms``, ``run --ablate L.H,... [--ablation
zero|mean]``, ``run --value-zeroing --alti`` (context mixing per layer) and ``heads --model M [--text ...]
[--json]`` (the head detector). Registered by cli.py."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

import numpy as np

from ..analysis.ablation import MODES, parse_heads
from ..analysis.detector import MASKS, detect, offset_mask, to_json_ready, top
from ..analysis.value_norms import value_norm_arrays
from ..backends.registry import DEFAULT_MODEL, load_backend
from ..errors import ModelError
from ..core.names import CROSS, DECODER_SELF, ENCODER_SELF, Group, parse_hook_name
from ..core.result import AttentionResult
from .common import add_placement_options, placement

if TYPE_CHECKING:  # torch loads with the model, not with the argument parser
    from ..backends.base import Backend, Outputs

ATTENTIONS = {"encoder": ENCODER_SELF, "decoder": DECODER_SELF}
MAX_PROBES = 1000  # forwards one `heads` call may run over the built-in probes
DESCRIPTIONS = {
    "previous_token": "share of attention on the previous token",
    "duplicate_token": "share on earlier copies of the same token",
    "induction": "share on the token after an earlier copy (induction)",
    "sink": "share on the special tokens (the first token when there are none)",
    "self": "share on the token itself",
}


def add_run_options(run: argparse.ArgumentParser) -> None:
    run.add_argument("--value-norms", action="store_true",
                     help="also save ‖α f(x)‖ (Kobayashi et al. 2020) as ...value_norm beside every ...pattern")
    run.add_argument("--ablate", metavar="L.H,...",
                     help="remove these heads during the forward: layer.head pairs, 0-indexed, e.g. 2.5,3.1 "
                          "(first attention of the model; cross:L.H or decoder:L.H for the others)")
    run.add_argument("--ablation", choices=MODES, default="zero",
                     help="zero: the head's context becomes 0; mean: its mean context over the built-in probe set")
    run.add_argument("--value-zeroing", action="store_true",
                     help="also save each layer's value zeroing (Mohebbi et al. 2023) as ...self_attn.value_zeroing "
                          "[query, key]")
    run.add_argument("--alti", action="store_true",
                     help="also save each layer's ALTI contributions (Ferrando et al. 2022) as ...self_attn.alti "
                          "[query, key]")


def default_group(backend: Backend) -> Group:
    return DECODER_SELF if backend.shape == "decoder-only" else ENCODER_SELF


def run(backend: Backend, args: argparse.Namespace) -> AttentionResult:
    """``run`` with the options above; the npz gets value norms and, with --ablate, the model's output."""
    if args.ablation != "zero" and not args.ablate:
        raise ModelError("--ablation needs --ablate (which heads to remove)")
    asked = tuple(args.kinds)
    kinds = tuple(dict.fromkeys(asked + (("v", "pattern") if args.value_norms else ())))
    if args.value_norms and ("v" not in backend.kinds or backend.output_projection(default_group(backend), 0) is None):
        why = ("it runs in transformers and its attention does not go through transformers' attention registry, where "
               "our hook points read the values" if backend.implementation == "transformers"
               else "its attention has no values and W_O")
        raise ModelError(f"{backend.name} cannot give value-weighted norms: {why}")
    if args.ablate:
        from ..backends.head_effects import make_ablation

        ablation = make_ablation(backend, parse_heads(args.ablate, default_group(backend)), args.ablation)
        result, outputs = backend.forward(args.text, args.target, kinds, ablation=ablation)
        result.meta["output"] = output_summary(outputs)
    else:
        ablation = None
        result = backend.run(args.text, target=args.target, kinds=kinds)
    if args.value_norms:
        norms = value_norm_arrays(result, backend.output_projection)
        for name in [n for n in result.arrays if parse_hook_name(n)[2] not in asked]:
            del result.arrays[name]  # values captured only to compute the norms
        result.arrays.update(norms)
    measures = [m for m, asked_for in (("value_zeroing", args.value_zeroing), ("alti", args.alti)) if asked_for]
    if measures:
        from ..backends.mixing import mixing_arrays

        result.arrays.update(mixing_arrays(backend, result, measures, ablation))
    return result


def output_summary(outputs: Outputs) -> dict:
    """The model's output in JSON form: the mean-pooled sentence embedding (encoders) or the
    log-probability of every next token (decoders)."""
    if outputs.log_probs is not None:
        return {"log_probs": np.round(outputs.log_probs, 6).tolist(),
                "loss": float(-np.mean(outputs.log_probs))}
    return {"sentence_embedding": np.round(outputs.hidden.mean(axis=0), 6).tolist()}


def add_parser(commands) -> None:
    heads = commands.add_parser("heads", help="score every head as previous-token, induction, sink ... over many sentences")
    heads.add_argument("--model", default=DEFAULT_MODEL, help="model name (see `models`) or hf:<id or folder>")
    heads.add_argument("--text", help="your own text, scored together with the built-in probes")
    heads.add_argument("--attention", choices=list(ATTENTIONS),
                       help="which self-attention of an encoder–decoder model (default: encoder)")
    heads.add_argument("--probes", type=int, default=24, help=f"how many built-in probes (default 24, at most {MAX_PROBES}; 0: only --text)")
    heads.add_argument("--offset", type=int, action="append", default=[],
                       help="also score a fixed relative offset d (key = query + d); repeatable")
    heads.add_argument("--json", action="store_true", help="print {score_name: [[per head] per layer]}")
    add_placement_options(heads)


def cmd_heads(args: argparse.Namespace) -> int:
    if not 0 <= args.probes <= MAX_PROBES:
        raise ModelError(f"--probes must be between 0 and {MAX_PROBES} (each probe is one forward), got {args.probes}")
    backend = load_backend(args.model, **placement(args))
    group = ATTENTIONS[args.attention] if args.attention else default_group(backend)
    if group == DECODER_SELF and backend.shape == "encoder-only" or group == ENCODER_SELF and backend.shape == "decoder-only":
        raise ModelError(f"{backend.name} has no {group[0]} self-attention")
    if group == CROSS:
        raise ModelError("the detector scores self-attention; cross-attention has no previous token or self")
    texts = backend.probe_texts(args.probes) if args.probes else []
    if args.text is not None:
        if not args.text.strip():
            raise ModelError("--text is empty: give a sentence")
        texts.append(args.text)
    if not texts:
        raise ModelError("nothing to score: give --text or --probes above 0")
    masks = dict(MASKS)
    for offset in args.offset:
        masks[f"offset_{offset}"] = offset_mask(offset)
    scores = detect(backend.run, texts, group, masks)
    if args.json:
        print(json.dumps(to_json_ready(scores)))
        return 0
    print(f"{backend.name}, {group[0]} self-attention, over {len(texts)} inputs "
          f"({args.probes} built-in probes{' + your text' if args.text is not None else ''})")
    for name, values in scores.items():
        print(f"\n{name}: {DESCRIPTIONS.get(name, 'share on key = query + ' + name.split('_', 1)[-1])}")
        print(table(values))
        print("top: " + ", ".join(f"{layer}.{head} ({score:.3f})" for layer, head, score in top(values, 3)))
    return 0


def table(values: np.ndarray) -> str:
    """Layers as rows, heads as columns, three decimals."""
    heads = values.shape[1]
    lines = ["layer " + "".join(f"{'h' + str(h):>7}" for h in range(heads))]
    lines += [f"{layer:>5} " + "".join(f"{v:7.3f}" for v in row) for layer, row in enumerate(values)]
    return "\n".join(lines)


