"""benchmarks/gpu.py: the tiny shape on the CPU runs end to end in a bare process (no Streamlit, no
Plotly), transformers reads the very weights ours runs, the floors and the docs section it writes;
on a machine with CUDA (marked gpu), the same run on the device."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from benchmarks import gpu
from benchmarks.performance_doc import GPU_HEADING, document, with_gpu_table

ROOT = Path(__file__).resolve().parents[1]
# the benchmark's main in a fresh interpreter, then the drawing libraries that process loaded
IN_FRESH_PROCESS = (
    "import json, sys\n"
    "from benchmarks.gpu import main\n"
    "code = main(sys.argv[1:])\n"
    "print('LOADED', json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('streamlit', 'plotly'))))\n"
    "sys.exit(code)\n"
)


def run_fresh(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", IN_FRESH_PROCESS, *args], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"}, timeout=300)  # fmt: skip


@pytest.mark.slow
def test_the_tiny_shape_runs_every_row_on_the_cpu_without_drawing_libraries(tmp_path):
    out, doc = tmp_path / "rows.json", tmp_path / "performance.md"
    done = run_fresh("--shape", "tiny", "--device", "cpu", "--tokens", "64", "200", "--out", str(out),
                     "--doc", str(doc))  # fmt: skip
    assert done.returncode == 0, done.stderr
    printed = done.stdout.splitlines()
    for name in gpu.ROWS:
        assert sum(line[:42].rstrip() == name for line in printed) == 2, name  # once per token count
    assert printed[-1] == "LOADED []"
    report = json.loads(out.read_text())
    assert [report[key] for key in ("shape", "device", "dtype", "tokens")] == ["tiny", "cpu", "float32", [64, 200]]
    assert {(r["row"], r["tokens"]) for r in report["rows"]} == {(name, n) for name in gpu.ROWS for n in (64, 200)}
    for r in report["rows"]:
        assert r["note"] == "" and r["seconds"] > 0 and len(r["times"]) == gpu.REPEATS, r
        assert isinstance(r["peak_gb"], float) and r["peak_gb"] >= 0, r
    assert report["weights_gb"] > 0 and report["floors"] == []  # the tiny shape has no floor
    page = doc.read_text()
    assert GPU_HEADING in page and "### tiny shape on cpu" in page and "| ours: full capture | " in page


def test_bad_requests_are_one_line(capsys):
    assert gpu.main(["--tokens", "1"]) == 2
    assert capsys.readouterr().err == "error: --tokens must lie in 2 … 131072; got [1]\n"
    if not torch.cuda.is_available():  # a device this machine does not have
        assert gpu.main(["--device", "cuda", "--tokens", "64"]) == 2
        assert capsys.readouterr().err.startswith("error: device cuda: CUDA is not available")


@pytest.mark.slow
def test_transformers_reads_the_same_tensors_and_computes_the_same_hidden_states():
    hf = gpu.hf_config("tiny")
    ours = gpu.build_llama(hf, gpu.SeededWeights(hf, 0, torch.float32), device="cpu")
    theirs = gpu.transformers_model(hf, ours, torch.device("cpu"))
    assert theirs.layers[1].mlp.down_proj.weight is ours.decoder.layers[1].feed_forward.w_2.weight  # shared
    ids = torch.randint(0, hf["vocab_size"], (1, 40), generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        assert torch.allclose(ours(ids), theirs(input_ids=ids, use_cache=False).last_hidden_state, atol=1e-5)
    again = gpu.build_llama(hf, gpu.SeededWeights(hf, 0, torch.float32), device="cpu")
    other = gpu.build_llama(hf, gpu.SeededWeights(hf, 1, torch.float32), device="cpu")
    pairs = list(zip(ours.parameters(), again.parameters(), other.parameters()))
    assert all(torch.equal(a, b) for a, b, _ in pairs)  # seeded
    assert not all(torch.equal(a, c) for a, _, c in pairs)


def test_the_real_shapes_are_the_checkpoints():
    one, eight = gpu.llama_shapes(gpu.hf_config("llama-1b")), gpu.llama_shapes(gpu.hf_config("llama-8b"))
    count = lambda shapes: sum(torch.Size(s).numel() for s in shapes.values())  # noqa: E731
    assert round(count(one) / 1e9, 2) == 1.24 and round(count(eight) / 1e9, 2) == 8.03  # as the model cards say
    assert "lm_head.weight" not in one and eight["model.layers.31.self_attn.k_proj.weight"] == (1024, 4096)


# Llama-3.1-8B's and Llama-3.2-1B's config.json, the keys that make the shape and the positions
REAL = {
    "llama-8b": {"num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096,
                 "intermediate_size": 14336, "vocab_size": 128256, "max_position_embeddings": 131072,
                 "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                 "original_max_position_embeddings": 8192},
    "llama-1b": {"num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 2048,
                 "intermediate_size": 8192, "vocab_size": 128256, "max_position_embeddings": 131072,
                 "rope_theta": 500000.0, "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                 "original_max_position_embeddings": 8192},
}  # fmt: skip


@pytest.mark.parametrize("shape", list(REAL))
def test_the_real_shapes_carry_the_checkpoints_llama3_rotary(shape):
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    from attention_viz.core.positional import RotaryScaling, inverse_frequencies
    from attention_viz.weights.llama import llama_config

    hf = gpu.hf_config(shape)
    flat = {**hf, **hf["rope_parameters"]}
    assert {key: flat[key] for key in REAL[shape]} == REAL[shape] and hf["rope_parameters"]["rope_type"] == "llama3"
    ours = llama_config(hf)
    real = REAL[shape]
    assert ours.rotary_base == 500000.0 and ours.rotary_scaling == RotaryScaling(
        "llama3", real["factor"], real["low_freq_factor"], real["high_freq_factor"], 8192
    )
    theirs = LlamaRotaryEmbedding(LlamaConfig(**{k: v for k, v in hf.items() if k != "model_type"}))
    assert theirs.attention_scaling == 1.0
    assert torch.equal(theirs.inv_freq, inverse_frequencies(ours.d_k, ours.rotary_base, ours.rotary_scaling))


def report_of(shape: str, rows: dict[tuple[str, int], tuple[float | None, float | None, str]]) -> dict:
    """A report with ``rows``: (row name, tokens) → (seconds, peak GB, note)."""
    return {"shape": shape, "tokens": sorted({n for _, n in rows}), "weights_gb": 16.0,
            "rows": [gpu.row(name, n, [s] if s is not None else None, p, note)
                     for (name, n), (s, p, note) in rows.items()]}  # fmt: skip


def test_floors_mark_what_was_missed_and_what_did_not_run():
    landing, other, grid, every = gpu.ROWS[:4]
    rows = {(landing, 32768): (1.5, 20.0, ""), (other, 32768): (0.3, 20.0, ""),
            (landing, 131072): (5.0, 30.0, ""), (other, 131072): (0.5, 30.0, ""),
            (grid, 131072): (9.0, 70.0, ""), (every, 131072): (None, None, "not run: past --every-head-up-to 32768")}
    checks = {c["what"]: c for c in gpu.floors(report_of("llama-8b", rows))}
    assert [(c["value"], c["ok"]) for c in checks.values()] == [(1.5, True), (0.3, False), (54.0, False)]
    rows[(grid, 131072)] = (None, None, "refused: bench:llama-8b: reading 131072 tokens blockwise needs …")
    assert gpu.floors(report_of("llama-8b", rows))[-1]["value"] is None  # did not work: missed
    assert not gpu.floors(report_of("llama-8b", rows))[-1]["ok"]
    capture = {(gpu.FULL, 2048): (0.9, 30.0, ""), (gpu.SDPA, 2048): (0.5, 5.0, "")}
    full, ratio = gpu.floors(report_of("llama-1b", capture))
    assert ratio["value"] == pytest.approx(1.8) and not ratio["ok"]
    assert full["what"] == "2,048 tokens: every pattern captured / SDPA forward" and not full["ok"]  # ≤ 1.2×
    capture = {(gpu.FULL, 4096): (5.5, 9.0, ""), (gpu.SDPA, 4096): (5.0, 0.1, ""),
               (gpu.FULL, 8192): (None, None, "refused: …"), (gpu.SDPA, 8192): (9.0, 0.1, "")}  # fmt: skip
    (full,) = gpu.floors(report_of("gpt2-small", capture))  # up to 4k tokens only
    assert full["value"] == pytest.approx(1.1) and full["ok"] and full["limit"] == 1.2
    assert gpu.floors(report_of("llama-1b", {(gpu.FULL, 1024): (0.1, 1.0, "")})) == []  # 2k not measured


def test_the_gpu_section_replaces_one_shape_and_leaves_the_rest():
    page = "# Performance\n\nintro\n\n## Performance, measured side by side\n\n### Floors\n\n| a | b |\n"
    one = with_gpu_table(page, "### llama-1b shape on H100", "first 1b table")
    both = with_gpu_table(one, "### llama-8b shape on H100", "the 8b table")
    again = with_gpu_table(both, "### llama-1b shape on H100", "second 1b table")
    assert again.startswith(page) and again.count(GPU_HEADING) == 1
    assert "second 1b table" in again and "first 1b table" not in again and "the 8b table" in again
    assert again.index("llama-1b") < again.index("llama-8b")  # replaced where it was
    assert with_gpu_table(again, "### llama-1b shape on H100", "second 1b table") == again
    rewritten = document("# Performance, measured side by side\n\n## Floors\n\n| a | c |\n", again)  # make bench
    assert "| a | c |" in rewritten and "| a | b |" not in rewritten
    assert rewritten[rewritten.index(GPU_HEADING):] == again[again.index(GPU_HEADING):]  # the GPU section kept
    assert GPU_HEADING not in document("# Performance, measured side by side\n", "")


@pytest.mark.gpu
def test_the_benchmark_on_cuda_counts_device_memory(tmp_path):
    out = tmp_path / "rows.json"
    done = run_fresh("--shape", "tiny", "--device", "cuda", "--tokens", "64", "4096", "--out", str(out))
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    assert report["dtype"] == "bfloat16" and report["device"] == torch.cuda.get_device_name()
    for r in report["rows"]:
        assert r["seconds"] > 0 and r["peak_gb"] >= report["weights_gb"], r  # the allocator's, weights included


def test_a_row_measured_in_passes_keeps_its_fastest():
    slow, fast = gpu.row(gpu.FULL, 2048, [9.0], 2.5), gpu.row(gpu.FULL, 2048, [7.0, 7.5], 2.4)
    kept = gpu.fastest([slow, fast])
    assert kept["seconds"] == 7.25 and kept["times"] == [9.0, 7.0, 7.5] and kept["peak_gb"] == 2.5
    refused = gpu.row(gpu.FULL, 8192, note="refused: …")
    assert gpu.fastest([refused, refused]) == refused
    assert gpu.fastest([refused, slow])["seconds"] == 9.0
    assert gpu.main(["--passes", "0", "--tokens", "64"]) == 2
