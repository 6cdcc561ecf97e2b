"""BERT-family checkpoints (all-MiniLM-L6-v2 among them) into our encoder-only Transformer.

BERT is the paper's encoder with three changes that the config expresses: learned positions,
token-type (segment) embeddings, and a LayerNorm on the summed embeddings. Layers are post-LN
and the feed-forward uses the exact (erf) GELU.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import torch

from ..errors import ModelError
from ..core.model import Transformer, TransformerConfig
from .loading import Checkpoint, Layout, fill, on_meta
from .safetensors_io import SafetensorsFolder, read_config

# Checkpoint tensors we know and deliberately leave out: the pooler and pre-training heads serve
# sentence-level tasks, not attention; position_ids is a constant buffer.
IGNORED_PREFIXES = ("pooler.", "cls.", "embeddings.position_ids")

_EMBEDDINGS = {
    "encoder.embed.tokens.weight": "embeddings.word_embeddings.weight",
    "encoder.embed.positions.weight": "embeddings.position_embeddings.weight",
    "encoder.embed.token_types.weight": "embeddings.token_type_embeddings.weight",
    "encoder.embed.norm.weight": "embeddings.LayerNorm.weight",
    "encoder.embed.norm.bias": "embeddings.LayerNorm.bias",
}
_LAYER = {  # ours (under encoder.layers.{i}.) → theirs (under encoder.layer.{i}.)
    "self_attn.w_q": "attention.self.query",
    "self_attn.w_k": "attention.self.key",
    "self_attn.w_v": "attention.self.value",
    "self_attn.w_o": "attention.output.dense",
    "sublayers.0.norm": "attention.output.LayerNorm",
    "feed_forward.w_1": "intermediate.dense",
    "feed_forward.w_2": "output.dense",
    "sublayers.1.norm": "output.LayerNorm",
}


def bert_config(hf: dict) -> TransformerConfig:
    """Our config from a BERT ``config.json``."""
    if hf.get("position_embedding_type", "absolute") != "absolute":
        raise ModelError(f"position_embedding_type {hf['position_embedding_type']!r} is not supported (only absolute)")
    activation = {"gelu": "gelu", "relu": "relu", "gelu_new": "gelu_tanh"}.get(hf.get("hidden_act", "gelu"))
    if activation is None:
        raise ModelError(f"hidden_act {hf['hidden_act']!r} is not supported")
    try:
        return TransformerConfig(
            shape="encoder-only",
            vocab_size=hf["vocab_size"],
            d_model=hf["hidden_size"],
            h=hf["num_attention_heads"],
            d_ff=hf["intermediate_size"],
            N=hf["num_hidden_layers"],
            max_len=hf.get("max_position_embeddings", 512),
            positional="learned",
            norm="post",
            layer_norm_eps=hf.get("layer_norm_eps", 1e-12),
            activation=activation,
            dropout=0.0,  # we only ever run inference
            type_vocab_size=hf.get("type_vocab_size", 2),
            embedding_norm=True,
            scale_embeddings=False,
            pad_id=hf.get("pad_token_id", 0),
        )
    except KeyError as missing:
        raise ModelError(f"config.json lacks {missing} needed for a BERT model") from None


def bert_key_map(n_layers: int) -> dict[str, str]:
    """Our parameter name → checkpoint tensor name, for every parameter of the model."""
    mapping = dict(_EMBEDDINGS)
    for i in range(n_layers):
        dst, src = f"encoder.layers.{i}.", f"encoder.layer.{i}."  # parameter paths, not hook names
        for ours, theirs in _LAYER.items():
            for param in ("weight", "bias"):
                mapping[f"{dst}{ours}.{param}"] = f"{src}{theirs}.{param}"
    return mapping


def bert_layout(model: Transformer) -> Layout:
    """How a BERT checkpoint fills ``model`` (built from :func:`bert_config`)."""
    mapping = bert_key_map(model.config.N)
    ours = dict(model.named_parameters(remove_duplicate=False))
    if set(mapping) != set(ours):  # our model and the map must agree, or the map is wrong
        raise AssertionError(f"key map out of date: {sorted(set(mapping) ^ set(ours))[:5]}")
    targets = {theirs: name for name, theirs in mapping.items()}
    return Layout(
        family="BERT",
        prefix="bert.",  # BertFor* checkpoints prefix the encoder with "bert."
        expected={theirs: tuple(ours[name].shape) for name, theirs in mapping.items()},
        ignored=lambda name: name.startswith(IGNORED_PREFIXES),
        convert=lambda name, tensor: [(targets[name], tensor)],
        n_layers=model.config.N,
    )


def load_bert_state(
    model: Transformer,
    tensors: Mapping[str, torch.Tensor] | Checkpoint,
    *,
    device: str | torch.device = "cpu",
    dtype: torch.dtype | None = None,
) -> None:
    """Fill ``model`` from a BERT checkpoint, in ``dtype`` (None: float32) on ``device``; raise naming
    the first missing, unexpected and mis-shaped tensors."""
    fill(model, tensors, bert_layout(model), device=device, dtype=dtype)


def build_bert(
    hf_config: dict,
    tensors: Mapping[str, torch.Tensor] | Checkpoint,
    *,
    device: str | torch.device = "cpu",
    dtype: torch.dtype | None = None,
) -> Transformer:
    """Our encoder from a BERT ``config.json`` dict and its tensors, in eval mode."""
    model = on_meta(bert_config(hf_config))
    load_bert_state(model, tensors, device=device, dtype=dtype)
    return model.eval()


def load_bert(
    folder: str | Path, *, device: str | torch.device = "cpu", dtype: torch.dtype | None = None
) -> Transformer:
    """A BERT folder (``config.json`` + safetensors, sharded or not) as our encoder, in eval mode,
    read tensor by tensor onto ``device`` in ``dtype`` (None: float32)."""
    return build_bert(read_config(folder), SafetensorsFolder(folder), device=device, dtype=dtype)
