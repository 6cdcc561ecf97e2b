"""The atlas on GPUs: ``atlas build --gpus-per-worker`` (default one GPU per model worker where the
model would run on CUDA here), refused in one line when negative or when the Ray cluster has no GPU;
on a machine with CUDA (marked gpu), a build whose workers share the GPU."""

from __future__ import annotations

import os

import pytest

import attention_viz.runtime.device as device
from attention_viz.atlas.pipeline import build_atlas, worker_gpus
from attention_viz.atlas.layout import read_manifest
from attention_viz.cli import main
from attention_viz.errors import ModelError
from attention_viz.runtime.settings import DEVICE_ENV

SMALL = dict(rows_per_file=8, sample_tokens=100, js_sentences=8, progress=False)


@pytest.mark.parametrize("cuda", [True, False])
def test_workers_get_a_gpu_by_default_where_the_model_would_run_on_cuda(monkeypatch, cuda):
    monkeypatch.delenv(DEVICE_ENV, raising=False)
    monkeypatch.setattr(device, "cuda_available", lambda: cuda)
    assert worker_gpus(None, "minilm") == (1.0 if cuda else 0.0)
    assert worker_gpus(None, "toy-translate") == 0.0  # runs on the CPU only
    assert worker_gpus(0.25, "minilm") == 0.25 and worker_gpus(0, "minilm") == 0


def test_a_negative_share_is_one_line_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "atlas"
    assert main(["atlas", "build", "--corpus", "probes:4", "--out", str(out), "--gpus-per-worker", "-1"]) != 0
    assert capsys.readouterr().err.strip() == "error: --gpus-per-worker must be 0 or more, got -1"
    assert not out.exists()


@pytest.mark.slow
def test_asking_for_gpus_of_a_cluster_without_any_is_refused(tmp_path):
    ray = pytest.importorskip("ray")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(num_cpus=1, num_gpus=0, include_dashboard=False, logging_level="WARNING")
    try:
        with pytest.raises(ModelError, match=r"^--gpus-per-worker 0.5 asks for GPUs, but the Ray cluster has none"):
            build_atlas("minilm", "probes:4", tmp_path / "atlas", gpus_per_worker=0.5, **SMALL)
    finally:
        ray.shutdown()


@pytest.mark.slow
def test_a_worker_given_a_gpu_loads_its_model_on_cuda(tmp_path):
    """Ray told of one GPU (a logical resource, whether or not the machine has it): the worker's load
    asks for CUDA, which works where torch sees a GPU and is refused in one line where it does not."""
    ray = pytest.importorskip("ray")
    import torch

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(num_cpus=2, num_gpus=1, include_dashboard=False, logging_level="WARNING")
    try:
        if torch.cuda.is_available():
            assert build_atlas("minilm", "probes:4", tmp_path / "atlas", gpus_per_worker=1, **SMALL)["complete"]
        else:
            with pytest.raises(ModelError, match=f"^a Ray worker failed: {DEVICE_ENV} cuda: CUDA is not available"):
                build_atlas("minilm", "probes:4", tmp_path / "atlas", gpus_per_worker=1, **SMALL)
    finally:
        ray.shutdown()


@pytest.mark.gpu
def test_workers_sharing_the_gpu_build_the_atlas(tmp_path):
    out = tmp_path / "atlas"
    build_atlas("minilm", "probes:8", out, gpus_per_worker=0.5, **SMALL)  # two workers on one GPU
    assert read_manifest(out)["complete"] and read_manifest(out)["counts"]["sentences"] == 8
