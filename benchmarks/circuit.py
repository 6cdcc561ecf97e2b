"""Cost of edge attribution patching on a GPT-2-small-shaped decoder (random weights, seeded): every
edge scored (clean run, corrupt run with gradients, one matrix product) against one forward and
backward of the same model on the same tokens; and the faithfulness check of a 50-edge circuit (one
forward of the clean input with every receiver on its own copy). Targets: scoring ≤ 3× one forward
and backward; the check ≤ 2 s.

    python -m benchmarks.circuit [--family qwen3|llama3.1|gemma2|...] [--kv-heads 12] [--tokens 32] [--reps 5]
                                 [--threads N]

Without ``--family`` the decoder is ours (core/model.py); with it, the same shape (12 layers × 12
heads, d_model 768, d_ff 3072, GPT-2's vocabulary, tied embeddings) built with that family's
transformers classes, saved to a temporary folder and loaded through ``HFBackend`` as a user's
checkpoint is: its attention runs through our registered function (backends/circuit_registry.py).

No TransformerLens column: 3.9 scores nodes, not edges (its ``EdgeAttributionConfig(granularity="edge")``
and ``ig_steps > 1`` raise NotImplementedError); its patching, DLA and node attribution patching run beside
ours in benchmarks/versus_transformer_lens.py (``make bench-tl``). Each contender runs in passes of its
own (benchmarks/timing.py); reported: medians.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
from pathlib import Path

from attention_viz.runtime.settings import apply_process_settings

apply_process_settings()  # what the CLI and the server run with, before torch loads

import numpy as np  # noqa: E402
import torch  # noqa: E402

from attention_viz.analysis.circuit import top_edges  # noqa: E402
from attention_viz.backends.circuit import circuit_metrics, circuit_model, edge_scores, graph_of  # noqa: E402
from attention_viz.backends.circuit_registry import RegistryCircuit  # noqa: E402
from attention_viz.backends.hf import HFBackend  # noqa: E402
from attention_viz.backends.patching import Side  # noqa: E402
from attention_viz.core.hooks import intervene  # noqa: E402
from attention_viz.core.model import Transformer, TransformerConfig  # noqa: E402
from attention_viz.core.names import layer_hook_name  # noqa: E402

from .families import DECODERS, save_family  # noqa: E402
from .timing import in_passes, median  # noqa: E402

GPT2_SMALL = dict(shape="decoder-only", vocab_size=50257, d_model=768, h=12, d_ff=3072, N=12, max_len=1024,
                  positional="learned", norm="pre", activation="gelu_tanh", dropout=0.0, scale_embeddings=False,
                  tie_embeddings=True)
SCORE_TARGET, CHECK_TARGET, CIRCUIT_EDGES = 3.0, 2.0, 50


def family_shape(kv_heads: int) -> dict:
    """GPT2_SMALL in a transformers decoder's config keys."""
    g = GPT2_SMALL
    return dict(vocab_size=g["vocab_size"], hidden_size=g["d_model"], intermediate_size=g["d_ff"],
                num_hidden_layers=g["N"], num_attention_heads=g["h"], num_key_value_heads=kv_heads,
                head_dim=g["d_model"] // g["h"], max_position_embeddings=g["max_len"], tie_word_embeddings=True)


def sides(model: Transformer | RegistryCircuit, tokens: int) -> tuple[Side, Side]:
    """A clean input and a corrupt one differing in its first half, measured as logit(0) − logit(1)."""
    generator = torch.Generator().manual_seed(1)
    clean = torch.randint(2, GPT2_SMALL["vocab_size"], (1, tokens), generator=generator)
    corrupt = clean.clone()
    corrupt[0, : tokens // 2] = torch.randint(2, GPT2_SMALL["vocab_size"], (tokens // 2,), generator=generator)

    def measure(hidden: torch.Tensor) -> torch.Tensor:
        # ours hands over hidden states; a transformers decoder its last position's logits
        logits = model.logits(hidden[:, -1]) if isinstance(model, Transformer) else hidden[:, -1]
        return logits[:, 0] - logits[:, 1]
    return Side(None, (clean,), measure), Side(None, (corrupt,), measure)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.circuit", description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--family", choices=list(DECODERS), help="a transformers decoder family (default: ours)")
    parser.add_argument("--kv-heads", type=int, default=GPT2_SMALL["h"], help="key/value heads of --family")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    with contextlib.ExitStack() as stack:
        if args.family is None:
            torch.manual_seed(0)
            model = Transformer(TransformerConfig(**GPT2_SMALL)).eval()
            run, parameters, title = model, model.parameters(), "GPT-2-small shape, our decoder"
        else:  # a checkpoint in a folder, loaded as a user's is
            folder = Path(stack.enter_context(tempfile.TemporaryDirectory())) / args.family
            backend = HFBackend(str(save_family(folder, args.family, **family_shape(args.kv_heads))))
            model = circuit_model(backend)
            run, parameters = model.registry, backend.model.parameters()
            title = f"GPT-2-small shape, {args.family} in transformers' classes with {args.kv_heads} kv heads"
        return measure(model, run, [p for p in parameters if p.requires_grad], title, args)


def measure(model: Transformer | RegistryCircuit, run, parameters: list[torch.Tensor], title: str,
            args: argparse.Namespace) -> int:
    """Time and print the table; ``run`` maps token ids to what the metric reads."""
    clean, corrupt = sides(model, args.tokens)
    graph = graph_of(model)
    edges = int(graph.allowed().sum())

    def forward_backward():
        return torch.autograd.grad(corrupt.measure(run(*corrupt.args)).sum(), parameters)

    def forward_backward_to_the_input():  # no weights' gradients: the stricter yardstick
        zero = {}

        def nudge(x, hook):
            zero["leaf"] = torch.zeros_like(x, requires_grad=True)
            return x + zero["leaf"]
        with intervene([(layer_hook_name("decoder", 0), nudge)]):
            metric = corrupt.measure(run(*corrupt.args)).sum()
        return torch.autograd.grad(metric, zero["leaf"])

    def forward():
        with torch.no_grad():
            return corrupt.measure(run(*corrupt.args))

    scores, _, corrupt_run = edge_scores(model, clean, corrupt)
    chosen = top_edges(np.nan_to_num(scores), graph.allowed(), CIRCUIT_EDGES)
    times = in_passes({
        "forward and backward": forward_backward,  # the weights' gradients, as in training
        "forward and backward to the input only": forward_backward_to_the_input,
        "forward": forward,
        "every edge scored (eap)": lambda: edge_scores(model, clean, corrupt, "eap"),
        f"faithfulness of {CIRCUIT_EDGES} edges": lambda: circuit_metrics(model, clean, corrupt_run, chosen),
        "every edge scored (eap-ig, 5 steps)": lambda: edge_scores(model, clean, corrupt, "eap-ig"),
    }, args.reps)
    seconds = {name: median(values) for name, values in times.items()}
    base = seconds["forward and backward"]
    print(f"{title} (12 layers × 12 heads, d_model 768, random weights), {args.tokens} tokens, "
          f"{edges} edges; {args.threads} thread(s), load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} "
          f"cores, median of {args.reps} calls, each contender in passes of its own")
    strict = seconds["forward and backward to the input only"]
    print(f"{'':<40}{'s':>8}{'× fwd+bwd':>11}{'× fwd+bwd to input':>20}  target")
    for name, value in seconds.items():
        target = {"every edge scored (eap)": f"≤ {SCORE_TARGET:g}× fwd+bwd",
                  f"faithfulness of {CIRCUIT_EDGES} edges": f"≤ {CHECK_TARGET:g} s"}.get(name, "")
        ok = ("" if not target else " ok" if (value <= SCORE_TARGET * base if "fwd" in target else value <= CHECK_TARGET)
              else " MISSED")
        print(f"{name:<40}{value:>8.3f}{value / base:>11.2f}{value / strict:>20.2f}  {target}{ok}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
