"""Long inputs on a tiny 2-layer rotary model (untrained, seeded: this measures cost, not meaning):
the forward that keeps each layer's rotated queries and keys (and the normalizers its fused attention
returns), what the head view's landing needs of it (``landing``: layer 0's q/k and one head's pass of
the fused kernel, since layers run as views ask), one head's max-pooled overview from those
normalizers, the full pass (normalizers plus max- and mean-pooled tiles: mean pooling, or the last
layer), a zoom step, exact cells, and every head's overview (the all-heads grid), with what the
browser would receive.

``python -m benchmarks.long --tokens 8192 32768`` runs each length in a fresh process and prints one
JSON line per length: wall seconds per step (``*_s``), CPU seconds of the process's threads
(``*_cpu_s``: on a shared machine the wall clock also counts other people's work), payload bytes,
peak RSS (VmHWM) of that process. ``--window W`` gives every layer of the model a sliding window of
W positions (Mistral): the forward and every pass then compute each query's band of keys only.

``--app`` measures the app itself instead (headless, Streamlit's AppTest, as a server runs it): the
same tiny model saved as an ``hf:`` Llama folder with a one-letter-word tokenizer, the head view
opened, then the long text given as users give it, as a .txt file in the sidebar's uploader (the
sentence box holds 20,000 characters): a first text, then a new one (upload → heatmap), a zoom step,
exact cells and the all-heads grid; bytes are those of the figures' JSON the page sends.

``--browser`` serves the app (``make run``) and does the same in headless Chromium: the file set on
the sidebar's file input, seconds until the heatmap of the whole text is drawn, the CPU seconds the
server and Chromium used meanwhile (on the same cores here), and bytes the browser received over
the websocket.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TILES = 512  # screen resolution of one heatmap
ZOOM = 2048  # tokens each way of the zoomed region


def _peak_rss_mb(pid: int | str = "self") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class Clock:
    """Wall and CPU seconds (every thread of this process) of each step, into ``figures``."""

    def __init__(self) -> None:
        self.figures: dict[str, float] = {}

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        cpu, wall = _cpu_s(), time.perf_counter()
        yield
        self.figures[f"{name}_s"] = round(time.perf_counter() - wall, 2)
        self.figures[f"{name}_cpu_s"] = round(_cpu_s() - cpu, 2)


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def measure(tokens: int, window: int | None = None) -> dict:
    import torch

    from attention_viz.analysis.blockwise import overview, pattern_block, pooled_region, quantize
    from attention_viz.core.longcontext import queries_and_keys
    from attention_viz.core.model import Transformer, TransformerConfig

    torch.manual_seed(0)
    config = TransformerConfig(
        shape="decoder-only", vocab_size=1000, d_model=64, h=4, n_kv_heads=2, d_ff=128, N=2, max_len=tokens,
        positional="rotary", norm="pre", norm_type="rms", activation="silu", gated_ffn=True, dropout=0.0,
        scale_embeddings=False, qkv_bias=False, out_bias=False, ffn_bias=False, generator_bias=False,
        sliding_window=window,
    )  # fmt: skip
    model = Transformer(config).eval()
    ids = torch.randint(0, 1000, (1, tokens))
    clock = Clock()
    with clock.step("forward"):  # every layer: layer 0 whole (its heads in one call), the last one's q/k
        kept = queries_and_keys(model, ids)
        kept.layer(config.N - 1)
    with clock.step("landing"):  # a fresh input as the head view opens it: layer 0's q/k, head 0's kernel pass
        queries_and_keys(model, ids).normalizers(0, 0)
    q, k = kept.head(0, 0)  # the head view's first head
    first, final = kept.window[0], kept.window[-1]  # None: the whole causal past
    with clock.step("head_overview"):  # max tiles, the head's normalizers from the forward's kernel: no exp
        view = overview(q, k, tiles=TILES, lse=kept.normalizers(0, 0), window=first)
    with clock.step("head_overview_full"):  # the full pass: mean tiles, or a head of the last layer
        overview(*kept.head(config.N - 1, 0), tiles=TILES, window=final)
    last = range(tokens - ZOOM, tokens)
    with clock.step("zoom_step"):
        zoomed, _, _ = pooled_region(q, k, view.lse, last, last, tiles=TILES, window=first)
    with clock.step("exact_cells"):  # the last 512 × 512, their rows' normalizers recomputed in float64
        pattern_block(q, k, range(tokens - TILES, tokens), range(tokens - TILES, tokens), window=first)
    with clock.step("grid"):  # every head's max overview, as the all-heads grid makes them
        for layer, window in enumerate(kept.window):
            lse = kept.normalizers(layer)  # the last layer's: every head's kernel pass, here
            for head in range(config.h):
                overview(*kept.head(layer, head), tiles=TILES, lse=lse[head], window=window)
    return {
        "tokens": tokens,
        "window": window,
        "torch_threads": torch.get_num_threads(),
        **clock.figures,
        "head_view_bytes": quantize(view.max, "max").codes.nbytes,
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


def _texts(words: list[str], tokens: int, seed: int) -> tuple[bytes, bytes]:
    """Two different texts as file contents: <s> + tokens − 2 words (the first), <s> + tokens − 1 (the
    second, the model's longest input; its heatmap's title differs, so a browser can tell them apart)."""
    rng = random.Random(seed)
    return tuple(" ".join(rng.choice(words) for _ in range(n)).encode() for n in (tokens - 2, tokens - 1))


def measure_app(tokens: int) -> dict:
    from streamlit.testing.v1 import AppTest

    clock = Clock()
    with tempfile.TemporaryDirectory() as root:
        folder = Path(root) / "tiny-llama"
        words = save_tiny_llama(folder, tokens)
        os.environ["ATTENTION_VIZ_MODEL_ROOTS"] = root
        first, second = _texts(words, tokens, 0)

        def sent() -> list[int]:  # Plotly figures, and our levels element (its bytes, script and style)
            return [len(chart.proto.spec.encode()) for chart in at.get("plotly_chart")] + [
                len(e.proto.bytes) + len(e.proto.js_content) + len(e.proto.css_content) for e in at.get("bidi_component")]

        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=600)
        at.query_params.update(view="head", model=f"hf:{folder}")
        with clock.step("app_cold"):  # the model's load and the box's default sentence
            at.run()
        at.file_uploader(key="text_file").set_value(("first.txt", first, "text/plain"))
        with clock.step("first_long"):  # the first long text: the ordinary run, the long read, one head
            at.run()
        at.file_uploader(key="text_file").set_value(("second.txt", second, "text/plain"))
        with clock.step("enter_to_heatmap"):  # a new long text on a warm server
            at.run()
        head_bytes = sent()
        errors = [e.value for e in at.exception] + [e.value for e in at.error]
        at.slider(key="head_long_q0").set_value(tokens - ZOOM)
        at.slider(key="head_long_k0").set_value(tokens - ZOOM)
        with clock.step("zoom_step"):  # the last 2048 × 2048, pooled
            at.run()
        zoom_bytes = sent()
        at.slider(key="head_long_q0").set_value(tokens - TILES)
        at.slider(key="head_long_k0").set_value(tokens - TILES)
        with clock.step("exact_cells"):  # the last 512 × 512, exact
            at.run()
        exact_bytes = sent()
        at.radio(key="nav_explore").set_value("grid")
        with clock.step("grid"):  # the heads not yet passed over, then the grid and one head enlarged
            at.run()
        grid_bytes = sent()
        errors += [e.value for e in at.exception] + [e.value for e in at.error]
    return {
        "tokens": tokens,
        **clock.figures,
        "head_view_bytes": head_bytes,
        "zoom_bytes": zoom_bytes,
        "exact_bytes": exact_bytes,
        "grid_bytes": grid_bytes,
        "errors": errors,
        "peak_rss_mb": round(_peak_rss_mb()),
    }


def measure_browser(tokens: int) -> dict:
    """The head view served by ``make run`` in headless Chromium (tests/browser.py), the texts given as
    files on the sidebar's uploader: seconds from setting the file to the heatmap of the whole text, the
    server's CPU seconds meanwhile, bytes the browser received over the websocket meanwhile; the
    server's peak RSS at the end."""
    sys.path.insert(0, str(ROOT / "tests"))
    from browser import chromium, new_page, served_app, wait_for_heatmap

    with tempfile.TemporaryDirectory() as root:
        folder = Path(root) / "tiny-llama"
        words = save_tiny_llama(folder, tokens)
        os.environ["ATTENTION_VIZ_MODEL_ROOTS"] = root
        received: list[int] = []
        seconds, server_cpu, browser_cpu, sent = [], [], [], []
        with chromium() as browser, served_app() as url:
            server = _server(url)
            page = new_page(browser)
            page.on("websocket", lambda ws: ws.on("framereceived", lambda frame: received.append(len(frame))))
            page.goto(f"{url}/?{urllib.parse.urlencode({'view': 'head', 'model': f'hf:{folder}'})}")
            wait_for_heatmap(page, timeout=600_000)  # the box's sentence, the model loaded
            chooser = page.locator("[data-testid='stSidebar'] input[type=file]")
            for name, data in zip(("first.txt", "second.txt"), _texts(words, tokens, 1)):  # the first: a cold read
                received.clear()
                start, cpu, others = time.perf_counter(), _process_cpu_s(server), _children_cpu_s(server)
                chooser.set_input_files({"name": name, "mimeType": "text/plain", "buffer": data})
                wait_for_heatmap(page, title=f"queries 0–{len(data.split())}", timeout=600_000)
                seconds.append(round(time.perf_counter() - start, 2))
                server_cpu.append(round(_process_cpu_s(server) - cpu, 2))
                browser_cpu.append(round(_children_cpu_s(server) - others, 2))
                sent.append(sum(received))
            server_rss = _peak_rss_mb(server)
    return {"tokens": tokens, "upload_to_heatmap_s": seconds, "server_cpu_s": server_cpu,
            "browser_cpu_s": browser_cpu, "websocket_bytes": sent, "server_peak_rss_mb": round(server_rss)}


def _server(url: str) -> int:
    """The pid of the Streamlit server listening on ``url``'s port."""
    port = str(urllib.parse.urlsplit(url).port)
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if any(b"streamlit" in arg for arg in args) and port.encode() in args:
            return int(cmdline.parent.name)
    raise RuntimeError(f"no Streamlit server on port {port}")


def _children_cpu_s(server: int) -> float:
    """CPU seconds of this process's descendants but the server: Chromium and Playwright's driver
    (on the same two cores as the server, so what they use the server waits for)."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError):
            continue

    def descends(pid: int) -> bool:
        while pid > 1:
            if pid == server:
                return False
            if pid == os.getpid():
                return True
            pid = parents.get(pid, 0)
        return False

    total = 0.0
    for pid in parents:
        if pid != os.getpid() and descends(pid):
            try:
                total += _process_cpu_s(pid)
            except OSError:
                continue
    return total


def _process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of ``pid``, every thread (/proc/PID/stat, fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, nargs="+", default=[8192, 32768])
    parser.add_argument("--app", action="store_true", help="measure the app's head view (headless)")
    parser.add_argument("--browser", action="store_true", help="measure the served head view in Chromium")
    parser.add_argument("--window", type=int, help="a sliding window of this many positions on every layer "
                        "(the model's own passes; not with --app or --browser)")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # the child process
    args = parser.parse_args()
    if args.window and (args.app or args.browser):
        parser.error("--window measures the model's own passes, not the app")
    if args.one:
        print(json.dumps(measure_browser(args.one) if args.browser else measure_app(args.one) if args.app
                         else measure(args.one, args.window)))  # fmt: skip
        return
    for tokens in args.tokens:
        done = subprocess.run(
            [sys.executable, "-m", "benchmarks.long", "--one", str(tokens), *(["--app"] if args.app else []),
             *(["--browser"] if args.browser else []), *(["--window", str(args.window)] if args.window else [])],
            cwd=ROOT, capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"},
        )
        print(done.stdout.strip() or done.stderr.strip().splitlines()[-1], flush=True)


if __name__ == "__main__":
    main()
