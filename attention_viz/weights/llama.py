"""Llama, Mistral and Qwen2 checkpoints into our decoder-only Transformer.

The three share one layout, which our config expresses with switches: RMSNorm before each
sublayer and a final one (``norm="pre"``, ``norm_type="rms"``), rotary positions, grouped-query
attention (``n_kv_heads``), a SwiGLU feed-forward (``gated_ffn``, SiLU) and no biases. They differ in:

* Qwen2: biases on W_Q, W_K, W_V only; a sliding window on layers ≥ ``max_window_layers`` when
  ``use_sliding_window`` (or as its ``layer_types`` list says);
* Mistral: a sliding window of ``sliding_window`` positions on every layer (unless null);
* Llama: optional ``attention_bias`` (all four projections) and ``mlp_bias``.

Checkpoint name → our module (``model.`` prefix optional):

* ``embed_tokens`` → ``decoder.embed.tokens``; ``norm`` → ``decoder.norm``; ``lm_head`` → ``decoder.generator``
  (none in a ``LlamaModel`` / ``MistralModel`` / ``Qwen2Model`` checkpoint, the way embedding models
  ship: our model then has no generator, and views that need next-token logits say so)
* ``layers.{i}.input_layernorm`` / ``post_attention_layernorm`` → ``decoder.layers.{i}.sublayers.0.norm`` / ``.1.norm``
* ``layers.{i}.self_attn.{q,k,v,o}_proj`` → ``decoder.layers.{i}.self_attn.w_{q,k,v,o}``
* ``layers.{i}.mlp.gate_proj`` / ``up_proj`` / ``down_proj`` → ``decoder.layers.{i}.feed_forward.w_1`` / ``v`` / ``w_2``
"""

from __future__ import annotations

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

FAMILIES = {"llama": "Llama", "mistral": "Mistral", "qwen2": "Qwen2"}
REQUIRED = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads")
# transformers' defaults for the keys an older config.json may leave out
DEFAULTS = {
    "llama": {"max_position_embeddings": 2048},
    "mistral": {"max_position_embeddings": 131072, "num_key_value_heads": 8, "sliding_window": 4096},
    "qwen2": {"max_position_embeddings": 32768, "num_key_value_heads": 32, "sliding_window": 4096},
}
# Rotary inverse-frequency buffers some old checkpoints saved; ours are computed, not stored.
IGNORED_SUFFIX = ".rotary_emb.inv_freq"
PROJECTIONS = {"q_proj": "w_q", "k_proj": "w_k", "v_proj": "w_v", "o_proj": "w_o"}
FEED_FORWARD = {"gate_proj": "w_1", "up_proj": "v", "down_proj": "w_2"}
NORMS = {"input_layernorm": 0, "post_attention_layernorm": 1}
PREFIX = "model."  # LlamaForCausalLM's (…) names; LlamaModel saves the same tensors without it
HEAD = "lm_head.weight"


def llama_config(hf_config: dict) -> TransformerConfig:
    """Our config for a Llama, Mistral or Qwen2 ``config.json``; ModelError for what we cannot run."""
    model_type = hf_config.get("model_type")
    if model_type not in FAMILIES:
        raise ModelError(f"config.json: model_type {model_type!r} is not one of {', '.join(FAMILIES)}")
    family = FAMILIES[model_type]
    missing = [key for key in REQUIRED if key not in hf_config]
    if missing:
        raise ModelError(f"{family} config.json lacks {', '.join(missing)}")
    get = {**DEFAULTS[model_type], **hf_config}.get
    if get("hidden_act", "silu") != "silu":
        raise ModelError(f"{family} with hidden_act={get('hidden_act')!r} is not supported by the from-scratch model")
    base, fraction, scaling = rotary_settings(hf_config)
    h = hf_config["num_attention_heads"]
    n_layers = hf_config["num_hidden_layers"]
    window, full_layers = _sliding_window(model_type, hf_config, get, n_layers)
    qkv_bias = model_type == "qwen2" or bool(get("attention_bias", False))
    try:
        return TransformerConfig(
            shape="decoder-only",
            vocab_size=hf_config["vocab_size"],
            d_model=hf_config["hidden_size"],
            h=h,
            d_ff=hf_config["intermediate_size"],
            N=n_layers,
            max_len=get("max_position_embeddings"),
            positional="rotary",
            norm="pre",
            norm_type="rms",
            layer_norm_eps=get("rms_norm_eps", 1e-6),
            activation="silu",
            dropout=0.0,  # inference only
            scale_embeddings=False,
            tie_embeddings=bool(get("tie_word_embeddings", False)),
            n_kv_heads=get("num_key_value_heads") or h,
            head_dim=get("head_dim") or None,
            rotary_pct=fraction,
            rotary_base=base,
            rotary_scaling=scaling,
            gated_ffn=True,
            qkv_bias=qkv_bias,
            out_bias=model_type == "llama" and bool(get("attention_bias", False)),
            ffn_bias=model_type == "llama" and bool(get("mlp_bias", False)),
            generator_bias=False,
            sliding_window=window,
            full_attention_layers=full_layers,
        )
    except ValueError as error:
        raise ModelError(f"{family} config.json: {error}") from error


def _sliding_window(model_type: str, hf_config: dict, get, n_layers: int) -> tuple[int | None, tuple[int, ...]]:
    """(window, layers exempt from it) as transformers 5.x decides them for each family."""
    if model_type == "llama":
        return None, ()
    if model_type == "mistral":
        return get("sliding_window"), ()
    window = get("sliding_window") if get("use_sliding_window", False) else None
    if window is None:
        return None, ()
    layer_types = hf_config.get("layer_types")
    if layer_types is None:
        first_sliding = get("max_window_layers", 28)
        return window, tuple(range(min(first_sliding, n_layers)))
    unknown = set(layer_types) - {"full_attention", "sliding_attention"}
    if unknown or len(layer_types) != n_layers:
        raise ModelError(f"Qwen2 config.json: layer_types must list full/sliding_attention per layer, got {layer_types}")
    return window, tuple(i for i, kind in enumerate(layer_types) if kind == "full_attention")


def checkpoint_names(model: Transformer) -> dict[str, str]:
    """Our state-dict name → the checkpoint's (without the ``model.`` prefix), for every tensor."""
    config = model.config
    names = {"decoder.embed.tokens.weight": "embed_tokens.weight", "decoder.norm.weight": "norm.weight"}
    if model.decoder.generator is not None:
        # tied: the generator is the embedding Parameter itself, so it is filled from the embedding
        names["decoder.generator.weight"] = "embed_tokens.weight" if config.tie_embeddings else HEAD
    params = ("weight", "bias")
    for i in range(config.N):
        src, dst = f"layers.{i}.", f"decoder.layers.{i}."
        for theirs, mine in PROJECTIONS.items():
            names.update({f"{dst}self_attn.{mine}.{p}": f"{src}self_attn.{theirs}.{p}" for p in params})
        for theirs, mine in FEED_FORWARD.items():
            names.update({f"{dst}feed_forward.{mine}.{p}": f"{src}mlp.{theirs}.{p}" for p in params})
        for theirs, sublayer in NORMS.items():
            names[f"{dst}sublayers.{sublayer}.norm.weight"] = f"{src}{theirs}.weight"
    ours = model.state_dict()
    return {mine: theirs for mine, theirs in names.items() if mine in ours}  # biases only where configured


def llama_layout(model: Transformer, family: str = "Llama") -> Layout:
    """How a Llama/Mistral/Qwen2 checkpoint fills ``model`` (built from :func:`llama_config`)."""
    if model.decoder is None or model.config.shape != "decoder-only":
        raise ModelError(f"{family} weights need a decoder-only model")
    names = checkpoint_names(model)
    ours = dict(model.named_parameters(remove_duplicate=False))
    targets: dict[str, list[str]] = {}  # checkpoint name → ours (two when the head is tied)
    for mine, theirs in names.items():
        targets.setdefault(theirs, []).append(mine)
    tied_copy = {HEAD} if model.config.tie_embeddings else set()
    return Layout(
        family=family,
        prefix=PREFIX,
        expected={theirs: tuple(ours[mine].shape) for mine, theirs in names.items()},
        ignored=lambda name: name.endswith(IGNORED_SUFFIX) or name in tied_copy,
        convert=lambda name, tensor: [(mine, tensor) for mine in targets[name]],
        n_layers=model.config.N,
    )


def load_llama_state(
    model: Transformer,
    tensors: Mapping[str, torch.Tensor] | Checkpoint,
    family: str = "Llama",
    *,
    device: str | torch.device = "cpu",
    dtype: torch.dtype | None = None,
) -> None:
    """Fill ``model`` (built from :func:`llama_config`, on meta or not) from a Llama/Mistral/Qwen2
    checkpoint, in place, in ``dtype`` (None: float32) on ``device``.

    Raises ModelError naming the first missing, unexpected and mis-shaped tensors.
    """
    fill(model, tensors, llama_layout(model, family), device=device, dtype=dtype)


def build_llama(
    hf_config: dict,
    tensors: Mapping[str, torch.Tensor] | Checkpoint,
    *,
    device: str | torch.device = "cpu",
    dtype: torch.dtype | None = None,
) -> Transformer:
    """Our model from a Llama-family ``config.json`` dict and its tensors, in eval mode; without a
    generator when the checkpoint is a base model saved without its LM head (``LlamaModel`` …)."""
    config = llama_config(hf_config)
    checkpoint = as_checkpoint(tensors)
    model = on_meta(replace(config, generator=saved_head(checkpoint.shapes, HEAD, PREFIX, config.tie_embeddings)))
    load_llama_state(model, checkpoint, FAMILIES[hf_config["model_type"]], device=device, dtype=dtype)
    return model.eval()


def load_llama(
    folder: str | Path, *, device: str | torch.device = "cpu", dtype: torch.dtype | None = None
) -> Transformer:
    """A Llama, Mistral or Qwen2 folder (``config.json`` + safetensors, sharded or not) as our model,
    in eval mode, read tensor by tensor onto ``device`` in ``dtype`` (None: float32)."""
    return build_llama(read_config(folder), SafetensorsFolder(folder), device=device, dtype=dtype)
