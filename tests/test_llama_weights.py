"""Llama, Qwen2, Mistral and GPT-NeoX weights in our decoder: parity with ``transformers`` eager
(patterns, hidden states, logits) on tiny random models built from a config and saved offline,
covering grouped- and multi-query attention, q/k/v-only biases, sliding windows shorter than the
input, an explicit head_dim, partial rotary and the parallel residual; plus the loaders' refusals."""

from __future__ import annotations

import functools

import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import (
    GPTNeoXConfig,
    GPTNeoXForCausalLM,
    LlamaConfig,
    LlamaForCausalLM,
    MistralConfig,
    MistralForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
)

from attention_viz.errors import ModelError
from attention_viz.core.hooks import capture
from attention_viz.weights.llama import llama_config, load_llama
from attention_viz.weights.neox import load_neox, neox_config
from attention_viz.weights.safetensors_io import read_config

VOCAB, LAYERS, HEADS, D_MODEL, MAX_LEN, WINDOW = 300, 2, 8, 64, 256, 6
COMMON = dict(
    vocab_size=VOCAB, hidden_size=D_MODEL, intermediate_size=96, num_hidden_layers=LAYERS,
    num_attention_heads=HEADS, max_position_embeddings=MAX_LEN, bos_token_id=1, eos_token_id=2,
    initializer_range=0.15,  # peaked patterns (near-uniform ones would hide a q/k mix-up), finite scores
)  # fmt: skip

# name → (model class, config, loader, kv_heads)
MODELS = {
    "llama-gqa": (LlamaForCausalLM, LlamaConfig(**COMMON, num_key_value_heads=2, rope_theta=500.0), load_llama, 2),
    "llama-head-dim-bias": (
        LlamaForCausalLM,
        LlamaConfig(**COMMON, num_key_value_heads=4, head_dim=12, attention_bias=True, mlp_bias=True),
        load_llama,
        4,
    ),
    "qwen2-window-on-layer-1": (
        Qwen2ForCausalLM,
        Qwen2Config(**COMMON, num_key_value_heads=4, use_sliding_window=True, sliding_window=WINDOW, max_window_layers=1),
        load_llama,
        4,
    ),
    "mistral-mqa-window": (
        MistralForCausalLM,
        MistralConfig(**COMMON, num_key_value_heads=1, sliding_window=WINDOW),
        load_llama,
        1,
    ),
    "neox-parallel-quarter-rotary": (
        GPTNeoXForCausalLM,
        GPTNeoXConfig(**COMMON, rotary_pct=0.25, use_parallel_residual=True),
        load_neox,
        HEADS,
    ),
    "neox-sequential-half-rotary": (
        GPTNeoXForCausalLM,
        GPTNeoXConfig(**COMMON, rotary_pct=0.5, rotary_emb_base=1000, use_parallel_residual=False),
        load_neox,
        HEADS,
    ),
}


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    out = {}
    for name, (model_class, config, _, _) in MODELS.items():
        torch.manual_seed(0)
        out[name] = tmp_path_factory.mktemp(name)
        model_class(config).save_pretrained(out[name])
    return out


@functools.lru_cache(maxsize=None)
def load_both(folder: str, name: str):
    """transformers' model and ours, loaded once per folder (the folders live for the module)."""
    model_class, _, loader, _ = MODELS[name]
    return model_class.from_pretrained(folder, attn_implementation="eager").eval(), loader(folder)


def run_both(folder, name: str, ids: torch.Tensor):
    theirs, ours = load_both(str(folder), name)
    with torch.inference_mode():
        expected = theirs(ids, output_attentions=True, output_hidden_states=True)
        with capture(kinds=None) as recorded:
            hidden = ours(ids)
        logits = ours.logits(hidden)
    return expected, recorded, hidden, logits, ours


def inputs() -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    return [torch.randint(3, VOCAB, (1, n), generator=generator) for n in (1, 9, 40, MAX_LEN)]


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("ids", inputs(), ids=lambda t: f"len{t.size(1)}")
def test_patterns_hidden_states_and_logits_match_transformers(folders, name, ids):
    expected, recorded, hidden, logits, ours = run_both(folders[name], name, ids)
    n, d_k, kv_heads = ids.size(1), ours.config.d_k, MODELS[name][3]
    assert len(expected.attentions) == LAYERS
    if n >= 40:  # peaked (a uniform row over 40+ keys has max ≤ 0.025), so the comparison means something
        assert expected.attentions[-1].amax(-1).mean() > 0.1
    for i, attention in enumerate(expected.attentions):
        pattern = recorded[f"decoder.layers.{i}.self_attn.pattern"]
        assert pattern.shape == (1, HEADS, n, n)
        assert (pattern - attention).abs().max() <= 1e-5
        # grouped-query hooks: K and V per key/value head, q and scores per query head
        assert recorded[f"decoder.layers.{i}.self_attn.k"].shape == (1, kv_heads, n, d_k)
        assert recorded[f"decoder.layers.{i}.self_attn.v"].shape == (1, kv_heads, n, d_k)
        assert recorded[f"decoder.layers.{i}.self_attn.q"].shape == (1, HEADS, n, d_k)
        assert recorded[f"decoder.layers.{i}.self_attn.scores"].shape == (1, HEADS, n, n)
    assert (hidden - expected.hidden_states[-1]).abs().max() <= 1e-5
    assert (logits - expected.logits).abs().max() <= 1e-4 * max(1.0, expected.logits.abs().max().item())


def test_intermediate_hidden_states_match(folders):
    """The residual stream after layer 0 (a sliding-window model, a parallel-residual one)."""
    for name in ("mistral-mqa-window", "neox-parallel-quarter-rotary"):
        ids = inputs()[2]
        expected, _, _, _, ours = run_both(folders[name], name, ids)
        with torch.inference_mode():
            decoder = ours.decoder
            x = decoder.embed(ids)
            mask = torch.ones(ids.size(1), ids.size(1), dtype=torch.bool).tril()[None, None]
            if decoder.windows[0] is not None:
                mask = mask & torch.ones_like(mask).triu(1 - decoder.windows[0])
            after_0 = decoder.layers[0](x, mask)
        assert (after_0 - expected.hidden_states[1]).abs().max() <= 1e-5


def test_sliding_window_layers_see_only_the_window(folders):
    ids = inputs()[2]  # 40 tokens, window 6
    for name, windowed_layers in (("mistral-mqa-window", {0, 1}), ("qwen2-window-on-layer-1", {1})):
        _, recorded, _, _, _ = run_both(folders[name], name, ids)
        n = ids.size(1)
        distance = torch.arange(n)[:, None] - torch.arange(n)[None, :]
        outside = (distance >= WINDOW) | (distance < 0)
        for layer in range(LAYERS):
            pattern = recorded[f"decoder.layers.{layer}.self_attn.pattern"][0]
            assert torch.all(pattern[:, distance < 0] == 0.0)  # causal: exactly zero
            if layer in windowed_layers:
                assert torch.all(pattern[:, outside] == 0.0)
            else:
                assert pattern[:, distance >= WINDOW].sum() > 0.1  # a full layer reaches past the window
            assert torch.allclose(pattern.sum(-1), torch.ones(HEADS, n), atol=1e-5)


def test_configs_map_the_switches(folders):
    llama = llama_config(read_config(folders["llama-gqa"]))
    assert (llama.positional, llama.norm_type, llama.gated_ffn, llama.activation) == ("rotary", "rms", True, "silu")
    assert (llama.kv_heads, llama.rotary_base, llama.rotary_pct) == (2, 500.0, 1.0)
    assert not (llama.qkv_bias or llama.out_bias or llama.ffn_bias or llama.sliding_window)
    qwen = llama_config(read_config(folders["qwen2-window-on-layer-1"]))
    assert qwen.qkv_bias and not qwen.out_bias and not qwen.ffn_bias
    assert (qwen.sliding_window, qwen.full_attention_layers) == (WINDOW, (0,))
    mistral = llama_config(read_config(folders["mistral-mqa-window"]))
    assert (mistral.kv_heads, mistral.sliding_window, mistral.full_attention_layers) == (1, WINDOW, ())
    neox = neox_config(read_config(folders["neox-parallel-quarter-rotary"]))
    assert (neox.rotary_pct, neox.parallel_residual, neox.norm_type, neox.qkv_bias) == (0.25, True, "layer", True)
    sequential = neox_config(read_config(folders["neox-sequential-half-rotary"]))
    assert (sequential.rotary_pct, sequential.rotary_base, sequential.parallel_residual) == (0.5, 1000.0, False)


def test_older_config_spellings_are_read():
    old_llama = {**COMMON, "model_type": "llama", "rope_theta": 20000.0, "rope_scaling": None}
    old_llama = {k: v for k, v in old_llama.items() if k not in ("bos_token_id", "eos_token_id", "initializer_range")}
    assert llama_config(old_llama).rotary_base == 20000.0
    pythia = {**old_llama, "model_type": "gpt_neox", "rotary_pct": 0.25, "rotary_emb_base": 10000}
    assert (neox_config(pythia).rotary_pct, neox_config(pythia).parallel_residual) == (0.25, True)
    assert neox_config({k: v for k, v in pythia.items() if k != "rotary_pct"}).rotary_pct == 0.25  # the default


@pytest.mark.parametrize("change, message", [
    ({"rope_parameters": {"rope_type": "yarn", "rope_theta": 5e5, "factor": 8.0}}, "rotary scaling 'yarn'"),
    ({"hidden_act": "gelu"}, "hidden_act='gelu'"),
    ({"model_type": "gemma"}, "model_type 'gemma'"),
    ({"num_key_value_heads": 3}, "multiple of n_kv_heads"),
])  # fmt: skip
def test_unsupported_variants_are_refused(folders, change, message):
    config = {**read_config(folders["llama-gqa"]), **change}
    with pytest.raises(ModelError, match=message):
        llama_config(config)


def test_missing_and_unexpected_tensors_are_named(tmp_path, folders):
    source = folders["qwen2-window-on-layer-1"]
    weights = load_file(source / "model.safetensors")
    del weights["model.layers.1.self_attn.k_proj.bias"]
    weights["model.layers.0.extra.weight"] = torch.zeros(2)
    save_file(weights, tmp_path / "model.safetensors", metadata={"format": "pt"})
    (tmp_path / "config.json").write_text((source / "config.json").read_text())
    with pytest.raises(ModelError, match=r"missing layers\.1\.self_attn\.k_proj\.bias; unexpected layers\.0\.extra\.weight"):
        load_llama(tmp_path)


def test_shape_mismatch_is_one_line(tmp_path, folders):
    source = folders["neox-parallel-quarter-rotary"]
    weights = load_file(source / "model.safetensors")
    weights["gpt_neox.layers.0.mlp.dense_h_to_4h.weight"] = torch.zeros(10, D_MODEL)
    save_file(weights, tmp_path / "model.safetensors", metadata={"format": "pt"})
    (tmp_path / "config.json").write_text((source / "config.json").read_text())
    with pytest.raises(ModelError, match=r"layers\.0\.mlp\.dense_h_to_4h\.weight has shape \(10, 64\), expected \(96, 64\)") as error:
        load_neox(tmp_path)
    assert "\n" not in str(error.value)
