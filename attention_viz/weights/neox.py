"""GPT-NeoX checkpoints (Pythia, GPT-NeoX-20B …) into our decoder-only Transformer.

GPT-NeoX is a pre-LN decoder (LayerNorm with bias) with rotary positions on only part of each head
(``rotary_pct``, 25% by default: ``rotary_pct`` of the dimensions turn, the rest carry no position)
and, by default, a parallel residual: x + Attn(LN₁(x)) + FFN(LN₂(x)). Its q, k and v share one
``query_key_value`` matrix whose rows are grouped per head — head 0's q, k, v, then head 1's … —
and are split here.

Checkpoint name → our module (``gpt_neox.`` prefix optional):

* ``embed_in`` → ``decoder.embed.tokens``; ``final_layer_norm`` → ``decoder.norm``; ``embed_out`` → ``decoder.generator``
  (none in a ``GPTNeoXModel`` checkpoint: our model then has no generator)
* ``layers.{i}.input_layernorm`` / ``post_attention_layernorm`` → ``decoder.layers.{i}.sublayers.0.norm`` / ``.1.norm``
* ``layers.{i}.attention.query_key_value`` → ``decoder.layers.{i}.self_attn.w_q``, ``w_k``, ``w_v``
* ``layers.{i}.attention.dense`` → ``decoder.layers.{i}.self_attn.w_o``
* ``layers.{i}.mlp.dense_h_to_4h`` / ``dense_4h_to_h`` → ``decoder.layers.{i}.feed_forward.w_1`` / ``w_2``
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import torch

from ..errors import ModelError
from ..core.model import Transformer, TransformerConfig
from .loading import Checkpoint, Layout, as_checkpoint, fill, on_meta
from .matching import saved_head
from .rotary_config import rotary_settings
from .safetensors_io import SafetensorsFolder, read_config

ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "relu": "relu"}
REQUIRED = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads")
DEFAULT_ROTARY_PCT = 0.25  # transformers' default when config.json names none
# Buffers old checkpoints saved next to the weights: causal masks and rotary frequencies.
IGNORED = re.compile(r"^layers\.\d+\.attention\.(bias|masked_bias|rotary_emb\.inv_freq)$")
QKV = re.compile(r"^layers\.(?P<i>\d+)\.attention\.query_key_value\.(?P<param>weight|bias)$")
LINEARS = {
    "attention.dense": "self_attn.w_o",
    "mlp.dense_h_to_4h": "feed_forward.w_1",
    "mlp.dense_4h_to_h": "feed_forward.w_2",
}
NORMS = {"input_layernorm": 0, "post_attention_layernorm": 1}
PREFIX = "gpt_neox."  # GPTNeoXForCausalLM's names; GPTNeoXModel saves the same tensors without it
HEAD = "embed_out.weight"


def neox_config(hf_config: dict) -> TransformerConfig:
    """Our config for a GPT-NeoX ``config.json``; ModelError for variants we cannot reproduce."""
    missing = [key for key in REQUIRED if key not in hf_config]
    if missing:
        raise ModelError(f"GPT-NeoX config.json lacks {', '.join(missing)}")
    activation = hf_config.get("hidden_act", "gelu")
    if activation not in ACTIVATIONS:
        raise ModelError(f"GPT-NeoX with hidden_act={activation!r} is not supported by the from-scratch model")
    base, fraction, scaling = rotary_settings(hf_config, DEFAULT_ROTARY_PCT)
    bias = bool(hf_config.get("attention_bias", True))
    try:
        return TransformerConfig(
            shape="decoder-only",
            vocab_size=hf_config["vocab_size"],
            d_model=hf_config["hidden_size"],
            h=hf_config["num_attention_heads"],
            d_ff=hf_config["intermediate_size"],
            N=hf_config["num_hidden_layers"],
            max_len=hf_config.get("max_position_embeddings", 2048),
            positional="rotary",
            norm="pre",
            layer_norm_eps=hf_config.get("layer_norm_eps", 1e-5),
            activation=ACTIVATIONS[activation],
            dropout=0.0,  # inference only
            scale_embeddings=False,
            tie_embeddings=bool(hf_config.get("tie_word_embeddings", False)),
            rotary_pct=fraction,
            rotary_base=base,
            rotary_scaling=scaling,
            qkv_bias=bias,
            out_bias=bias,
            generator_bias=False,
            parallel_residual=bool(hf_config.get("use_parallel_residual", True)),
        )
    except ValueError as error:
        raise ModelError(f"GPT-NeoX config.json: {error}") from error


def neox_layout(model: Transformer) -> Layout:
    """How a GPT-NeoX checkpoint fills ``model`` (built from :func:`neox_config`)."""
    if model.decoder is None or model.config.shape != "decoder-only":
        raise ModelError("GPT-NeoX weights need a decoder-only model")
    config = model.config
    params = ("weight", "bias") if config.qkv_bias else ("weight",)
    sources = checkpoint_names(model)  # our name → the checkpoint's, qkv aside
    ours = dict(model.named_parameters(remove_duplicate=False))
    expected = {theirs: tuple(ours[mine].shape) for mine, theirs in sources.items()}
    for i in range(config.N):  # the fused q, k, v rows of one layer: ours stacked
        dst = f"decoder.layers.{i}."  # parameter names (not hook names: those come from names.py)
        for p in params:
            parts = [ours[f"{dst}self_attn.{w}.{p}"].shape for w in ("w_q", "w_k", "w_v")]
            expected[f"layers.{i}.attention.query_key_value.{p}"] = (sum(s[0] for s in parts), *parts[0][1:])
    targets: dict[str, list[str]] = {}  # checkpoint name → ours (two when the head is tied)
    for mine, theirs in sources.items():
        targets.setdefault(theirs, []).append(mine)
    tied_copy = {HEAD} if config.tie_embeddings else set()

    def convert(name: str, tensor: torch.Tensor) -> list[tuple[str, torch.Tensor]]:
        fused = QKV.match(name)
        if fused is None:
            return [(mine, tensor) for mine in targets[name]]
        dst, parts = f"decoder.layers.{fused['i']}.", split_qkv(tensor, config.h)  # parameter names
        return [(f"{dst}self_attn.{w}.{fused['param']}", part) for w, part in zip(("w_q", "w_k", "w_v"), parts)]

    return Layout(
        family="GPT-NeoX",
        prefix=PREFIX,
        expected=expected,
        ignored=lambda name: bool(IGNORED.match(name)) or name in tied_copy,
        convert=convert,
        n_layers=config.N,
    )


def load_neox_state(
    model: Transformer,
    tensors: Mapping[str, torch.Tensor] | Checkpoint,
    *,
    device: str | torch.device = "cpu",
    dtype: torch.dtype | None = None,
) -> None:
    """Fill ``model`` (built from :func:`neox_config`, on meta or not) from a GPT-NeoX checkpoint, in
    place, in ``dtype`` (None: float32) on ``device``.

    Raises ModelError naming the first missing, unexpected and mis-shaped tensors.
    """
    fill(model, tensors, neox_layout(model), device=device, dtype=dtype)


def checkpoint_names(model: Transformer) -> dict[str, str]:
    """Our state-dict name → the checkpoint's (without ``gpt_neox.``), for every tensor but q, k, v
    (one fused tensor in the checkpoint, three in ours)."""
    config = model.config
    names = {
        "decoder.embed.tokens.weight": "embed_in.weight",
        "decoder.norm.weight": "final_layer_norm.weight",
        "decoder.norm.bias": "final_layer_norm.bias",
    }
    if model.decoder.generator is not None:
        names["decoder.generator.weight"] = "embed_in.weight" if config.tie_embeddings else HEAD
    for i in range(config.N):
        src, dst = f"layers.{i}.", f"decoder.layers.{i}."
        for theirs, mine in LINEARS.items():
            names.update({f"{dst}{mine}.{p}": f"{src}{theirs}.{p}" for p in ("weight", "bias")})
        for theirs, sublayer in NORMS.items():
            names.update({f"{dst}sublayers.{sublayer}.norm.{p}": f"{src}{theirs}.{p}" for p in ("weight", "bias")})
    ours = model.state_dict()
    return {mine: theirs for mine, theirs in names.items() if mine in ours}  # W_O's bias only where configured


def split_qkv(fused: torch.Tensor, h: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``query_key_value`` (3·d_model[, d_model]) with rows [head 0: q k v, head 1: q k v, …] → the
    q, k and v parts (d_model[, d_model]) each, heads in order."""
    if fused.size(0) % (3 * h):
        raise ModelError(f"query_key_value has {fused.size(0)} rows, not a multiple of 3 × {h} heads")
    per_head = fused.reshape(h, 3, fused.size(0) // (3 * h), *fused.shape[1:])  # (h, 3, d_k[, d_model])
    return tuple(per_head[:, part].reshape(-1, *fused.shape[1:]) for part in range(3))


def build_neox(
    hf_config: dict,
    tensors: Mapping[str, torch.Tensor] | Checkpoint,
    *,
    device: str | torch.device = "cpu",
    dtype: torch.dtype | None = None,
) -> Transformer:
    """Our model from a GPT-NeoX ``config.json`` dict and its tensors, in eval mode; without a
    generator when the checkpoint is a ``GPTNeoXModel`` saved without its LM head."""
    config = neox_config(hf_config)
    checkpoint = as_checkpoint(tensors)
    model = on_meta(replace(config, generator=saved_head(checkpoint.shapes, HEAD, PREFIX, config.tie_embeddings)))
    load_neox_state(model, checkpoint, device=device, dtype=dtype)
    return model.eval()


def load_neox(
    folder: str | Path, *, device: str | torch.device = "cpu", dtype: torch.dtype | None = None
) -> Transformer:
    """A GPT-NeoX folder (``config.json`` + safetensors, sharded or not) as our model, in eval mode,
    read tensor by tensor onto ``device`` in ``dtype`` (None: float32)."""
    return build_neox(read_config(folder), SafetensorsFolder(folder), device=device, dtype=dtype)
