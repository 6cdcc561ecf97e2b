"""Long inputs on a tiny 2-layer rotary model (untrained, seeded: this measures cost, not meaning):
the forward that keeps each layer's rotated queries and keys, one head's overview (normalizers plus
max- and mean-pooled tiles in one pass), a zoom step, and what the browser would receive.

``python -m benchmarks.long --tokens 8192 32768`` runs each length in a fresh process and prints one
JSON line per length: seconds per step, payload bytes, peak RSS (VmHWM) of that process.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TILES = 512  # screen resolution of one heatmap
ZOOM = 2048  # tokens each way of the zoomed region


def _peak_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def measure(tokens: int) -> dict:
    import torch

    from attention_viz.analysis.blockwise import overview, pooled_region, quantize
    from attention_viz.longcontext import queries_and_keys
    from attention_viz.model import Transformer, TransformerConfig

    torch.manual_seed(0)
    config = TransformerConfig(
        shape="decoder-only", vocab_size=1000, d_model=64, h=4, n_kv_heads=2, d_ff=128, N=2, max_len=tokens,
        positional="rotary", norm="pre", norm_type="rms", activation="silu", gated_ffn=True, dropout=0.0,
        scale_embeddings=False, qkv_bias=False, out_bias=False, ffn_bias=False, generator_bias=False,
    )  # fmt: skip
    model = Transformer(config).eval()
    ids = torch.randint(0, 1000, (1, tokens))
    start = time.perf_counter()
    kept = queries_and_keys(model, ids)
    forward = time.perf_counter() - start
    q, k = kept.head(1, 0)
    start = time.perf_counter()
    view = overview(q, k, tiles=TILES)
    head_view = time.perf_counter() - start
    payload = quantize(view.max, "max").codes.nbytes
    start = time.perf_counter()
    rows = range(tokens - ZOOM, tokens)
    zoomed, _, _ = pooled_region(q, k, view.lse, rows, range(tokens - ZOOM, tokens), tiles=TILES)
    zoom = time.perf_counter() - start
    return {
        "tokens": tokens,
        "forward_s": round(forward, 2),
        "head_overview_s": round(head_view, 2),
        "zoom_step_s": round(zoom, 2),
        "grid_estimate_s": round(head_view * config.N * config.h, 1),  # every head's thumbnail, same way
        "head_view_bytes": payload,
        "zoom_bytes": quantize(zoomed, "max").codes.nbytes,
        "peak_rss_mb": round(_peak_rss_mb()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, nargs="+", default=[8192, 32768])
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # the child process
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.one)))
        return
    for tokens in args.tokens:
        done = subprocess.run(
            [sys.executable, "-m", "benchmarks.long", "--one", str(tokens)], cwd=ROOT, capture_output=True, text=True
        )
        print(done.stdout.strip() or done.stderr.strip().splitlines()[-1], flush=True)


if __name__ == "__main__":
    main()
