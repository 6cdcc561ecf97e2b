"""Ours beside TransformerLens on the same weights: a GPT-2-small-shaped model (12 layers × 12 heads,
d_model 768, seeded random weights) saved as a transformers ``GPT2LMHeadModel`` folder, opened by ours
(``hf:``, our decoder) and by TransformerLens (a ``HookedTransformer`` given that folder's weights),
on one clean/corrupt pair of 32 tokens, metric logit(answer) − logit(wrong) at the last position:

* activation patching of every head's output at every position: ours ``patch(..., "heads")`` against
  ``transformer_lens.patching.get_act_patch_attn_head_out_all_pos`` (its clean run cached and its
  corrupt run measured first, as our call does), both as restored fractions;
* direct logit attribution per head: ours ``attribute`` against ``cache.stack_head_results(layer=-1,
  pos_slice=-1)`` put through ``cache.apply_ln_to_stack`` and dotted with W_U[answer] − W_U[wrong];
* attribution patching per head: ours ``attribution_patch(..., "heads")`` against
  ``transformer_lens.tools.analysis.attribution_patch`` (node scores at every position, summed per
  head), both divided by the clean − corrupt gap.

TransformerLens loads the weights with ``fold_ln``, ``center_writing_weights`` and ``center_unembed``
(its defaults: they change no logit difference, no patched metric and no head's normalised direct
attribution; ``apply_ln_to_stack`` divides by the final norm's scale only, so the norm's weight must
be folded into W_U for its numbers to mean ours) and without ``fold_value_biases`` (which would move
each head's value bias out of its output: ours keeps it there). Either other choice makes its direct
logit attribution differ from ours: the biases and norm weights are random too so that it would show.

    make bench-tl   (builds .venv-tl beside .venv with TransformerLens 3.9, then runs this with --doc)
    .venv-tl/bin/python -m benchmarks.versus_transformer_lens [--reps 3] [--threads N] [--doc docs/performance.md]

Each contender runs in passes of its own (benchmarks/timing.py) after a warm-up call, at the same
thread count, both models loaded in this one process; reported: the fastest call.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

from attention_viz.runtime.settings import apply_process_settings

apply_process_settings()  # what the CLI and the server run with, before torch loads
os.environ.setdefault("TQDM_DISABLE", "1")  # TransformerLens' patching draws a progress bar per site

import numpy as np  # noqa: E402
import torch  # noqa: E402
from tokenizers import Tokenizer, models, pre_tokenizers  # noqa: E402
from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast  # noqa: E402

from attention_viz.backends.attribution_patching import attribution_patch  # noqa: E402
from attention_viz.backends.logit_attribution import attribute  # noqa: E402
from attention_viz.backends.patching import patch  # noqa: E402
from attention_viz.backends.registry import load_backend  # noqa: E402

from .performance_doc import TRANSFORMER_LENS_HEADING, with_section  # noqa: E402
from .timing import in_passes  # noqa: E402

GPT2_SMALL = dict(n_embd=768, n_layer=12, n_head=12, n_inner=3072, n_positions=1024)


def save_model(folder: Path, vocab: int) -> None:
    """A GPT-2-small-shaped GPT2LMHeadModel with seeded random weights (biases and norm weights too) and
    a word-level tokenizer (words w0, w1, ...: one token each, no special tokens added), saved as
    transformers would."""
    words = {f"w{i}": i for i in range(vocab)}
    tokenizer = Tokenizer(models.WordLevel(words, unk_token="w0"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="w0").save_pretrained(folder)
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=vocab, **GPT2_SMALL))
    with torch.no_grad():  # GPT-2's initialisation leaves every bias 0 and every norm weight 1: nothing to fold
        for name, parameter in model.named_parameters():
            if name.endswith(".bias"):
                parameter.normal_(0.0, 0.02)
            elif ".ln_" in name:
                parameter.uniform_(0.5, 1.5)
    model.save_pretrained(folder)


def texts(vocab: int, tokens: int) -> tuple[str, str]:
    """A clean text and a corrupt one whose first half differs (seeded)."""
    generator = torch.Generator().manual_seed(1)
    clean = torch.randint(1, vocab, (tokens,), generator=generator)
    corrupt = clean.clone()
    corrupt[: tokens // 2] = torch.randint(1, vocab, (tokens // 2,), generator=generator)
    return " ".join(f"w{i}" for i in clean.tolist()), " ".join(f"w{i}" for i in corrupt.tolist())


def answer_words(hf: GPT2LMHeadModel, clean: torch.Tensor, corrupt: torch.Tensor) -> tuple[int, int]:
    """The clean run's top next token, and the corrupt run's (its runner-up on the clean run if the same)."""
    with torch.inference_mode():
        top_clean = hf(clean).logits[0, -1].topk(2).indices.tolist()
        top_corrupt = int(hf(corrupt).logits[0, -1].argmax())
    return top_clean[0], top_corrupt if top_corrupt != top_clean[0] else top_clean[1]


def hooked_transformer(hf: GPT2LMHeadModel):
    """TransformerLens' HookedTransformer holding ``hf``'s weights (see the module's docstring for the
    processing chosen)."""
    from transformer_lens import HookedTransformer, HookedTransformerConfig
    from transformer_lens.pretrained.weight_conversions.gpt2 import convert_gpt2_weights

    c = hf.config
    cfg = HookedTransformerConfig(
        n_layers=c.n_layer, d_model=c.n_embd, n_heads=c.n_head, d_head=c.n_embd // c.n_head, d_mlp=c.n_inner,
        d_vocab=c.vocab_size, n_ctx=c.n_positions, act_fn="gelu_new", normalization_type="LN",
        eps=c.layer_norm_epsilon, positional_embedding_type="standard", original_architecture="GPT2LMHeadModel",
        default_prepend_bos=False, device="cpu", dtype=torch.float32)
    model = HookedTransformer(cfg)
    model.load_and_process_state_dict(convert_gpt2_weights(hf, cfg), fold_ln=True, center_writing_weights=True,
                                      center_unembed=True, fold_value_biases=False)
    return model.eval()


class TransformerLensRuns:
    """The three tasks written as a TransformerLens user writes them, on token ids."""

    def __init__(self, model, clean: torch.Tensor, corrupt: torch.Tensor, answer: int, wrong: int) -> None:
        self.model, self.clean, self.corrupt, self.answer, self.wrong = model, clean, corrupt, answer, wrong

    def logit_diff(self, logits: torch.Tensor) -> torch.Tensor:
        return logits[0, -1, self.answer] - logits[0, -1, self.wrong]

    def activation_patching(self) -> np.ndarray:
        from transformer_lens import patching

        with torch.inference_mode():
            clean_logits, clean_cache = self.model.run_with_cache(self.clean)
            clean, corrupt = float(self.logit_diff(clean_logits)), float(self.logit_diff(self.model(self.corrupt)))

            def restored(logits: torch.Tensor) -> torch.Tensor:
                return (self.logit_diff(logits) - corrupt) / (clean - corrupt)
            return patching.get_act_patch_attn_head_out_all_pos(self.model, self.corrupt, clean_cache, restored).numpy()

    def direct_logit_attribution(self) -> np.ndarray:
        with torch.inference_mode():
            _, cache = self.model.run_with_cache(self.clean)
            stack = cache.stack_head_results(layer=-1, pos_slice=-1)  # (layers × heads, batch, d_model)
            scaled = cache.apply_ln_to_stack(stack, layer=-1, pos_slice=-1)
            direction = self.model.W_U[:, self.answer] - self.model.W_U[:, self.wrong]
            return (scaled[:, 0] @ direction).reshape(self.model.cfg.n_layers, self.model.cfg.n_heads).numpy()

    def gap(self) -> float:
        with torch.inference_mode():
            return float(self.logit_diff(self.model(self.clean)) - self.logit_diff(self.model(self.corrupt)))

    def attribution_patching(self) -> np.ndarray:
        """Node scores summed over positions per head (not yet divided by the gap)."""
        from transformer_lens.tools.analysis import attribution_patch as tl_attribution_patch

        result = tl_attribution_patch(self.model, self.clean, self.corrupt, self.logit_diff)
        out = np.zeros((self.model.cfg.n_layers, self.model.cfg.n_heads))
        for node, score in result.node_scores.items():
            if node.kind == "attn_head_out":
                out[node.layer, node.head] += score
        return out


def load_averages() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.versus_transformer_lens",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--vocab", type=int, default=50257, help="vocabulary size (GPT-2's by default)")
    parser.add_argument("--reps", type=int, default=3, help="timed calls per contender and task")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--doc", metavar="PATH", help="write the table into this page's TransformerLens section")
    args = parser.parse_args(argv)
    try:
        tl_version = version("transformer-lens")
    except Exception:
        raise SystemExit("TransformerLens is not installed in this environment: run `make bench-tl`, which builds "
                         ".venv-tl with it beside the project's .venv")
    torch.set_num_threads(args.threads)
    started, before = time.strftime("%Y-%m-%dT%H:%M:%S"), load_averages()
    command = " ".join(["python -m benchmarks.versus_transformer_lens", *(sys.argv[1:] if argv is None else argv)])
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        save_model(folder, args.vocab)
        backend = load_backend(f"hf:{folder}", device="cpu", dtype="float32")
        hf = GPT2LMHeadModel.from_pretrained(folder).eval()
    clean_text, corrupt_text = texts(args.vocab, args.tokens)
    clean, corrupt = (torch.tensor([backend.tokenize(t)[0].ids]) for t in (clean_text, corrupt_text))
    answer, wrong = answer_words(hf, clean, corrupt)
    tl = TransformerLensRuns(hooked_transformer(hf), clean, corrupt, answer, wrong)
    del hf
    inputs = (clean_text, corrupt_text, f"w{answer}", f"w{wrong}")

    tasks = {
        "activation patching, every head (restored fraction)": (
            lambda: patch(backend, *inputs, "heads"), tl.activation_patching,
            lambda ours: ours.restored, lambda theirs: theirs),
        "direct logit attribution per head (logits)": (
            lambda: attribute(backend, clean_text, *inputs[2:]), tl.direct_logit_attribution,
            lambda ours: ours.heads, lambda theirs: theirs),
        "attribution patching, every head (estimated restored fraction)": (
            lambda: attribution_patch(backend, *inputs, "heads"), tl.attribution_patching,
            lambda ours: ours.restored, lambda theirs: theirs / tl.gap()),
    }
    rows, gap = [], None
    for task, (ours_call, tl_call, ours_values, tl_values) in tasks.items():
        result = ours_call()
        gap = result.clean - result.corrupt if gap is None else gap  # activation patching measured both runs
        ours, theirs = ours_values(result), tl_values(tl_call())
        difference, largest = float(np.max(np.abs(ours - theirs))), float(np.max(np.abs(ours)))
        times = in_passes({"ours": ours_call, "TransformerLens": tl_call}, reps=args.reps,
                          rounds=min(2, args.reps), warmup=1)
        rows.append((task, min(times["ours"]), min(times["TransformerLens"]), difference, largest))
        print(f"{task}: ours {rows[-1][1]:.3f} s, TransformerLens {rows[-1][2]:.3f} s, max |difference| "
              f"{difference:.2g} (largest |value| {largest:.3g})", flush=True)

    header = (f"`{command}` — {started}, {platform.machine()}, {os.cpu_count()} cores, "
              f"{args.threads} thread(s) for both; load average (1, 5, 15 min) {before} before the run, "
              f"{load_averages()} after; torch {torch.__version__}, transformers {version('transformers')}, "
              f"transformer-lens {tl_version}. GPT-2-small shape (12 layers × 12 heads, d_model 768, vocabulary "
              f"{args.vocab}), seeded random weights, {args.tokens} tokens, the corrupt text's first half "
              f"replaced; metric logit({inputs[2]}) − logit({inputs[3]}) at the last position, clean − corrupt "
              f"gap {gap:.4g}. Each cell: the fastest of {args.reps} calls after a warm-up, each contender in "
              "passes of its own; ratio = TransformerLens s / ours s.")
    table = ["| task | ours s | TransformerLens s | ratio | max \\|difference\\| | largest \\|value\\| |",
             "|---|---|---|---|---|---|"]
    table += [f"| {task} | {ours:.3f} | {theirs:.3f} | {theirs / ours:.1f} × | {diff:.2g} | {largest:.3g} |"
              for task, ours, theirs, diff, largest in rows]
    text = "\n".join([header, "", *table])
    print(text)
    if args.doc:
        page = Path(args.doc)
        old = page.read_text(encoding="utf-8") if page.exists() else ""
        page.write_text(with_section(old, TRANSFORMER_LENS_HEADING, INTRO + "\n" + text), encoding="utf-8")
    return 0


INTRO = """<!-- Written by `make bench-tl` (python -m benchmarks.versus_transformer_lens --doc docs/performance.md
in .venv-tl). Do not edit by hand: run it again. -->

The same GPT-2-small-shaped weights opened by ours (an `hf:` folder, our decoder) and by TransformerLens
(a `HookedTransformer`: fold_ln, center_writing_weights and center_unembed on, fold_value_biases off, so
every compared number means the same in both). *max |difference|* compares the 144 heads' values
(restored fractions for the two patchings, logits for direct logit attribution); *largest |value|* is
ours, for scale. TransformerLens' activation patching runs one whole forward per head and computes
every position's logits; its attribution patching scores every head at every position (its node
graph), summed here per head.
"""


if __name__ == "__main__":
    sys.exit(main())
