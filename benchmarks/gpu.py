"""Real model shapes on one GPU (issue 33), measured side by side: ``python -m benchmarks.gpu``.

    python -m benchmarks.gpu --shape llama-8b --tokens 8192 32768 131072 --doc docs/performance.md
    python -m benchmarks.gpu --shape gpt2-small --device cpu --tokens 1024 2048 4096 --every-head-up-to 0
    python -m benchmarks.gpu --shape tiny --device cpu --tokens 64 200 --out rows.json   # the CPU smoke test

The weights are random, seeded, of a real model's shape (Llama-3.2-1B, Llama-3.1-8B, a Llama of
GPT-2-small's size for the CPU's full-capture floor, or a tiny one):
drawn tensor by tensor on the device and in the dtype as our loader reads them, so no float32 copy of
the model ever sits in host memory. This measures cost, not meaning. The two Llama shapes carry their
checkpoints' whole configuration, rotary included (θ = 500000 with the llama3 rescaling of the
frequencies); the GPT-2-sized and tiny ones have the unscaled rotary at θ = 500000.
transformers' LlamaModel reads the very same tensors (shared: one copy of the weights on the device).

Rows, at each token count, each with wall seconds (the device synchronized, after a warm-up: the median
of a few calls when a call is cheap, else one; a warm-up past EXPENSIVE is the one call) and peak memory (CUDA: the allocator's
``max_memory_allocated``, weights included; the CPU: growth of the process's peak RSS):

* ours: landing heatmap — what the head view does with a long text (ui/views/long_head.py): the
  backend's ``long_input`` (the forward up to the landing layer's q/k), the landing head's 512 × 512
  overview, and the heatmap the page draws from it;
* ours: another head — a second head of that layer, once the landing has run;
* ours: one layer's grid — every head's overview of the landing layer, once the landing has run;
* ours: every head — what the all-heads grid does (ui/views/long_grid.py): every layer run, every
  head's overview and the thumbnails, once the landing has run;
* ours: full capture — the ordinary capture of every pattern as ``run`` does it after tokenizing (the
  forward with the hooks, then the result's float32 arrays on the host), where the memory plan says
  it fits, else the plan's one-line refusal; each call's patterns land in memory new to the process
  (on the VMs we measure on, mapping it costs most of what the capture adds to the forward);
* ours: full capture, memory recycled — the same, writing into the blocks the previous call freed
  (runtime/memory.py): the capture's own cost (the CPU only: CUDA's allocator recycles anyway);
* transformers: eager + output_attentions (or "out of memory"), and the SDPA forward, the floor.

Ours run first; then everything of ours but the weights is freed and transformers runs, each baseline
in its own pass, in the same state as ours. Both run the decoder stack without the LM head: neither
the long path nor a capture scores the next token.
"""

from __future__ import annotations

import argparse
import copy
import datetime
import gc
import json
import statistics
import sys
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from itertools import chain
from pathlib import Path

from attention_viz.runtime.settings import apply_process_settings

apply_process_settings()  # before torch loads: the server's settings

import numpy as np  # noqa: E402
import torch  # noqa: E402

from attention_viz.analysis.blockwise import Overview  # noqa: E402
from attention_viz.analysis.long_input import TILES, LongInput, LongHeatmap, long_heatmap, thumbnails  # noqa: E402
from attention_viz.backends.ours_decoder import OursDecoderBackend  # noqa: E402
from attention_viz.core.hooks import capture  # noqa: E402
from attention_viz.core.model import Transformer  # noqa: E402
from attention_viz.core.result import AttentionResult  # noqa: E402
from attention_viz.errors import ModelError  # noqa: E402
from attention_viz.inputs.tokens import Tokens  # noqa: E402
from attention_viz.runtime.device import Placement, resolve  # noqa: E402
from attention_viz.runtime import memory  # noqa: E402
from attention_viz.runtime.memory_plan import capture_bytes, check_capture, weight_bytes  # noqa: E402
from attention_viz.weights.llama import HEAD, build_llama, checkpoint_names  # noqa: E402
from attention_viz.weights.loading import DrawNothing  # noqa: E402

from .performance_doc import with_gpu_table  # noqa: E402

GB = 1e9
# Llama 3.1's and 3.2's rotary as their config.json files say it: θ base 500000, the llama3 rescaling
# of the frequencies past a pretraining length of 8192 (the factor differs: 8 for 3.1, 32 for 3.2)
LLAMA3_ROPE = {"rope_type": "llama3", "rope_theta": 500000.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 8192}  # fmt: skip
SHAPES = {
    "llama-1b": {"num_hidden_layers": 16, "hidden_size": 2048, "num_attention_heads": 32, "num_key_value_heads": 8,
                 "intermediate_size": 8192, "vocab_size": 128256, "tie_word_embeddings": True,
                 "rope_parameters": {**LLAMA3_ROPE, "factor": 32.0}},  # Llama-3.2-1B
    "llama-8b": {"num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
                 "intermediate_size": 14336, "vocab_size": 128256, "tie_word_embeddings": False,
                 "rope_parameters": {**LLAMA3_ROPE, "factor": 8.0}},  # Llama-3.1-8B
    "gpt2-small": {"num_hidden_layers": 12, "hidden_size": 768, "num_attention_heads": 12, "num_key_value_heads": 12,
                   "intermediate_size": 3072, "vocab_size": 50257, "tie_word_embeddings": True},  # GPT-2 small's sizes
    "tiny": {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
             "intermediate_size": 128, "vocab_size": 1000, "tie_word_embeddings": False},  # the CPU smoke test
}  # fmt: skip
MAX_POSITIONS = 131072  # Llama 3.1's and 3.2's longest input
STD = 0.02  # transformers' initializer_range for Llama
FULL_CAPTURE_UP_TO = 4096  # tokens up to which a full capture should cost at most 1.2× the SDPA forward
LANDING = (0, 0)  # the head view opens on layer 0, head 0 (ui/controls.layer_head_choice's defaults)
THUMB = 40  # the all-heads grid's thumbnail side (figures/grid.py's, not imported: that module loads Plotly)
CHEAP = 2.0  # seconds: a longer call is measured once after its warm-up, not REPEATS times
EXPENSIVE = 20.0  # seconds: a longer warm-up is the one measurement, so the large shapes fit in minutes
REPEATS = 3
PEAKS = {False: "peak device memory (the CUDA allocator's, weights included)",
         True: "the growth of the process's peak RSS"}  # keyed by: ran on the CPU
ROWS = ("ours: landing heatmap", "ours: another head", "ours: one layer's grid", "ours: every head",
        "ours: full capture", "ours: full capture, memory recycled", "transformers: eager + output_attentions",
        "transformers: SDPA forward (floor)")
FULL, RECYCLED, EAGER, SDPA = ROWS[4:]


def hf_config(shape: str) -> dict:
    """A Llama ``config.json`` of the shape, as our loader reads it (a fresh copy: transformers' config
    fills in its rope parameters in place)."""
    return copy.deepcopy({"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_act": "silu",
                          "rms_norm_eps": 1e-5, "max_position_embeddings": MAX_POSITIONS,
                          "rope_parameters": {"rope_type": "default", "rope_theta": 500000.0}, **SHAPES[shape]})  # fmt: skip


def llama_shapes(hf: dict) -> dict[str, tuple[int, ...]]:
    """Every tensor of a LlamaForCausalLM checkpoint of ``hf``'s shape, by its name."""
    d, ff, vocab = hf["hidden_size"], hf["intermediate_size"], hf["vocab_size"]
    kv = hf["num_key_value_heads"] * (d // hf["num_attention_heads"])
    shapes = {"model.embed_tokens.weight": (vocab, d), "model.norm.weight": (d,)}
    if not hf["tie_word_embeddings"]:
        shapes[HEAD] = (vocab, d)
    for i in range(hf["num_hidden_layers"]):
        layer = f"model.layers.{i}."
        shapes |= {f"{layer}self_attn.q_proj.weight": (d, d), f"{layer}self_attn.k_proj.weight": (kv, d),
                   f"{layer}self_attn.v_proj.weight": (kv, d), f"{layer}self_attn.o_proj.weight": (d, d),
                   f"{layer}mlp.gate_proj.weight": (ff, d), f"{layer}mlp.up_proj.weight": (ff, d),
                   f"{layer}mlp.down_proj.weight": (d, ff), f"{layer}input_layernorm.weight": (d,),
                   f"{layer}post_attention_layernorm.weight": (d,)}  # fmt: skip
    return shapes


class SeededWeights:
    """A Llama checkpoint of random weights behind the loader's Checkpoint interface: each tensor is
    drawn when the loader reads it, on the device and in the dtype, from a seed made of its name (the
    same weights in whatever order they are read); RMSNorm gains are 1."""

    def __init__(self, hf: dict, seed: int, dtype: torch.dtype) -> None:
        self.shapes = llama_shapes(hf)
        self.seed, self.dtype = seed, dtype

    def read(self, names: Iterable[str], device: str | torch.device) -> Iterator[tuple[str, torch.Tensor]]:
        for name in names:
            shape = self.shapes[name]
            if name.endswith("norm.weight"):
                yield name, torch.ones(shape, device=device, dtype=self.dtype)
                continue
            generator = torch.Generator(device=device).manual_seed(zlib.crc32(f"{self.seed}:{name}".encode()))
            yield name, torch.randn(shape, generator=generator, device=device, dtype=self.dtype).mul_(STD)


def transformers_model(hf: dict, ours: Transformer, device: torch.device) -> torch.nn.Module:
    """transformers' LlamaModel holding our model's tensors (shared, not copied): built on meta, the
    tensors assigned, the rotary frequencies (computed, never saved) made on the device."""
    from transformers import LlamaConfig, LlamaModel
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    config = LlamaConfig(**{key: value for key, value in hf.items() if key != "model_type"})
    with torch.device("meta"), DrawNothing():
        model = LlamaModel(config)
    parameters = dict(ours.named_parameters(remove_duplicate=False))
    shared = {theirs: parameters[mine] for mine, theirs in checkpoint_names(ours).items() if theirs != HEAD}
    model.load_state_dict(shared, assign=True, strict=True)
    model.rotary_emb = LlamaRotaryEmbedding(config).to(device)
    empty = [name for name, t in chain(model.named_parameters(), model.named_buffers()) if t.is_meta]
    if empty:
        raise RuntimeError(f"transformers' model has tensors without values: {empty[:3]}")
    return model.eval()


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


class Meter:
    """The device's clock and peak memory: CUDA synchronized, its allocator's peak (everything
    allocated, weights included); on the CPU the growth of the process's peak RSS (VmHWM, reset by
    writing 5 to /proc/self/clear_refs) above the RSS at the reset, None where that cannot be reset."""

    def __init__(self, device: torch.device) -> None:
        self.device, self.cuda = device, device.type == "cuda"
        self.base_kb: int | None = None

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def reset(self) -> None:
        gc.collect()
        if self.cuda:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(self.device)
            return
        try:
            Path("/proc/self/clear_refs").write_text("5")
            self.base_kb = _status_kb("VmRSS")
        except (OSError, KeyError):
            self.base_kb = None

    def peak_gb(self) -> float | None:
        if self.cuda:
            return torch.cuda.max_memory_allocated(self.device) / GB
        if self.base_kb is None:
            return None
        return max(0, _status_kb("VmHWM") - self.base_kb) * 1024 / GB


def measured(meter: Meter, call: Callable, setup: Callable | None = None,
             warm: bool = False) -> tuple[list[float], float | None]:  # fmt: skip
    """Seconds of ``call(setup())`` (``setup`` untimed; its memory counts in the peak) and the peak
    memory of the last call: a warm-up, then REPEATS calls, or one where the warm-up took longer than
    CHEAP; a warm-up longer than EXPENSIVE is the one measurement unless ``warm`` (the row is about
    what the warm-up leaves behind)."""
    times, peak = [], None
    for _ in range(1 + REPEATS):
        state = setup() if setup is not None else None
        meter.reset()
        start = time.perf_counter()
        result = call(state) if setup is not None else call()
        meter.sync()
        times.append(time.perf_counter() - start)
        peak = meter.peak_gb()
        del result, state
        if (times[0] > EXPENSIVE and not warm) or (len(times) > 1 and times[0] > CHEAP):
            break
    return times[1:] or times, peak


def row(name: str, tokens: int, times: list[float] | None = None, peak: float | None = None, note: str = "") -> dict:
    return {"row": name, "tokens": tokens, "seconds": statistics.median(times) if times else None,
            "times": times or [], "peak_gb": peak, "note": note}  # fmt: skip


def attempt(name: str, tokens: int, meter: Meter, call: Callable, setup: Callable | None = None,
            warm: bool = False) -> dict:  # fmt: skip
    """One row, or what stopped it: the memory plan's refusal, or the allocator out of memory."""
    try:
        times, peak = measured(meter, call, setup, warm)
    except ModelError as error:
        return row(name, tokens, note=f"refused: {error}")
    except (torch.OutOfMemoryError, MemoryError):
        return row(name, tokens, note="out of memory")
    finally:
        gc.collect()
    return row(name, tokens, times, peak)


def long_tokens(ids: list[int]) -> Tokens:
    """Tokens of ``ids`` as the backend's tokenizer would hand them over (labels play no part)."""
    n = len(ids)
    return Tokens("", tuple(ids), ("x",) * n, (None,) * n, (False,) * n, (False,) * n, tuple(range(n)))


def landing(backend: OursDecoderBackend, tokens: Tokens) -> tuple[LongInput, LongHeatmap]:
    """The head view's first heatmap of a long text: the long input, the landing head's max-pooled
    overview (the page's default pooling) and its heatmap of the whole text (log colours)."""
    long = backend.long_input(tokens)
    layer, head = LANDING
    whole = long.overview(layer, head, TILES, means=False)
    everything = range(long.length)
    return long, long_heatmap(long, layer, head, whole, everything, everything, "max", colours="log")


def another_head(long: LongInput) -> LongHeatmap:
    """The head view switched to the landing layer's next head."""
    layer, head = LANDING[0], LANDING[1] + 1
    everything = range(long.length)
    whole = long.overview(layer, head, TILES, means=False)
    return long_heatmap(long, layer, head, whole, everything, everything, "max", colours="log")


def every_head(long: LongInput) -> np.ndarray:
    """The all-heads grid of a long text: every head's normalizers, overviews and thumbnails."""
    long.read_every_head(means=False)
    overviews = [[long.overview(layer, head, TILES, means=False) for head in range(long.n_heads)]
                 for layer in range(long.n_layers)]  # fmt: skip
    return thumbnails(overviews, THUMB)


def layer_grid(long: LongInput, layer: int) -> list[Overview]:
    long.kept.normalizers(layer)  # the layer's heads not run yet, in one call of the kernel
    return [long.overview(layer, head, TILES, means=False) for head in range(long.n_heads)]


def full_capture(model: Transformer, name: str, tokens: Tokens, ids: torch.Tensor) -> AttentionResult:
    """Every pattern, as the backend's run captures it once the text is tokenized."""
    check_capture(model, name, len(tokens), ("pattern",))
    with torch.inference_mode(), capture(kinds=("pattern",)) as recorded:
        model(ids)
    return AttentionResult.from_recorder(name, tokens, recorded)


def recycled_capture(model: Transformer, name: str, tokens: Tokens, ids: torch.Tensor) -> AttentionResult:
    """:func:`full_capture` writing into the blocks the previous call freed (runtime/memory.py): the
    capture's own cost without mapping fresh memory, which the full-capture row pays on every call."""
    with memory.recycling():
        return full_capture(model, name, tokens, ids)


def recycled_row(model: Transformer, name: str, tokens: Tokens, ids: torch.Tensor, meter: Meter) -> dict:
    """The row of :func:`recycled_capture`, the memory pool made as large as one capture's patterns
    while it runs (a call's blocks join the pool when its result is freed), then emptied: transformers
    runs in the state ours started from."""
    previous = memory.limit_bytes
    memory.limit_bytes = max(previous, int(capture_bytes(model, len(tokens), ("pattern",)) * 1.1))
    try:
        return attempt(RECYCLED, len(tokens), meter, lambda: recycled_capture(model, name, tokens, ids), warm=True)
    finally:
        memory.limit_bytes = previous
        memory.release()


def ours_rows(backend: OursDecoderBackend, tokens: Tokens, ids: torch.Tensor, meter: Meter,
              every_head_up_to: int | None) -> Iterator[dict]:  # fmt: skip
    n = len(tokens)

    def landed() -> LongInput:  # the state the later rows start from, made untimed
        return landing(backend, tokens)[0]

    yield attempt(ROWS[0], n, meter, lambda: landing(backend, tokens))
    yield attempt(ROWS[1], n, meter, another_head, landed)
    yield attempt(ROWS[2], n, meter, lambda long: layer_grid(long, LANDING[0]), landed)
    if every_head_up_to is not None and n > every_head_up_to:
        yield row(ROWS[3], n, note=f"not run: past --every-head-up-to {every_head_up_to}")
    else:
        yield attempt(ROWS[3], n, meter, every_head, landed)
    yield attempt(FULL, n, meter, lambda: full_capture(backend.model, backend.name, tokens, ids))
    if meter.cuda:
        yield row(RECYCLED, n, note="not run: CUDA's caching allocator recycles on its own")
    else:
        yield recycled_row(backend.model, backend.name, tokens, ids, meter)


def transformers_rows(model: torch.nn.Module, ids: torch.Tensor, meter: Meter) -> Iterator[dict]:
    n = ids.shape[1]

    def run(attention: str, weights: bool) -> object:
        model.set_attn_implementation(attention)
        with torch.inference_mode():
            out = model(input_ids=ids, use_cache=False, output_attentions=weights)
        return out.attentions if weights else out.last_hidden_state

    yield attempt(EAGER, n, meter, lambda: run("eager", True))
    yield attempt(SDPA, n, meter, lambda: run("sdpa", False))


def backend_of(shape: str, model: Transformer) -> OursDecoderBackend:
    """Our decoder's backend, as ``hf:`` folders open in it; the tokenizer is never used (the
    benchmark hands over token ids)."""
    from tokenizers import Tokenizer, models

    tokenizer = Tokenizer(models.WordLevel({"<unk>": 0}, unk_token="<unk>"))
    return OursDecoderBackend(f"bench:{shape}", model, tokenizer, "llama", "LlamaForCausalLM")


def fastest(passes: list[dict]) -> dict:
    """One row measured in several passes: the fastest pass's seconds (noise on a shared machine only
    ever adds time, and every contender gets the same number of passes), every pass's calls, the
    largest peak; a pass that did not run (refused, out of memory) stands for the row when none ran."""
    ran = [r for r in passes if r["seconds"] is not None]
    if not ran:
        return passes[0]
    best = min(ran, key=lambda r: r["seconds"])
    peaks = [r["peak_gb"] for r in ran if r["peak_gb"] is not None]
    return {**best, "times": [t for r in ran for t in r["times"]], "peak_gb": max(peaks) if peaks else None}


def measure(shape: str, token_counts: list[int], placement: Placement, seed: int = 0,
            every_head_up_to: int | None = None, passes: int = 1) -> dict:  # fmt: skip
    """Every row at every token count, with what the run was made on; ``passes``: each token count's
    rows run that many times in turn (ours, then transformers, again), each row kept from its fastest."""
    import transformers

    device, dtype = torch.device(placement.device), placement.torch_dtype
    meter, hf = Meter(device), hf_config(shape)
    start = time.perf_counter()
    model = build_llama(hf, SeededWeights(hf, seed, dtype), device=device, dtype=dtype)
    meter.sync()
    built_s = time.perf_counter() - start
    backend = backend_of(shape, model)
    backend.placement = placement
    theirs = transformers_model(hf, model, device)
    gc.freeze()  # what is loaded lives on: the collections before each call need not walk it again
    generator = torch.Generator().manual_seed(seed)
    rows = []
    for n in token_counts:
        ids = torch.randint(0, hf["vocab_size"], (1, n), generator=generator)
        tokens = long_tokens(ids[0].tolist())
        measured_passes: dict[str, list[dict]] = {}
        for _ in range(passes):
            # ours first, each row's state freed when it ends: nothing of ours but the weights is left
            # while transformers runs
            for r in chain(ours_rows(backend, tokens, ids.to(device), meter, every_head_up_to),
                           transformers_rows(theirs, ids.to(device), meter)):  # fmt: skip
                print(line(r), flush=True)
                measured_passes.setdefault(r["row"], []).append(r)
        rows += [fastest(each) for each in measured_passes.values()]
    return {
        "shape": shape,
        "tokens": token_counts,
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "dtype": placement.dtype,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "weights_gb": weight_bytes(model) / GB,
        "build_s": built_s,
        "every_head_up_to": every_head_up_to,
        "passes": passes,
        "rows": rows,
    }


def line(r: dict) -> str:
    """A row as the run prints it."""
    seconds = f"{r['seconds']:.3f} s" if r["seconds"] is not None else ""
    peak = f"{r['peak_gb']:.3f} GB" if r["peak_gb"] is not None else "—"
    return f"{r['row']:<42} {r['tokens']:>7} {seconds:>10} {peak:>10}  {r['note']}".rstrip()


def _find(report: dict, name: str, tokens: int) -> dict | None:
    return next((r for r in report["rows"] if r["row"] == name and r["tokens"] == tokens), None)


def floors(report: dict) -> list[dict]:
    """The issue's floors for this shape, at the token counts this run measured: what, the measured
    value (None where the row did not run), the limit, the unit, ok."""
    checks = []

    def check(what: str, value: float | None, limit: float, unit: str) -> None:
        checks.append({"what": what, "value": value, "limit": limit, "unit": unit,
                       "ok": value is not None and value <= limit})  # fmt: skip

    if report["shape"] == "llama-8b":
        if 32768 in report["tokens"]:
            check("8B shape, 32k tokens: landing heatmap", _find(report, ROWS[0], 32768)["seconds"], 2.0, "s")
            check("8B shape, 32k tokens: another head", _find(report, ROWS[1], 32768)["seconds"], 0.2, "s")
        if 131072 in report["tokens"]:
            long_rows = [_find(report, name, 131072) for name in ROWS[:4]]
            ran = [r for r in long_rows if not r["note"].startswith("not run")]
            works = ran and all(r["seconds"] is not None for r in ran)
            over = max(r["peak_gb"] for r in ran) - report["weights_gb"] if works else None
            check("8B shape, 128k tokens: works, peak device memory above the weights", over, 40.0, "GB")
    for n in (n for n in report["tokens"] if n <= FULL_CAPTURE_UP_TO and report["shape"] != "tiny"):
        ours, floor = _find(report, FULL, n), _find(report, SDPA, n)
        if ours is None or floor is None:
            continue
        ratio = ours["seconds"] / floor["seconds"] if ours["seconds"] is not None and floor["seconds"] else None
        check(f"{n:,} tokens: every pattern captured / SDPA forward", ratio, 1.2, "×")
    if report["shape"] == "llama-1b" and 2048 in report["tokens"]:
        ours, floor = _find(report, FULL, 2048)["seconds"], _find(report, SDPA, 2048)["seconds"]
        ratio = ours / floor if ours is not None and floor else None
        check("1B shape, 2k tokens: every pattern captured (as run does: to the host) / SDPA forward", ratio, 1.5, "×")
    return checks


def markdown(report: dict, command: str) -> tuple[str, str]:
    """(the heading, the body) of this shape's table in the GPU section."""
    heading = f"### {report['shape']} shape on {report['device']}"
    counts = report["tokens"]
    lines = [
        "",
        f"`{command}` — {report['date']}, {report['device']}, {report['dtype']}, torch {report['torch']}, "
        f"transformers {report['transformers']}; random weights of {report['weights_gb']:.1f} GB, built in "
        f"{report['build_s']:.1f} s. Each cell: seconds, then {PEAKS[report['device'] == 'cpu']}"
        + (f"; the fastest of {report['passes']} passes, each row's contenders in turn." if report.get("passes", 1) > 1
           else "."),
        "",
        "| | " + " | ".join(f"{n:,} tokens" for n in counts) + " |",
        "|---|" + "---:|" * len(counts),
    ]
    notes = []
    for name in ROWS:
        cells = []
        for n in counts:
            r = _find(report, name, n)
            if r["seconds"] is not None:
                peak = f", {r['peak_gb']:.1f} GB" if r["peak_gb"] is not None else ""
                cells.append(f"{r['seconds']:.3f} s{peak}")
            elif r["note"].startswith("refused"):
                cells.append("refused by the memory plan")
                notes.append(f"- {name}, {n:,} tokens: {r['note']}")
            else:
                cells.append(r["note"])
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += ["", *notes, *([""] if notes else [])]
    checks = floors(report)
    if checks:
        lines += ["| floor | measured | limit | |", "|---|---:|---:|---|"]
        for c in checks:
            value = f"{c['value']:.2f} {c['unit']}" if c["value"] is not None else "did not run"
            verdict = "ok" if c["ok"] else "MISSED"
            lines.append(f"| {c['what']} | {value} | ≤ {c['limit']:g} {c['unit']} | {verdict} |")
        lines.append("")
    return heading, "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=list(SHAPES), default="llama-1b")
    parser.add_argument("--tokens", type=int, nargs="+", default=[1024, 4096, 8192, 32768, 131072])
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    parser.add_argument("--dtype", choices=("float32", "bfloat16", "float16"),
                        help="default: bfloat16 on CUDA, float32 on the CPU")
    parser.add_argument("--every-head-up-to", type=int, metavar="TOKENS",
                        help="run the every-head row only up to this many tokens (it grows as tokens² × heads)")
    parser.add_argument("--passes", type=int, default=1, help="run each token count's rows this many times in "
                        "turn and keep each row's fastest pass (a shared machine's noise only adds time)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", metavar="JSON", help="write every row (and the run's machine) as JSON")
    parser.add_argument("--doc", metavar="PATH", help="write this shape's table into the GPU section of PATH "
                        "(docs/performance.md)")
    args = parser.parse_args(argv)
    try:
        placement = resolve(args.device, args.dtype)
    except ModelError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    too_long = [n for n in args.tokens if not 2 <= n <= MAX_POSITIONS]
    if too_long:
        print(f"error: --tokens must lie in 2 … {MAX_POSITIONS}; got {too_long}", file=sys.stderr)
        return 2
    if args.passes < 1:
        print(f"error: --passes must be at least 1; got {args.passes}", file=sys.stderr)
        return 2
    report = measure(args.shape, sorted(set(args.tokens)), placement, args.seed, args.every_head_up_to, args.passes)
    command = "python -m benchmarks.gpu " + " ".join(argv if argv is not None else sys.argv[1:])
    if args.out:
        Path(args.out).write_text(json.dumps({**report, "floors": floors(report)}, indent=2))
    if args.doc:
        page = Path(args.doc)
        heading, body = markdown(report, command.strip())
        page.write_text(with_gpu_table(page.read_text() if page.exists() else "", heading, body))
    for c in floors(report):
        print(f"floor: {c['what']}: {c['value']} (≤ {c['limit']} {c['unit']}) {'ok' if c['ok'] else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
