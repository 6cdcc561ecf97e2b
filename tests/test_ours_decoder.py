"""``hf:`` routing: a folder whose architecture we implement (Llama, Qwen2, Mistral, GPT-NeoX, GPT-2)
opens in our decoder with every hook kind and the same patterns as ``transformers``; anything else,
including variants we do not reproduce, runs in ``transformers``; meta says which. A hub id that is
neither local nor cached fails fast with a message on how to allow downloads."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import huggingface_hub
import numpy as np
import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers, processors
from transformers import (
    AutoModelForCausalLM,
    GPT2Config,
    GPT2LMHeadModel,
    GPTNeoXConfig,
    GPTNeoXForCausalLM,
    LlamaConfig,
    LlamaForCausalLM,
    MistralConfig,
    MistralForCausalLM,
    PreTrainedTokenizerFast,
    Qwen2Config,
    Qwen2ForCausalLM,
)

from attention_viz.backends.hf import HFBackend
from attention_viz.backends.ours_decoder import OursDecoderBackend, open_in_ours
from attention_viz.backends.registry import load_backend
from attention_viz.errors import ModelError
from attention_viz.core.hooks import KINDS

WORDS = "the cat sat on mat a dog ran to park and it was tired because".split()
TEXT = "the cat sat on the mat because it was tired and the dog ran to the park"
SIZES = dict(hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=64)
ARCHITECTURES = {
    "llama": lambda n: LlamaForCausalLM(LlamaConfig(vocab_size=n, num_key_value_heads=2, **SIZES)),
    "qwen2": lambda n: Qwen2ForCausalLM(Qwen2Config(vocab_size=n, num_key_value_heads=2, **SIZES)),
    "mistral": lambda n: MistralForCausalLM(MistralConfig(vocab_size=n, num_key_value_heads=1, sliding_window=4, **SIZES)),
    "gpt_neox": lambda n: GPTNeoXForCausalLM(GPTNeoXConfig(vocab_size=n, **SIZES)),
    "gpt2": lambda n: GPT2LMHeadModel(GPT2Config(vocab_size=n, n_embd=32, n_layer=2, n_head=4, n_positions=64)),
}


def save_tokenizer(folder: Path) -> int:
    """A word-level tokenizer that starts every text with <s>, saved as transformers would."""
    vocab = {token: i for i, token in enumerate(["<unk>", "<s>", "</s>", *WORDS])}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.add_special_tokens(["<unk>", "<s>", "</s>"])
    tokenizer.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>", unk_token="<unk>").save_pretrained(
        folder
    )
    return len(vocab)


def save(folder: Path, architecture: str, **config_changes) -> Path:
    torch.manual_seed(0)
    n = save_tokenizer(folder)
    model = ARCHITECTURES[architecture](n)
    for key, value in config_changes.items():
        setattr(model.config, key, value)
    model.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    return {name: save(tmp_path_factory.mktemp(name), name) for name in ARCHITECTURES}


@pytest.mark.parametrize("architecture", list(ARCHITECTURES))
def test_supported_architectures_run_in_ours_with_transformers_patterns(folders, architecture):
    backend = load_backend(f"hf:{folders[architecture]}")
    assert isinstance(backend, OursDecoderBackend) and backend.kinds == KINDS
    result = backend.run(TEXT, kinds=None)
    assert result.meta["implementation"] == "ours" and result.meta["architecture"] == architecture
    assert result.tokens.labels[0] == "<s>" and result.tokens.labels[1] == "the"
    theirs = AutoModelForCausalLM.from_pretrained(folders[architecture], attn_implementation="eager").eval()
    ids = torch.tensor([result.tokens.ids])
    with torch.inference_mode():
        out = theirs(ids, output_attentions=True)
    expected = out.attentions
    # forward(): what an ablation is measured on, log p(next token), is transformers' too
    log_probs = out.logits[0, :-1].log_softmax(-1).gather(-1, ids[0, 1:, None])[:, 0].numpy()
    assert np.abs(backend.forward(TEXT)[1].log_probs - log_probs).max() <= 1e-4
    kv_heads = result.meta["kv_heads"]
    for layer, attention in enumerate(expected):
        pattern = result.pattern(("decoder", "self_attn"), layer)
        assert np.abs(pattern - attention[0].numpy()).max() <= 1e-5
        assert result.array(("decoder", "self_attn"), layer, "k").shape[0] == kv_heads
        assert np.all(np.triu(pattern, 1) == 0.0)


def test_other_architectures_and_unsupported_variants_run_in_transformers(tmp_path, folders):
    scaled = save(tmp_path / "scaled", "llama")
    config = (scaled / "config.json").read_text().replace('"rope_type": "default"', '"rope_type": "dynamic", "factor": 2.0')
    (scaled / "config.json").write_text(config)
    assert open_in_ours(str(scaled)) is None
    backend = load_backend(f"hf:{scaled}")
    assert isinstance(backend, HFBackend)
    assert backend.run(TEXT).meta["implementation"] == "transformers"


def test_a_broken_supported_folder_is_reported_not_passed_on(tmp_path, folders):
    for name in ("config.json", "model.safetensors"):
        shutil.copy(folders["llama"] / name, tmp_path / name)
    with pytest.raises(ModelError, match="no usable tokenizer"):
        open_in_ours(str(tmp_path))
    (tmp_path / "model.safetensors").unlink()
    (tmp_path / "pytorch_model.bin").write_bytes(b"\x80\x04")
    with pytest.raises(ModelError, match="pickle checkpoint"):
        open_in_ours(str(tmp_path))


def test_cached_hub_snapshot_runs_in_ours(tmp_path, folders, monkeypatch):
    repo = tmp_path / "models--tiny--llama"
    shutil.copytree(folders["llama"], repo / "snapshots" / "abc123")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("abc123")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))
    backend = open_in_ours("tiny/llama")
    assert isinstance(backend, OursDecoderBackend) and backend.name == "hf:tiny/llama"
    with pytest.raises(ModelError, match="not available offline.*ATTENTION_VIZ_ALLOW_DOWNLOAD=1"):
        open_in_ours("tiny/not-cached")
    monkeypatch.setenv("ATTENTION_VIZ_ALLOW_DOWNLOAD", "1")
    assert open_in_ours("tiny/not-cached") is None  # the transformers backend downloads it


def test_an_unknown_hub_id_fails_fast_with_how_to_allow_it():
    # A fresh interpreter without HF_HUB_OFFLINE (huggingface_hub reads it at import); only the load is timed.
    script = (
        "import time\n"
        "from attention_viz.backends.registry import load_backend\n"
        "from attention_viz.errors import ModelError\n"
        "start = time.perf_counter()\n"
        "try:\n"
        "    load_backend('hf:attention-viz-tests/no-such-llama')\n"
        "except ModelError as error:\n"
        "    print(f'{time.perf_counter() - start:.3f}', error)\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "ATTENTION_VIZ_ALLOW_DOWNLOAD")}
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-c", script], cwd=root, env=env, capture_output=True, text=True, timeout=120)
    seconds, message = done.stdout.strip().split(" ", 1)
    assert float(seconds) < 2.0
    assert "ATTENTION_VIZ_ALLOW_DOWNLOAD=1" in message and "\n" not in message


def test_the_all_heads_grid_frames_the_query_heads_that_share_a_kv_head(folders):
    from apphelpers import app, charts

    result = load_backend(f"hf:{folders['llama']}").run(TEXT, kinds=("pattern", "v"))
    assert result.kv_heads(("decoder", "self_attn")) == 2  # 4 query heads, 2 K/V heads
    at = app(model=f"hf:{folders['llama']}", text=TEXT, view="grid")
    assert not at.exception and not at.error
    assert any("4 query heads share 2 key/value heads" in c.value for c in at.caption)
    grid = charts(at)[0]
    assert grid["layout"]["xaxis"]["ticktext"] == ["head 0<br>kv 0", "head 1<br>kv 0", "head 2<br>kv 1", "head 3<br>kv 1"]
    assert len(grid["layout"]["shapes"]) == 2  # one frame per K/V head
    plain = app(text=TEXT, view="grid")  # minilm: every head has its own K and V, no frames
    assert not charts(plain)[0]["layout"].get("shapes") and not any("key/value heads" in c.value for c in plain.caption)
