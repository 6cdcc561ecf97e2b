"""Per-head importance of ``toy-translate`` (Michel et al. 2019, "Are sixteen heads really better
than one?"): remove one head at a time (zero ablation) and measure, on held-out pairs, the drop in
greedy exact match and in alignment accuracy. Too slow to run live (every head re-translates the
sample), so it is precomputed and shipped next to the model card:

    python -m attention_viz.cards.head_importance [--sample 300]

Alignment accuracy is that of the cross-attention head that aligns best without any ablation
(content words, argmax vs gold, as in evaluate.py), so every row measures the same thing.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

from ..analysis.ablation import Ablation, all_heads, format_head
from ..backends.ours import ablation_context
from ..core.names import CROSS, DECODER_SELF, ENCODER_SELF
from ..trained import checkpoint
from ..trained.evaluate import alignment_accuracy, exact_match, held_out_pairs

NAME = "toy-translate"
OUT = checkpoint.MODELS_DIR / f"{NAME}-head-importance.json"


def measure(dm, pairs, best: tuple[int, int], ablation: Ablation | None) -> dict:
    with ablation_context(dm.model, ablation):
        em = exact_match(dm, pairs)["overall"]
        alignment = alignment_accuracy(dm, pairs)["content"]["heads"][best[0]][best[1]]
    return {"exact_match": round(em, 4), "alignment": round(alignment, 4)}


def head_importance(sample: int, log=print) -> dict:
    dm = checkpoint.load(checkpoint.MODELS_DIR / NAME)
    pairs = held_out_pairs(sample)
    start = time.perf_counter()
    heads_table = alignment_accuracy(dm, pairs)["content"]["heads"]
    best = max(((i, k) for i in range(len(heads_table)) for k in range(len(heads_table[0]))),
               key=lambda ik: heads_table[ik[0]][ik[1]])
    baseline = measure(dm, pairs, best, None)
    log(f"baseline {baseline}; alignment measured on cross {best[0]}.{best[1]}")
    config = dm.model.config
    rows = []
    for group, layers in ((ENCODER_SELF, config.N), (DECODER_SELF, config.decoder_layers), (CROSS, config.decoder_layers)):
        for head in all_heads(layers, config.h, group):
            scores = measure(dm, pairs, best, Ablation((head,)))
            rows.append({"head": format_head(head), **scores,
                         "exact_match_drop": round(baseline["exact_match"] - scores["exact_match"], 4),
                         "alignment_drop": round(baseline["alignment"] - scores["alignment"], 4)})
            log(f"{rows[-1]}")
    return {
        "model": NAME,
        "command": "python -m attention_viz.cards.head_importance" + (f" --sample {sample}" if sample != 300 else ""),
        "held_out_pairs": len(pairs),
        "ablation": "zero, one head at a time",
        "alignment_head": f"cross {best[0]}.{best[1]}",
        "baseline": baseline,
        "heads": rows,
        "seconds": round(time.perf_counter() - start, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m attention_viz.cards.head_importance", description=__doc__.split("\n")[0])
    parser.add_argument("--sample", type=int, default=300, help="held-out pairs (default 300)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    result = head_importance(args.sample, log=lambda m: print(m, flush=True))
    args.out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
