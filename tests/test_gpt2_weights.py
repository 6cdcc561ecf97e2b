"""GPT-2 weights in our decoder-only Transformer: parity with ``transformers`` (patterns, hidden
states, logits), and the safetensors-only folder rules with their error messages."""

import json

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel, GPT2Model

from attention_viz.errors import ModelError
from attention_viz.core.hooks import capture
from attention_viz.core.model import Transformer
from attention_viz.weights.gpt2 import gpt2_config, load_gpt2, load_gpt2_state
from attention_viz.weights.safetensors_io import read_config, read_safetensors

VOCAB, LAYERS, HEADS, D_MODEL, MAX_LEN = 500, 2, 4, 64, 128


def tiny_config() -> GPT2Config:
    # initializer_range 0.5 (GPT-2 uses 0.02): near-uniform attention would hide a q/k mix-up.
    return GPT2Config(
        n_layer=LAYERS, n_head=HEADS, n_embd=D_MODEL, n_positions=MAX_LEN, vocab_size=VOCAB,
        bos_token_id=VOCAB - 1, eos_token_id=VOCAB - 1, initializer_range=0.5,
    )  # fmt: skip


@pytest.fixture(scope="module")
def lm_folder(tmp_path_factory):
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("gpt2-lm")
    GPT2LMHeadModel(tiny_config()).save_pretrained(folder, safe_serialization=True)
    return folder


@pytest.fixture(scope="module")
def theirs(lm_folder):
    return GPT2LMHeadModel.from_pretrained(lm_folder, attn_implementation="eager").eval()


@pytest.fixture(scope="module")
def ours(lm_folder):
    return load_gpt2(lm_folder)


def inputs() -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    return [torch.randint(0, VOCAB, (1, n), generator=generator) for n in (1, 5, 37, MAX_LEN)]


def test_config_maps_gpt2_hyperparameters(lm_folder):
    config = gpt2_config(read_config(lm_folder))
    assert (config.shape, config.positional, config.norm) == ("decoder-only", "learned", "pre")
    assert (config.vocab_size, config.d_model, config.h, config.N) == (VOCAB, D_MODEL, HEADS, LAYERS)
    assert (config.d_ff, config.max_len, config.activation) == (4 * D_MODEL, MAX_LEN, "gelu_tanh")
    assert config.tie_embeddings and not config.scale_embeddings and config.dropout == 0.0


@pytest.mark.parametrize("ids", inputs(), ids=lambda t: f"len{t.size(1)}")
def test_patterns_hidden_states_and_logits_match_transformers(ours, theirs, ids):
    with torch.inference_mode():
        expected = theirs(ids, output_attentions=True, output_hidden_states=True)
        with capture() as recorded:
            hidden = ours(ids)
        logits = ours.logits(hidden)
    assert len(expected.attentions) == LAYERS
    assert expected.attentions[-1].amax(-1).mean() > 0.5  # peaked, so the comparison means something
    for i, attention in enumerate(expected.attentions):
        pattern = recorded[f"decoder.layers.{i}.self_attn.pattern"]
        assert pattern.shape == (1, HEADS, ids.size(1), ids.size(1))
        assert (pattern - attention).abs().max() <= 1e-5
    assert (hidden - expected.hidden_states[-1]).abs().max() <= 1e-4  # after ln_f, as ours
    assert (logits - expected.logits).abs().max() <= 1e-4


def test_checkpoint_without_transformer_prefix_loads_the_same(tmp_path, ours):
    torch.manual_seed(0)
    base = GPT2Model(tiny_config())
    base.save_pretrained(tmp_path, safe_serialization=True)
    assert not any(k.startswith("transformer.") for k in read_safetensors(tmp_path))
    model = load_gpt2(tmp_path)
    reference = GPT2Model.from_pretrained(tmp_path, attn_implementation="eager").eval()
    ids = inputs()[2]
    with torch.inference_mode():
        assert (model(ids) - reference(ids).last_hidden_state).abs().max() <= 1e-4


def test_old_mask_buffers_and_tied_lm_head_are_ignored(lm_folder, ours):
    tensors = read_safetensors(lm_folder)
    tensors["transformer.h.0.attn.bias"] = torch.tril(torch.ones(1, 1, MAX_LEN, MAX_LEN))
    tensors["transformer.h.1.attn.masked_bias"] = torch.tensor(-1e4)
    tensors["lm_head.weight"] = tensors["transformer.wte.weight"]
    model = Transformer(ours.config)
    load_gpt2_state(model, tensors)
    assert model.decoder.generator.weight is model.decoder.embed.tokens.weight
    assert torch.equal(model.decoder.embed.tokens.weight, ours.decoder.embed.tokens.weight)


def test_missing_and_unexpected_keys_are_all_named(lm_folder, ours):
    tensors = read_safetensors(lm_folder)
    del tensors["transformer.h.1.mlp.c_fc.bias"], tensors["transformer.wpe.weight"]
    tensors["transformer.h.2.ln_1.weight"] = torch.ones(D_MODEL)
    with pytest.raises(ModelError) as error:
        load_gpt2_state(Transformer(ours.config), tensors)
    message = str(error.value)
    assert "missing h.1.mlp.c_fc.bias, wpe.weight" in message
    assert "unexpected h.2.ln_1.weight" in message


def test_shape_mismatch_is_a_model_error(lm_folder, ours):
    tensors = read_safetensors(lm_folder)
    tensors["transformer.ln_f.weight"] = torch.ones(D_MODEL + 1)
    with pytest.raises(ModelError, match="does not fit its config"):
        load_gpt2_state(Transformer(ours.config), tensors)


def test_unsupported_variant_is_refused():
    config = tiny_config().to_dict() | {"scale_attn_by_inverse_layer_idx": True}
    with pytest.raises(ModelError, match="scale_attn_by_inverse_layer_idx=true.*hf: backend"):
        gpt2_config(config)


def test_sharded_checkpoint_is_read(tmp_path, lm_folder, ours):
    GPT2LMHeadModel.from_pretrained(lm_folder).save_pretrained(tmp_path, max_shard_size="100KB")
    assert (tmp_path / "model.safetensors.index.json").is_file()
    assert not (tmp_path / "model.safetensors").exists()
    model = load_gpt2(tmp_path)
    for name, tensor in ours.state_dict().items():
        assert torch.equal(model.state_dict()[name], tensor), name


def test_pickle_only_folder_is_refused(tmp_path, lm_folder):
    (tmp_path / "config.json").write_text((lm_folder / "config.json").read_text())
    (tmp_path / "pytorch_model.bin").write_bytes(b"never unpickled")
    with pytest.raises(ModelError) as error:
        load_gpt2(tmp_path)
    message = str(error.value)
    assert "holds only a pickle checkpoint (pytorch_model.bin)" in message
    assert "safetensors only, because unpickling can run arbitrary code" in message
    assert "Convert it" in message


def test_corrupt_config_names_the_json_error_position(tmp_path):
    (tmp_path / "config.json").write_text('{\n  "n_embd": 64,,\n}')
    with pytest.raises(ModelError, match=r"config.json is not valid JSON: .* at line 2, column 16"):
        load_gpt2(tmp_path)


def test_folder_problems_are_one_line_model_errors(tmp_path):
    with pytest.raises(ModelError, match="does not exist"):
        load_gpt2(tmp_path / "nowhere")
    with pytest.raises(ModelError, match="has no config.json"):
        read_config(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps(tiny_config().to_dict()))
    with pytest.raises(ModelError, match="has no model.safetensors"):
        load_gpt2(tmp_path)
    (tmp_path / "model.safetensors").write_bytes(b"garbage")
    with pytest.raises(ModelError, match="not a readable safetensors file"):
        load_gpt2(tmp_path)
