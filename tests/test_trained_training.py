"""The training command runs (a few steps of tiny models), writes loadable folders, and is
deterministic: the same seed gives the same weights."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from attention_viz.backends.translation import TranslationBackend
from attention_viz.trained import checkpoint
from attention_viz.trained.train import train

ROOT = Path(__file__).resolve().parents[1]
SMOKE = dict(steps=4, tiny=True, train_size=200, dev_size=10, eval_every=0, log=lambda _: None)


@pytest.mark.parametrize("name", ["toy-translate", "toy-translate-rnn", "gru-no-attention"])
def test_smoke_training_is_deterministic_and_loadable(name, tmp_path):
    threads = torch.get_num_threads()
    train(name, tmp_path / "a", seed=3, **SMOKE)
    train(name, tmp_path / "b", seed=3, **SMOKE)
    train(name, tmp_path / "c", seed=4, **SMOKE)
    assert torch.get_num_threads() == threads and not torch.are_deterministic_algorithms_enabled()
    a, b, c = (load_file(str(tmp_path / d / "model.safetensors")) for d in "abc")
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert any(not torch.equal(a[k], c[k]) for k in a)
    dm = checkpoint.load(tmp_path / "a")
    assert dm.training["hyperparameters"]["steps"] == 4
    if dm.has_attention:
        result = TranslationBackend(name, dm).run("the council signed the treaty .")
        assert "decoder.layers.0.cross_attn.pattern" in result.arrays


def test_training_command_line(tmp_path):
    out = tmp_path / "model"
    done = subprocess.run(
        [sys.executable, "-m", "attention_viz.trained.train", "--model", "toy-translate-rnn", "--tiny",
         "--steps", "3", "--train-size", "100", "--dev-size", "10", "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, env={**os.environ},
    )
    assert done.returncode == 0, done.stderr
    assert "step 3/3" in done.stdout
    assert checkpoint.missing_files(out) == []
    assert (out / "training.json").is_file()
