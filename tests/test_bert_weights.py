"""Loading BERT checkpoints into our encoder fails loudly on anything that does not fit."""

import pytest
import torch

from attention_viz.errors import ModelError
from attention_viz.backends.registry import MODELS
from attention_viz.weights.bert import bert_config, bert_key_map, build_bert
from attention_viz.weights.safetensors_io import read_config, read_safetensors


@pytest.fixture(scope="module")
def checkpoint():
    folder = MODELS["minilm"].locate()
    return read_config(folder), read_safetensors(folder)


def test_config_maps_minilm(checkpoint):
    config = bert_config(checkpoint[0])
    assert (config.N, config.h, config.d_model, config.d_ff) == (6, 12, 384, 1536)
    assert config.layer_norm_eps == 1e-12 and config.activation == "gelu" and config.norm == "post"
    assert config.positional == "learned" and config.type_vocab_size == 2 and config.embedding_norm


def test_missing_tensor_is_named(checkpoint):
    config, tensors = checkpoint
    broken = {k: v for k, v in tensors.items() if k != "encoder.layer.3.attention.self.key.weight"}
    with pytest.raises(ModelError, match=r"missing encoder\.layer\.3\.attention\.self\.key\.weight"):
        build_bert(config, broken)


def test_a_checkpoint_of_another_model_names_the_first_five_and_counts_the_rest(checkpoint):
    config, _ = checkpoint
    other = {f"h.{i}.attn.c_attn.weight": torch.zeros(1) for i in range(8)}
    with pytest.raises(ModelError) as error:
        build_bert(config, other)
    message = str(error.value)
    assert "missing embeddings.LayerNorm.bias, embeddings.LayerNorm.weight, " in message
    assert f"and {len(bert_key_map(6)) - 5} more" in message  # every tensor of the model, five named
    assert "unexpected h.0.attn.c_attn.weight, h.1.attn.c_attn.weight, h.2.attn.c_attn.weight, " \
           "h.3.attn.c_attn.weight, h.4.attn.c_attn.weight and 3 more" in message
    assert "\n" not in message


def test_unexpected_tensor_is_named(checkpoint):
    config, tensors = checkpoint
    with pytest.raises(ModelError, match=r"unexpected encoder\.layer\.0\.adapter\.weight"):
        build_bert(config, {**tensors, "encoder.layer.0.adapter.weight": torch.zeros(3)})


def test_wrong_shape_is_named(checkpoint):
    config, tensors = checkpoint
    bad = {**tensors, "embeddings.token_type_embeddings.weight": torch.zeros(3, 384)}
    with pytest.raises(ModelError, match="token_type_embeddings.weight has shape"):
        build_bert(config, bad)


def test_pooler_and_prefixed_checkpoints_are_accepted(checkpoint):
    config, tensors = checkpoint
    prefixed = {f"bert.{k}": v for k, v in tensors.items()}  # as BertForMaskedLM saves them
    model = build_bert(config, prefixed)
    assert torch.equal(model.encoder.embed.tokens.weight, tensors["embeddings.word_embeddings.weight"])


def test_unsupported_config_is_refused(checkpoint):
    with pytest.raises(ModelError, match="position_embedding_type"):
        bert_config({**checkpoint[0], "position_embedding_type": "relative_key"})
    with pytest.raises(ModelError, match="lacks 'hidden_size'"):
        bert_config({k: v for k, v in checkpoint[0].items() if k != "hidden_size"})
