"""A load uses the checkpoint's weights or says why not (issue 28).

A checkpoint that does not match its config.json is refused with the tensors named (in transformers
and in ours, in the backend and on the command line); a checkpoint saved without its LM head
(LlamaModel, Qwen2Model, MistralModel, GPTNeoXModel) runs in ours with transformers' patterns, and
what needs next-token logits says so; value norms and ablation work on an hf: folder that runs in
ours; inside the operator's model roots a file linked out of the root is refused."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import (
    AutoModel,
    AutoModelForCausalLM,
    BertConfig,
    BertForMaskedLM,
    BertModel,
    DistilBertConfig,
    DistilBertModel,
    GPTNeoXConfig,
    GPTNeoXModel,
    LlamaConfig,
    LlamaModel,
    MistralConfig,
    MistralModel,
    Qwen2Config,
    Qwen2Model,
)

from test_hf_backend import HEADS, save_bert
from test_ours_decoder import SIZES, TEXT, save, save_tokenizer

from attention_viz.runtime.access import MODEL_ROOTS_ENV
from attention_viz.backends import registry
from attention_viz.backends.hf import HFBackend
from attention_viz.backends.ours_decoder import OursDecoderBackend
from attention_viz.cli import main
from attention_viz.errors import ModelError
from attention_viz.backends.head_effects import compare
from attention_viz.analysis.ablation import Ablation
from attention_viz.runtime.model_cache import ModelCache
from attention_viz.core.names import DECODER_SELF, ENCODER_SELF
from attention_viz.core.result import AttentionResult

ROOT = Path(__file__).resolve().parents[1]
SENTENCE = "the cat sat on the mat"
BERT_SIZES = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=HEADS, intermediate_size=64,
                  max_position_embeddings=64, initializer_range=0.5)
# the bare decoders, as embedding models ship them: no LM head, names without the model's prefix
BASE_MODELS = {
    "llama": (lambda n: LlamaModel(LlamaConfig(vocab_size=n, num_key_value_heads=2, **SIZES)), "LlamaModel"),
    "qwen2": (lambda n: Qwen2Model(Qwen2Config(vocab_size=n, num_key_value_heads=2, **SIZES)), "Qwen2Model"),
    "mistral": (lambda n: MistralModel(MistralConfig(vocab_size=n, num_key_value_heads=1, sliding_window=4, **SIZES)),
                "MistralModel"),
    "gpt_neox": (lambda n: GPTNeoXModel(GPTNeoXConfig(vocab_size=n, **SIZES)), "GPTNeoXModel"),
}


def save_bare(folder: Path, architecture: str) -> Path:
    torch.manual_seed(0)
    BASE_MODELS[architecture][0](save_tokenizer(folder)).save_pretrained(folder)
    return folder


def bert_folder(folder: Path, model) -> Path:
    """A BERT tokenizer beside ``model``'s weights and config (DistilBERT reads the same vocabulary)."""
    save_bert(folder)
    model.save_pretrained(folder)  # replaces the BertModel's config.json and model.safetensors
    return folder


def tensor_names(folder: Path) -> set[str]:
    return set(load_file(folder / "model.safetensors"))


def rewrite(source: Path, folder: Path, change) -> Path:
    """A copy of ``source`` whose tensors went through ``change`` (a dict → dict)."""
    shutil.copytree(source, folder)
    save_file(change(load_file(source / "model.safetensors")), folder / "model.safetensors", metadata={"format": "pt"})
    return folder


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    base = tmp_path_factory.mktemp("honest")
    torch.manual_seed(0)
    out = {
        "distilbert": bert_folder(base / "distilbert", DistilBertModel(DistilBertConfig(
            vocab_size=64, dim=32, n_layers=2, n_heads=HEADS, hidden_dim=64, max_position_embeddings=64))),
        "bert-no-pooler": bert_folder(base / "bert-no-pooler", BertModel(BertConfig(vocab_size=64, **BERT_SIZES),
                                                                        add_pooling_layer=False)),
        "bert-mlm": bert_folder(base / "bert-mlm", BertForMaskedLM(BertConfig(vocab_size=64, **BERT_SIZES))),
    }
    out |= {name: save(base / name, name) for name in ("llama", "gpt_neox", "gpt2")}
    out |= {f"bare-{name}": save_bare(base / f"bare-{name}", name) for name in BASE_MODELS}
    # DistilBERT's config.json over another architecture's weights: not one tensor matches
    out["mismatched"] = base / "mismatched"
    shutil.copytree(out["distilbert"], out["mismatched"])
    shutil.copy(out["gpt2"] / "model.safetensors", out["mismatched"] / "model.safetensors")
    return out


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    """Every test loads anew (the registry's cache would answer a second load of a folder)."""
    monkeypatch.setattr(registry, "_loaded", ModelCache())
    monkeypatch.delenv(MODEL_ROOTS_ENV, raising=False)
    return monkeypatch


def refusal(name: str) -> str:
    with pytest.raises(ModelError) as error:
        registry.load_backend(name)
    assert "\n" not in str(error.value)
    return str(error.value)


# -- a checkpoint that does not match its config ------------------------------------------------


def test_another_architectures_weights_under_a_distilbert_config_are_refused_by_name(folders):
    assert registry.load_backend(f"hf:{folders['distilbert']}").run(SENTENCE).meta["implementation"] == "transformers"
    message = refusal(f"hf:{folders['mismatched']}")
    assert "does not match its config.json" in message
    # the first five of each kind, then how many more: DistilBERT's 36 tensors missing, GPT-2's 28 left over
    assert ("missing embeddings.LayerNorm.bias, embeddings.LayerNorm.weight, embeddings.position_embeddings.weight, "
            "embeddings.word_embeddings.weight, transformer.layer.0.attention.k_lin.bias and 31 more") in message
    assert "unexpected transformer.h.0.attn.c_attn.bias" in message and "and 23 more" in message


def test_the_command_line_refuses_it_in_one_line(folders, tmp_path):
    out = tmp_path / "r.npz"
    done = subprocess.run(
        [sys.executable, "-m", "attention_viz", "run", "--model", f"hf:{folders['mismatched']}", "--text", SENTENCE,
         "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode != 0 and not out.exists()
    assert "missing embeddings.LayerNorm.bias" in done.stderr and "Traceback" not in done.stderr
    assert done.stderr.strip().count("\n") == 0


def test_the_app_refuses_it_in_one_line(folders):
    from apphelpers import app

    at = app(model=f"hf:{folders['mismatched']}", text=SENTENCE, view="head")
    assert not at.exception
    errors = [e.value.replace("\\", "") for e in at.error]
    assert len(errors) == 1 and "does not match its config.json" in errors[0] and "missing embeddings" in errors[0]


def test_a_mis_shaped_tensor_in_transformers_is_named(folders, tmp_path):
    def widen(tensors):
        tensors["encoder.layer.1.attention.self.key.weight"] = torch.zeros(16, 32)
        return tensors

    message = refusal(f"hf:{rewrite(folders['bert-no-pooler'], tmp_path / 'bert', widen)}")
    assert "mis-shaped encoder.layer.1.attention.self.key.weight (16, 32) (expected (32, 32))" in message
    assert "missing" not in message and "unexpected" not in message


@pytest.mark.parametrize("folder, model_class", [("bert-no-pooler", BertModel), ("bert-mlm", BertModel)])
def test_what_transformers_leaves_out_on_purpose_still_loads(folders, folder, model_class):
    """A BertModel saved without its pooler; a BertForMaskedLM (its cls.* head unused by the bare model)."""
    backend = registry.load_backend(f"hf:{folders[folder]}")
    assert isinstance(backend, HFBackend)
    result = backend.run(SENTENCE)
    theirs = model_class.from_pretrained(folders[folder], attn_implementation="eager").eval()
    with torch.inference_mode():
        expected = theirs(torch.tensor([result.tokens.ids]), output_attentions=True).attentions
    for layer, attention in enumerate(expected):
        assert np.abs(result.pattern(ENCODER_SELF, layer) - attention[0].numpy()).max() <= 1e-6


def test_stale_buffers_of_old_checkpoints_still_load(tmp_path):
    """A GPT-2 variant that runs in transformers (layer-scaled attention), with the causal-mask buffers
    older GPT-2 checkpoints carry: transformers no longer has them, and they mean nothing."""
    folder = save(tmp_path / "source", "gpt2", scale_attn_by_inverse_layer_idx=True)
    old = rewrite(folder, tmp_path / "old", lambda t: t | {"transformer.h.0.attn.masked_bias": torch.tensor(-1e4),
                                                          "transformer.h.0.attn.bias": torch.ones(1, 1, 64, 64)})
    assert registry.load_backend(f"hf:{old}").run(TEXT).meta["implementation"] == "transformers"


@pytest.mark.parametrize("architecture, tensor", [
    ("llama", "model.layers.1.self_attn.k_proj.weight"),
    ("gpt_neox", "gpt_neox.layers.0.attention.query_key_value.weight"),
    ("gpt2", "transformer.h.1.mlp.c_fc.weight"),
])
def test_a_mis_shaped_tensor_in_ours_is_named(folders, tmp_path, architecture, tensor):
    def grow(tensors):
        shape = tensors[tensor].shape
        tensors[tensor] = torch.zeros(shape[0] + 1, *shape[1:])
        return tensors

    shape = load_file(folders[architecture] / "model.safetensors")[tensor].shape
    message = refusal(f"hf:{rewrite(folders[architecture], tmp_path / architecture, grow)}")
    name = tensor.split(".", 1)[1]  # the loaders name tensors without the task model's prefix
    assert f"{name} has shape {(shape[0] + 1, *shape[1:])}, expected {tuple(shape)}" in message


def test_a_causal_lm_checkpoint_without_its_head_is_refused(folders, tmp_path):
    headless = rewrite(folders["llama"], tmp_path / "llama", lambda t: {k: v for k, v in t.items() if k != "lm_head.weight"})
    assert "missing lm_head.weight" in refusal(f"hf:{headless}")


# -- checkpoints saved without an LM head -----------------------------------------------------------


@pytest.mark.parametrize("architecture", list(BASE_MODELS))
def test_a_bare_decoder_runs_in_ours_with_transformers_patterns(folders, architecture):
    folder = folders[f"bare-{architecture}"]
    names = tensor_names(folder)  # what save_pretrained of the bare model writes: no prefix, no head
    assert not any(n.startswith(("model.", "gpt_neox.", "lm_head", "embed_out")) for n in names)
    assert {"layers.0.input_layernorm.weight"} <= names
    backend = registry.load_backend(f"hf:{folder}")
    assert isinstance(backend, OursDecoderBackend)
    result = backend.run(TEXT, kinds=None)
    assert result.meta["implementation"] == "ours"
    ids = torch.tensor([result.tokens.ids])
    theirs = AutoModel.from_pretrained(folder, attn_implementation="eager").eval()
    with torch.inference_mode():
        expected = theirs(ids, output_attentions=True)
        hidden = backend.model(ids)  # the checkpoint's every weight at work, final norm included
    assert len(expected.attentions) == 2
    for layer, attention in enumerate(expected.attentions):
        assert np.abs(result.pattern(DECODER_SELF, layer) - attention[0].numpy()).max() <= 1e-5
    assert np.abs(hidden.numpy() - expected.last_hidden_state.numpy()).max() <= 1e-4


@pytest.mark.parametrize("architecture", ["llama", "gpt_neox"])
def test_next_token_views_on_a_bare_decoder_say_why_not(folders, tmp_path, capsys, architecture):
    folder = folders[f"bare-{architecture}"]
    sentence = f"this checkpoint has no LM head (saved as {BASE_MODELS[architecture][1]}): next-token views need one"
    backend = registry.load_backend(f"hf:{folder}")
    with pytest.raises(ModelError, match=sentence.replace("(", r"\(").replace(")", r"\)")):
        compare(backend, TEXT, Ablation(((DECODER_SELF, 0, 1),)))
    out = tmp_path / "r.npz"
    assert main(["run", "--model", f"hf:{folder}", "--text", TEXT, "--ablate", "0.1", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert sentence in err and err.count("\n") == 1 and not out.exists()
    # patterns and value norms need no head
    assert main(["run", "--model", f"hf:{folder}", "--text", TEXT, "--value-norms", "--out", str(out)]) == 0


# -- value norms and ablation on an hf: folder that runs in ours -----------------------------------------


def test_value_norms_on_an_hf_llama_folder_from_the_command_line(folders, tmp_path):
    out = tmp_path / "norms.npz"
    assert main(["run", "--model", f"hf:{folders['llama']}", "--text", TEXT, "--value-norms", "--kinds", "pattern,v",
                 "--out", str(out)]) == 0
    result = AttentionResult.load_npz(out)
    assert result.meta["implementation"] == "ours"
    w_o = load_file(folders["llama"] / "model.safetensors")["model.layers.1.self_attn.o_proj.weight"].numpy()
    pattern, v = result.pattern(DECODER_SELF, 1), result.array(DECODER_SELF, 1, "v")
    norms = result.array(DECODER_SELF, 1, "value_norm")
    d_k = v.shape[-1]
    assert v.shape[0] == 2 and pattern.shape[0] == 4  # 4 query heads read 2 value heads
    for head in range(4):  # ‖α_ij v_j W_O^h‖, the value head of query head h being h // 2
        f = v[head // 2] @ w_o[:, head * d_k : (head + 1) * d_k].T
        np.testing.assert_allclose(norms[head], pattern[head] * np.linalg.norm(f, axis=-1), rtol=1e-4, atol=1e-6)


def test_ablation_on_an_hf_llama_folder_from_the_command_line(folders, tmp_path):
    out = tmp_path / "ablated.npz"
    assert main(["run", "--model", f"hf:{folders['llama']}", "--text", TEXT, "--kinds", "pattern,context",
                 "--ablate", "1.2", "--out", str(out)]) == 0
    result = AttentionResult.load_npz(out)
    assert result.meta["implementation"] == "ours"
    assert result.meta["ablation"] == {"mode": "zero", "heads": ["decoder 1.2"]}
    assert not result.array(DECODER_SELF, 1, "context")[2].any() and result.array(DECODER_SELF, 1, "context")[1].any()
    assert len(result.meta["output"]["log_probs"]) == len(result.tokens) - 1


def test_the_unablated_next_token_log_probs_are_transformers(folders):
    backend = registry.load_backend(f"hf:{folders['llama']}")
    result, outputs = backend.forward(TEXT)
    ids = torch.tensor([result.tokens.ids])
    theirs = AutoModelForCausalLM.from_pretrained(folders["llama"], attn_implementation="eager").eval()
    with torch.inference_mode():
        log_probs = theirs(ids).logits[0].log_softmax(-1)
    expected = log_probs[:-1].gather(-1, ids[0, 1:, None])[:, 0].numpy()
    assert np.abs(outputs.log_probs - expected).max() <= 1e-4


# -- files inside a model root ---------------------------------------------------------------------------


@pytest.mark.parametrize("file", ["config.json", "model.safetensors", "tokenizer.json"])
def test_a_file_linked_out_of_the_root_is_refused_and_its_copy_loads(folders, tmp_path, fresh, file):
    root, outside = tmp_path / "models", tmp_path / "outside"
    shutil.copytree(folders["llama"], root / "copied")
    shutil.copytree(folders["llama"], root / "linked")
    outside.mkdir()
    shutil.move(root / "linked" / file, outside / file)
    (root / "linked" / file).symlink_to(outside / file)
    fresh.setenv(MODEL_ROOTS_ENV, str(root))
    message = refusal(f"hf:{root / 'linked'}")
    assert message == refusal(f"hf:{outside}")  # the one refusal, as for a folder outside
    assert MODEL_ROOTS_ENV in message and file not in message
    assert registry.load_backend(f"hf:{root / 'copied'}").run(TEXT).meta["implementation"] == "ours"
    (root / "inner").symlink_to(root / "copied", target_is_directory=True)  # a link that stays inside is fine
    assert registry.load_backend("hf:inner").run(TEXT).meta["implementation"] == "ours"


def test_a_shard_index_cannot_point_out_of_the_folder(folders, tmp_path):
    folder = tmp_path / "sharded"
    shutil.copytree(folders["llama"], folder)
    (folder / "model.safetensors").rename(tmp_path / "elsewhere.safetensors")
    weight_map = {name: "../elsewhere.safetensors" for name in load_file(tmp_path / "elsewhere.safetensors")}
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    assert "names shards outside the folder: ../elsewhere.safetensors" in refusal(f"hf:{folder}")
