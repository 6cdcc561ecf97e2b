"""Long inputs on a tiny 2-layer rotary model (untrained, seeded: this measures cost, not meaning):
the forward that keeps each layer's rotated queries and keys, one head's overview (normalizers plus
max- and mean-pooled tiles in one pass), a zoom step, and what the browser would receive.

``python -m benchmarks.long --tokens 8192 32768`` runs each length in a fresh process and prints one
JSON line per length: seconds per step, payload bytes, peak RSS (VmHWM) of that process.

``--app`` measures the app itself instead (headless, Streamlit's AppTest, as a server runs it): the
same tiny model saved as an ``hf:`` Llama folder with a one-letter-word tokenizer (so 8k tokens fit
the sentence box's 20,000 characters), the head view opened on the long text, then a new text
(Enter → heatmap) and a zoom step; bytes are those of the figure's JSON the page sends.
"""

from __future__ import annotations

import argparse
import json
import os
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


def save_tiny_llama(folder: Path, tokens: int) -> list[str]:
    """The benchmark's model as a transformers Llama checkpoint with a word-level tokenizer; its words."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    words = list("abcdefghijklmnopqrstuvwxyz")
    vocab = {token: i for i, token in enumerate(["<unk>", "<s>", "</s>", *words])}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>",
                            unk_token="<unk>").save_pretrained(folder)
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(vocab), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=tokens)
    LlamaForCausalLM(config).save_pretrained(folder)
    return words


def measure_app(tokens: int) -> dict:
    import random
    import tempfile

    from streamlit.testing.v1 import AppTest

    with tempfile.TemporaryDirectory() as root:
        folder = Path(root) / "tiny-llama"
        words = save_tiny_llama(folder, tokens)
        os.environ["ATTENTION_VIZ_MODEL_ROOTS"] = root
        rng = random.Random(0)

        def text() -> str:  # <s> + tokens − 1 one-letter words
            return " ".join(rng.choice(words) for _ in range(tokens - 1))

        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=600)
        at.query_params.update(view="head", model=f"hf:{folder}", text=text())
        start = time.perf_counter()
        at.run()
        cold = time.perf_counter() - start
        at.text_area(key="text").set_value(text())  # a new text: Enter
        start = time.perf_counter()
        at.run()
        enter = time.perf_counter() - start
        overview_bytes = [len(chart.proto.spec.encode()) for chart in at.get("plotly_chart")]
        errors = [e.value for e in at.exception] + [e.value for e in at.error]
        at.slider(key="head_long_q0").set_value(tokens - ZOOM)
        at.slider(key="head_long_k0").set_value(tokens - ZOOM)
        start = time.perf_counter()
        at.run()
        zoom = time.perf_counter() - start
        zoom_bytes = [len(chart.proto.spec.encode()) for chart in at.get("plotly_chart")]
        at.slider(key="head_long_q0").set_value(tokens - 512)
        at.slider(key="head_long_k0").set_value(tokens - 512)
        start = time.perf_counter()
        at.run()
        exact = time.perf_counter() - start
        exact_bytes = [len(chart.proto.spec.encode()) for chart in at.get("plotly_chart")]
        at.radio(key="nav_explore").set_value("grid")  # every head's pass: the thumbnails of the all-heads grid
        start = time.perf_counter()
        at.run()
        grid = time.perf_counter() - start
        grid_bytes = [len(chart.proto.spec.encode()) for chart in at.get("plotly_chart")]
        errors += [e.value for e in at.exception] + [e.value for e in at.error]
    return {
        "tokens": tokens,
        "app_cold_s": round(cold, 2),  # model load + the ordinary run (first 1024 tokens) + the long read + one head
        "enter_to_heatmap_s": round(enter, 2),
        "zoom_step_s": round(zoom, 2),  # the last 2048 × 2048, pooled
        "exact_cells_s": round(exact, 2),  # the last 512 × 512, exact
        "head_view_bytes": overview_bytes,
        "zoom_bytes": zoom_bytes,
        "exact_bytes": exact_bytes,
        "grid_s": round(grid, 2),  # the heads not yet passed over, then the grid and one head enlarged
        "grid_bytes": grid_bytes,
        "errors": errors,
        "peak_rss_mb": round(_peak_rss_mb()),
    }


def measure_browser(tokens: int) -> dict:
    """The same head view served by ``make run`` and opened in headless Chromium (tests/browser.py):
    seconds from opening the link to the heatmap, and bytes the browser received over the websocket."""
    import random
    import tempfile
    import urllib.parse

    sys.path.insert(0, str(ROOT / "tests"))
    from browser import chromium, served_app, wait_for_heatmap

    with tempfile.TemporaryDirectory() as root:
        folder = Path(root) / "tiny-llama"
        words = save_tiny_llama(folder, tokens)
        os.environ["ATTENTION_VIZ_MODEL_ROOTS"] = root
        rng = random.Random(1)
        received: list[int] = []
        with chromium() as browser, served_app() as url:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.on("websocket", lambda ws: ws.on("framereceived", lambda frame: received.append(len(frame))))
            seconds = []
            for _ in range(2):  # the first opening loads the model; the second is a warm server
                received.clear()
                text = " ".join(rng.choice(words) for _ in range(tokens - 1))
                query = urllib.parse.urlencode({"view": "head", "model": f"hf:{folder}", "text": text})
                start = time.perf_counter()
                page.goto(f"{url}/?{query}")
                wait_for_heatmap(page, title=f"queries 0–{tokens - 1}", timeout=600_000)
                seconds.append(round(time.perf_counter() - start, 2))
    return {"tokens": tokens, "browser_link_to_heatmap_s": seconds, "websocket_bytes": sum(received)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, nargs="+", default=[8192, 32768])
    parser.add_argument("--app", action="store_true", help="measure the app's head view (headless)")
    parser.add_argument("--browser", action="store_true", help="measure the served head view in Chromium")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # the child process
    args = parser.parse_args()
    if args.one:
        print(json.dumps((measure_browser if args.browser else measure_app if args.app else measure)(args.one)))
        return
    for tokens in args.tokens:
        done = subprocess.run(
            [sys.executable, "-m", "benchmarks.long", "--one", str(tokens), *(["--app"] if args.app else []),
             *(["--browser"] if args.browser else [])],
            cwd=ROOT, capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"},
        )
        print(done.stdout.strip() or done.stderr.strip().splitlines()[-1], flush=True)


if __name__ == "__main__":
    main()
