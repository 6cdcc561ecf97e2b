"""A folder loads on the weights and the tokenizer it was saved with, or it stops in one line (issue 40).

Each broken folder is tried in every loader a BERT folder can reach: ``hf:`` (BERT runs in
``transformers``) and our own encoder (the loader behind ``minilm``); the duplicated tensor also in
our decoder (Llama through ``hf:``). No tokenizer files, a tensor stored twice (under its bare and its
prefixed name, or in two shards with different values), an empty or truncated weights file: each is a
one-line ModelError naming what is wrong, and the command line says it on one line, no traceback."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import BertModel

from test_hf_backend import save_bert
from test_ours_decoder import save

from attention_viz.backends import registry
from attention_viz.backends.scratch import ScratchEncoderBackend
from attention_viz.errors import ModelError
from attention_viz.runtime.access import MODEL_ROOTS_ENV
from attention_viz.runtime.model_cache import ModelCache
from attention_viz.weights.safetensors_io import SHARD_INDEX

ROOT = Path(__file__).resolve().parents[1]
TEXT = "the cat sat on the mat"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json")


def in_transformers(folder: Path):
    return registry.load_backend(f"hf:{folder}")


def in_ours(folder: Path):
    return ScratchEncoderBackend.from_bert_folder("bert", folder)


LOADERS = {"transformers": in_transformers, "ours": in_ours}


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    monkeypatch.setattr(registry, "_loaded", ModelCache())
    monkeypatch.delenv(MODEL_ROOTS_ENV, raising=False)


@pytest.fixture(scope="module")
def bert(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("bert") / "bert"
    torch.manual_seed(0)
    save_bert(folder)
    return folder


def copy(source: Path, folder: Path) -> Path:
    shutil.copytree(source, folder)
    return folder


def refusal(load, folder: Path) -> str:
    with pytest.raises(ModelError) as error:
        load(folder)
    message = str(error.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("loader", LOADERS)
def test_the_intact_folder_loads_in_both(bert, loader):
    result = LOADERS[loader](bert).run(TEXT)
    assert result.tokens.ids[1:-1] and 1 not in result.tokens.ids  # [UNK] is id 1 in save_bert's vocabulary


@pytest.mark.parametrize("loader", LOADERS)
def test_a_folder_without_tokenizer_files_is_refused(bert, tmp_path, loader):
    folder = copy(bert, tmp_path / "f")
    for name in TOKENIZER_FILES:
        (folder / name).unlink(missing_ok=True)
    assert "no tokenizer" in refusal(LOADERS[loader], folder)


@pytest.mark.parametrize("loader", LOADERS)
def test_a_tensor_under_its_bare_and_its_prefixed_name_is_refused_by_name(bert, tmp_path, loader):
    folder = copy(bert, tmp_path / "f")
    tensors = load_file(bert / "model.safetensors")
    name = "encoder.layer.0.attention.self.query.weight"
    tensors[f"bert.{name}"] = tensors[name] + 1.0  # the copy the model was not saved with
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    message = refusal(LOADERS[loader], folder)
    assert name in message and "twice" in message


def test_the_same_in_our_decoder(tmp_path):
    folder = save(tmp_path / "llama", "llama")
    tensors = load_file(folder / "model.safetensors")
    name = "layers.0.self_attn.q_proj.weight"
    tensors[name] = tensors[f"model.{name}"] * 2.0
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    message = refusal(in_transformers, folder)
    assert name in message and "twice" in message


def sharded(bert: Path, folder: Path) -> Path:
    """``bert`` saved in several shards, with its index."""
    shutil.copytree(bert, folder)
    (folder / "model.safetensors").unlink()
    BertModel.from_pretrained(bert).save_pretrained(folder, max_shard_size="20KB")
    assert (folder / SHARD_INDEX).is_file()
    return folder


@pytest.mark.parametrize("loader", LOADERS)
def test_a_tensor_in_two_shards_with_different_values_is_refused_by_name(bert, tmp_path, loader):
    folder = sharded(bert, tmp_path / "f")
    weight_map = json.loads((folder / SHARD_INDEX).read_text())["weight_map"]
    name = "encoder.layer.1.attention.self.key.weight"
    other = next(shard for shard in sorted(set(weight_map.values())) if shard != weight_map[name])
    held = load_file(folder / weight_map[name])[name]
    tensors = load_file(folder / other) | {name: held + 1.0}
    save_file(tensors, folder / other, metadata={"format": "pt"})
    message = refusal(LOADERS[loader], folder)
    assert name in message and "two shards" in message


def damaged(bert: Path, folder: Path, keep: float) -> Path:
    copy(bert, folder)
    data = (bert / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(data[: int(len(data) * keep)])
    return folder


@pytest.mark.parametrize("loader", LOADERS)
@pytest.mark.parametrize("keep", [0.0, 0.5])
def test_an_empty_or_truncated_weights_file_is_one_line(bert, tmp_path, loader, keep):
    message = refusal(LOADERS[loader], damaged(bert, tmp_path / "f", keep))
    assert "model.safetensors" in message and "not a readable safetensors file" in message


@pytest.mark.parametrize("case", ["no tokenizer", "truncated"])
def test_the_command_line_says_it_in_one_line(bert, tmp_path, case):
    if case == "truncated":
        folder = damaged(bert, tmp_path / "f", 0.5)
    else:
        folder = copy(bert, tmp_path / "f")
        for name in TOKENIZER_FILES:
            (folder / name).unlink(missing_ok=True)
    out = tmp_path / "r.npz"
    done = subprocess.run(
        [sys.executable, "-m", "attention_viz", "run", "--model", f"hf:{folder}", "--text", TEXT, "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode != 0 and not out.exists()
    assert "Traceback" not in done.stderr and done.stderr.strip().count("\n") == 0, done.stderr
