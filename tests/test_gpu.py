"""On a CUDA machine (skipped elsewhere, tests/conftest.py): our Transformer in bfloat16 on the GPU
gives the float32 CPU patterns to a loose tolerance, through the API, the command line, ablation,
patching and padded batches. Run there with ``pytest tests/test_gpu.py -n 0``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import attention_viz as av
from attention_viz.analysis.ablation import Ablation
from attention_viz.backends.registry import load_backend
from attention_viz.core.names import DECODER_SELF

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[1]
SENTENCE = "The animal didn't cross the street because it was too tired."
LOOSE = 2e-2


def patterns_close(a, b) -> float:
    names = [n for n in a.arrays if n.endswith(".pattern")]
    assert names and set(names) <= set(b.arrays)
    return max(float(np.abs(a.arrays[n] - b.arrays[n]).max()) for n in names)


def test_minilm_on_cuda_in_bfloat16_equals_the_cpu_in_float32():
    gpu = av.run("minilm", SENTENCE, kinds=("pattern", "scores", "q"), device="cuda")
    cpu = av.run("minilm", SENTENCE, kinds=("pattern", "scores", "q"), device="cpu")
    assert str(load_backend("minilm", device="cuda").placement) == "cuda, bfloat16"
    assert {a.dtype for a in gpu.arrays.values()} == {np.dtype(np.float32)}
    assert patterns_close(gpu, cpu) < LOOSE
    first = gpu.pattern(("encoder", "self_attn"), 0)
    assert np.allclose(first.sum(-1), 1, atol=1e-5)  # normalized in float32 on the GPU too


def test_minilm_on_cuda_in_float32_equals_the_cpu_closely():
    gpu = av.run("minilm", SENTENCE, device="cuda", dtype="float32")
    cpu = av.run("minilm", SENTENCE, device="cpu")
    assert patterns_close(gpu, cpu) < 1e-3  # TF32 matrix products at most


def test_auto_is_cuda_here():
    assert load_backend("induction").placement.device == "cuda"
    assert load_backend("show-attend-tell").placement.device == "cpu"  # it runs on the CPU only


def test_the_cli_runs_on_cuda(tmp_path):
    out = tmp_path / "r.npz"
    done = subprocess.run([sys.executable, "-m", "attention_viz", "run", "--text", SENTENCE, "--device", "cuda",
                           "--kinds", "all", "--out", str(out)], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr
    data = np.load(out)
    pattern = data["encoder.layers.5.self_attn.pattern"]
    assert pattern.dtype == np.float32 and np.allclose(pattern.sum(-1), 1, atol=1e-5)
    cpu = av.run("minilm", SENTENCE, device="cpu")
    assert np.abs(pattern - cpu.pattern(("encoder", "self_attn"), 5)).max() < LOOSE


def test_ablation_and_outputs_on_cuda():
    gpu, cpu = load_backend("induction", device="cuda"), load_backend("induction", device="cpu")
    ablation = Ablation(((DECODER_SELF, 1, 0),))
    g, g_out = gpu.forward("a b c a b c", ablation=ablation)
    c, c_out = cpu.forward("a b c a b c", ablation=ablation)
    assert patterns_close(g, c) < LOOSE
    assert np.abs(g_out.log_probs - c_out.log_probs).max() < 0.1


def test_patching_on_cuda():
    gpu = av.patch("induction", device="cuda")
    cpu = av.patch("induction", device="cpu")
    assert np.nanmax(np.abs(gpu.restored - cpu.restored)) < 0.05


def test_a_padded_batch_on_cuda():
    texts = [SENTENCE, "A short one."]
    gpu = av.run("minilm", texts, device="cuda")
    cpu = av.run("minilm", texts, device="cpu")
    for g, c in zip(gpu, cpu):
        assert patterns_close(g, c) < LOOSE


def test_the_teaching_pages_computations_on_cuda():
    gpu, cpu = load_backend("minilm", device="cuda"), load_backend("minilm", device="cpu")
    ids = cpu.tokenize(SENTENCE)[0].ids
    assert np.abs(gpu.inside_head(ids, 2, 3).pattern - cpu.inside_head(ids, 2, 3).pattern).max() < LOOSE
    batch = gpu.padded_batch([ids, ids[:5]], 1)
    assert np.abs(batch.patterns[1, :, :5, :5] - batch.alone[1]).max() < LOOSE
