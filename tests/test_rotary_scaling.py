"""Rescaled rotary frequencies (Llama 3.1/3.2's ``llama3``, position interpolation's ``linear``):
the inverse frequencies against the formula of Meta's Llama 3.1 reference written out here in float64,
the config spellings (transformers 5.x ``rope_parameters``, the hub's ``rope_scaling``), the
refusals, and tiny random Llama-3.1 folders (and a GPT-NeoX with half its dimensions rotating) that
run in our decoder with transformers' patterns and logits at a length past their pretraining length,
where the rescaling changes the patterns."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from transformers import GPTNeoXConfig, GPTNeoXForCausalLM, LlamaConfig, LlamaForCausalLM

from attention_viz.backends.ours_decoder import OursDecoderBackend
from attention_viz.backends.registry import load_backend
from attention_viz.core.positional import RotaryScaling, inverse_frequencies
from attention_viz.errors import ModelError
from attention_viz.weights.llama import build_llama, llama_config
from attention_viz.weights.neox import build_neox
from attention_viz.weights.rotary_config import rotary_settings
from attention_viz.weights.safetensors_io import SafetensorsFolder, read_config

from test_ours_decoder import TEXT, save_tokenizer

# Llama-3.1-8B's rotary: d_k = 128, θ base 500,000, llama3 scaling (factor 8, low 1, high 4, L = 8192)
LLAMA31 = RotaryScaling("llama3", 8.0, 1.0, 4.0, 8192)
ORIGINAL = 16  # the tiny folder's pretraining length: its test input is longer
LONG_TEXT = " ".join([TEXT] * 3)  # 52 tokens with <s>


def meta_llama3_frequencies(d: int, base: float, scaling: RotaryScaling) -> list[float]:
    """Meta's Llama 3.1 ``apply_scaling``, one frequency at a time, in float64."""
    low_freq_wavelen = scaling.original_max_len / scaling.low_freq_factor
    high_freq_wavelen = scaling.original_max_len / scaling.high_freq_factor
    out = []
    for i in range(0, d, 2):
        freq = 1.0 / base ** (i / d)
        wavelen = 2 * math.pi / freq
        if wavelen < high_freq_wavelen:  # turns many times within the pretraining length: kept
            out.append(freq)
        elif wavelen > low_freq_wavelen:  # not one turn within it: slowed by the factor
            out.append(freq / scaling.factor)
        else:
            smooth = (scaling.original_max_len / wavelen - scaling.low_freq_factor) / (
                scaling.high_freq_factor - scaling.low_freq_factor
            )
            out.append((1 - smooth) * freq / scaling.factor + smooth * freq)
    return out


def test_llama3_frequencies_equal_metas_formula_in_all_three_bands():
    expected = np.array(meta_llama3_frequencies(128, 500000.0, LLAMA31))
    unscaled = np.array([1.0 / 500000.0 ** (i / 128) for i in range(0, 128, 2)])
    kept, slowed = expected == unscaled, np.isclose(expected, unscaled / 8, rtol=1e-12)
    assert kept.sum() and slowed.sum() and (~kept & ~slowed).sum()  # every band has pairs
    exact = inverse_frequencies(128, 500000.0, LLAMA31, torch.float64).numpy()
    assert np.abs(exact - expected).max() <= 1e-15
    model = inverse_frequencies(128, 500000.0, LLAMA31).numpy()  # float32, as the model runs
    assert np.abs(model / expected - 1).max() <= 1e-6


def test_linear_scaling_divides_every_frequency():
    expected = np.array([1.0 / 10000.0 ** (i / 64) / 4 for i in range(0, 64, 2)])
    got = inverse_frequencies(64, 10000.0, RotaryScaling("linear", 4.0), torch.float64).numpy()
    assert np.abs(got - expected).max() <= 1e-15


HUB_LLAMA31 = {  # as Llama-3.1-8B's config.json on the hub spells it
    "rope_theta": 500000.0, "max_position_embeddings": 131072,
    "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192},
}  # fmt: skip


def test_both_spellings_give_the_same_settings():
    assert rotary_settings(HUB_LLAMA31) == (500000.0, 1.0, LLAMA31)
    transformers_5 = {"max_position_embeddings": 131072,
                      "rope_parameters": {**HUB_LLAMA31["rope_scaling"], "rope_theta": 500000.0}}  # fmt: skip
    assert rotary_settings(transformers_5) == (500000.0, 1.0, LLAMA31)
    assert rotary_settings({"rope_scaling": {"type": "linear", "factor": 2.0}})[2] == RotaryScaling("linear", 2.0)
    assert rotary_settings({"rope_scaling": None, "rope_theta": 5.0}) == (5.0, 1.0, None)


@pytest.mark.parametrize("params, message", [
    ({"rope_type": "yarn", "factor": 4.0}, "rotary scaling 'yarn' is not implemented"),
    ({"rope_type": "dynamic", "factor": 4.0}, "rotary scaling 'dynamic' is not implemented"),
    ({"rope_type": "longrope", "factor": 4.0}, "rotary scaling 'longrope' is not implemented"),
    ({"rope_type": "llama3", "factor": 8.0}, "llama3 rotary scaling lacks low_freq_factor, high_freq_factor"),
    ({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 4.0, "high_freq_factor": 1.0}, "low_freq_factor <"),
    ({"rope_type": "linear"}, "linear rotary scaling lacks factor"),
])  # fmt: skip
def test_other_rescalings_are_refused_in_one_line_naming_them(params, message):
    with pytest.raises(ModelError, match=message):
        rotary_settings({"max_position_embeddings": 64, "rope_scaling": params})


SCALINGS = {
    "linear": {"factor": 4.0},
    "llama3": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": ORIGINAL},
}  # fmt: skip
# folder → (model class, config class, its own settings, our builder, rope_type, rotated share)
FOLDERS = {
    "llama-llama3": (LlamaForCausalLM, LlamaConfig, {"num_key_value_heads": 2}, build_llama, "llama3", 1.0),
    "llama-linear": (LlamaForCausalLM, LlamaConfig, {"num_key_value_heads": 2}, build_llama, "linear", 1.0),
    "neox-half-rotary-llama3": (GPTNeoXForCausalLM, GPTNeoXConfig, {}, build_neox, "llama3", 0.5),
}


def save_scaled(folder, name: str) -> str:
    """A tiny random model with rotary scaling, a tokenizer beside it, saved as safetensors."""
    model_class, config_class, own, _, rope_type, share = FOLDERS[name]
    torch.manual_seed(0)
    config = config_class(
        vocab_size=save_tokenizer(folder), hidden_size=64, intermediate_size=96, num_hidden_layers=2,
        num_attention_heads=4, max_position_embeddings=64, initializer_range=0.15, **own,
        rope_parameters={"rope_type": rope_type, "rope_theta": 10000.0, "partial_rotary_factor": share,
                         **SCALINGS[rope_type]},
    )  # fmt: skip
    model_class(config).save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="module", params=list(FOLDERS))
def scaled(request, tmp_path_factory) -> tuple[str, str]:
    return request.param, save_scaled(tmp_path_factory.mktemp(request.param), request.param)


def test_a_scaled_model_runs_in_ours_with_transformers_patterns_and_logits(scaled):
    name, folder = scaled
    model_class, _, _, build, _, share = FOLDERS[name]
    backend = load_backend(f"hf:{folder}")
    assert isinstance(backend, OursDecoderBackend)
    result = backend.run(LONG_TEXT, kinds=None)
    assert result.meta["implementation"] == "ours"
    ids = torch.tensor([result.tokens.ids])
    assert ids.size(1) > 3 * ORIGINAL
    theirs = model_class.from_pretrained(folder, attn_implementation="eager").eval()
    ours = build(read_config(folder), SafetensorsFolder(folder))
    plain = {"rope_theta": 10000.0, "partial_rotary_factor": share}
    unscaled = build({**read_config(folder), "rope_parameters": plain}, SafetensorsFolder(folder))
    with torch.inference_mode():
        expected = theirs(ids, output_attentions=True)
        logits = ours.logits(ours(ids))
        wrong = unscaled.logits(unscaled(ids))
    for layer, attention in enumerate(expected.attentions):
        assert np.abs(result.pattern(("decoder", "self_attn"), layer) - attention[0].numpy()).max() <= 1e-5
    assert (logits - expected.logits).abs().max() <= 1e-4 * max(1.0, expected.logits.abs().max().item())
    assert (wrong - expected.logits).abs().max() > 1e-2  # the rescaling matters at this length


def test_the_8b_configuration_maps_to_our_config():
    hub = {"model_type": "llama", "vocab_size": 128256, "hidden_size": 4096, "intermediate_size": 14336,
           "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, **HUB_LLAMA31}  # fmt: skip
    config = llama_config(hub)
    assert (config.rotary_base, config.rotary_scaling, config.max_len) == (500000.0, LLAMA31, 131072)
