"""The command line as users script it: real processes (one per command that loads a model; argument
errors, answered before torch loads, all as real processes), one-line errors, offline. Checks that need
a model but not a new process call the same ``main`` in this process."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from attention_viz.errors import ModelError
from attention_viz.backends import registry
from attention_viz.backends.registry import load_backend
from attention_viz.cli import main

ROOT = Path(__file__).resolve().parents[1]
SENTENCE = "The animal didn't cross the street because it was too tired."


def cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "attention_viz", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=120, env={**os.environ, **(env or {})},
    )


def test_run_minilm_writes_all_six_layers(tmp_path):
    out = tmp_path / "r.npz"
    done = cli("run", "--model", "minilm", "--text", SENTENCE, "--out", str(out))
    assert done.returncode == 0, done.stderr
    data = np.load(out, allow_pickle=False)
    labels = list(data["tokens"])
    assert labels[0] == "[CLS]" and labels[-1] == "[SEP]" and "animal" in labels and "The" in labels
    for layer in range(6):
        pattern = data[f"encoder.layers.{layer}.self_attn.pattern"]
        assert pattern.shape == (12, len(labels), len(labels)) and pattern.dtype == np.float32
        assert np.allclose(pattern.sum(-1), 1, atol=1e-5)
    assert "encoder.layers.6.self_attn.pattern" not in data.files


def main_exit(argv: list[str]) -> int:
    """``main`` as the process would exit: argparse's usage errors leave through SystemExit."""
    try:
        return main(argv)
    except SystemExit as exit_:
        return exit_.code


def test_run_can_capture_every_kind(tmp_path):
    out = tmp_path / "all.npz"
    assert main(["run", "--text", "short one", "--kinds", "all", "--out", str(out)]) == 0
    files = np.load(out).files
    for kind in ("q", "k", "v", "scores", "pattern", "context"):
        assert f"encoder.layers.5.self_attn.{kind}" in files


def test_models_lists_the_default_as_available_offline():
    done = cli("models")
    assert done.returncode == 0
    assert "minilm" in done.stdout and "available offline" in done.stdout


def test_unknown_model_is_refused_by_name_with_the_list(monkeypatch):
    def no_load(name):
        raise AssertionError(f"decided from the name alone, yet {name} was loaded")

    monkeypatch.setattr(registry, "_load", no_load)
    with pytest.raises(ModelError, match="unknown model 'gpt-17'; available: minilm"):
        load_backend("gpt-17")
    done = cli("run", "--model", "gpt-17", "--text", "hi", "--out", "x.npz")
    assert done.returncode != 0
    assert done.stderr.strip().count("\n") == 0
    assert "unknown model 'gpt-17'" in done.stderr and "minilm" in done.stderr


def test_bad_arguments_give_one_line_and_nonzero_exit_before_torch_loads(tmp_path):
    """Each a real process, started with ``-X importtime``: what it imported is listed on stderr
    (lines "import time: ..."), the rest of stderr is the one error line."""
    for args in (
        ("run", "--text", "   ", "--out", str(tmp_path / "a.npz")),
        ("run", "--text", "hi", "--out", str(tmp_path / "a.txt")),
        ("run", "--text", "hi", "--kinds", "attn", "--out", str(tmp_path / "a.npz")),
        ("run", "--out", str(tmp_path / "a.npz")),
        ("frobnicate",),
        ("run", "--model", "hf:", "--text", "hi", "--out", str(tmp_path / "a.npz")),
        ("run", "--text", "hi", "--out", str(tmp_path / "missing-dir" / "a.npz")),
    ):
        done = subprocess.run([sys.executable, "-X", "importtime", "-m", "attention_viz", *args],
                              cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert done.returncode != 0, args
        imports = [line.split("|")[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")]
        assert "attention_viz.cli" in imports, done.stderr  # the listing is there to read
        assert not [m for m in imports if m.split(".")[0] in ("torch", "transformers")], args
        err = "".join(line + "\n" for line in done.stderr.splitlines() if not line.startswith("import time:"))
        assert err.startswith("error: ") and err.count("\n") == 1, (args, err)
        assert "Traceback" not in err


def test_export_writes_an_offline_html_heatmap(tmp_path):
    out = tmp_path / "fig.html"
    done = cli("export", "--model", "minilm", "--text", SENTENCE, "--view", "head", "--layer", "3",
               "--head", "1", "--out", str(out))
    assert done.returncode == 0, done.stderr
    html = out.read_text(encoding="utf-8")
    assert "layer 3, head 1" in html and '"animal"' in html and "<script src=" not in html


def test_export_rejects_out_of_range_layer_and_unknown_view(tmp_path, capsys):
    out = str(tmp_path / "fig.html")
    for args in (("--view", "head", "--layer", "6"), ("--view", "sankey"), ("--view", "head", "--head", "x")):
        assert main_exit(["export", "--text", "hi", *args, "--out", out]) == 2, args
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, args
    assert not Path(out).exists()


def tiny_bert_with_an_unused_weight(folder: Path) -> None:
    """A random 1-layer BERT saved by transformers, plus one tensor no BERT module reads."""
    from safetensors.torch import load_file, save_file
    import torch
    from transformers import BertConfig, BertModel, BertTokenizer

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat"]
    BertTokenizer(vocab={w: i for i, w in enumerate(vocab)}).save_pretrained(folder)
    config = BertConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=32)
    BertModel(config).save_pretrained(folder)
    weights = load_file(folder / "model.safetensors")
    weights["extra.unused.weight"] = torch.zeros(3)
    save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})


def test_hf_checkpoint_with_unused_weights_loads_quietly(tmp_path, capsys):
    folder = tmp_path / "bert"
    tiny_bert_with_an_unused_weight(folder)
    model = f"hf:{folder}"
    done = cli("run", "--model", model, "--text", "the cat sat", "--out", str(tmp_path / "r.npz"))
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # transformers' multi-line LOAD REPORT stays out of the terminal
    assert np.load(tmp_path / "r.npz")["encoder.layers.0.self_attn.pattern"].shape == (2, 5, 5)
    assert main(["run", "--model", model, "--text", "the cat", "--target", "sat", "--out", str(tmp_path / "t.npz")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert "takes no target" in err
