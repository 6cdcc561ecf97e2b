"""GPT-2 family checkpoints (gpt2, distilgpt2, gpt2-medium ...) into our decoder-only Transformer.

GPT-2 is the paper's decoder without cross-attention, with three changes our config expresses:
LayerNorm *before* each sublayer plus a final one (``norm="pre"``), learned positions, and the
output projection tied to the token embedding. Its linear layers are ``Conv1D`` modules whose
weight is ``(in, out)`` — the transpose of ``nn.Linear`` — and q, k, v share one ``c_attn``
matrix ``(d_model, 3·d_model)`` that is split here.

Checkpoint name → our module (``transformer.`` prefix optional):

* ``wte`` / ``wpe`` → ``decoder.embed.tokens`` / ``decoder.embed.positions``
* ``h.{i}.ln_1`` / ``h.{i}.ln_2`` → ``decoder.layers.{i}.sublayers.0.norm`` / ``sublayers.1.norm``
* ``h.{i}.attn.c_attn`` → ``decoder.layers.{i}.self_attn.w_q``, ``w_k``, ``w_v`` (split in three)
* ``h.{i}.attn.c_proj`` → ``decoder.layers.{i}.self_attn.w_o``
* ``h.{i}.mlp.c_fc`` / ``h.{i}.mlp.c_proj`` → ``decoder.layers.{i}.feed_forward.w_1`` / ``w_2``
* ``ln_f`` → ``decoder.norm``
* ``lm_head`` → ``decoder.generator``, tied to ``wte`` (so a stored copy is ignored)
"""

from __future__ import annotations

import re
from pathlib import Path

import torch

from ..errors import ModelError
from ..core.model import Transformer, TransformerConfig
from .matching import check_names, check_shapes
from .safetensors_io import read_config, read_safetensors

ACTIVATIONS = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu": "gelu", "relu": "relu"}
REQUIRED = ("vocab_size", "n_positions", "n_embd", "n_layer", "n_head")
# Causal-mask buffers old checkpoints saved alongside the weights; our mask is computed, not stored.
MASK_BUFFER = re.compile(r"^h\.\d+\.attn\.(bias|masked_bias)$")


def gpt2_config(hf_config: dict) -> TransformerConfig:
    """Our config for a GPT-2 ``config.json``; ModelError for variants our model cannot reproduce."""
    missing = [key for key in REQUIRED if key not in hf_config]
    if missing:
        raise ModelError(f"GPT-2 config.json lacks {', '.join(missing)}")
    activation = hf_config.get("activation_function", "gelu_new")
    unsupported = []
    if activation not in ACTIVATIONS:
        unsupported.append(f"activation_function={activation!r}")
    if hf_config.get("add_cross_attention"):
        unsupported.append("add_cross_attention=true")
    if not hf_config.get("scale_attn_weights", True):
        unsupported.append("scale_attn_weights=false")
    if hf_config.get("scale_attn_by_inverse_layer_idx"):
        unsupported.append("scale_attn_by_inverse_layer_idx=true")
    if not hf_config.get("tie_word_embeddings", True):
        unsupported.append("tie_word_embeddings=false")
    if unsupported:
        raise ModelError(
            f"this GPT-2 variant is not supported by the from-scratch model ({', '.join(unsupported)}); "
            "load it with the hf: backend instead"
        )
    d_model = hf_config["n_embd"]
    try:
        return TransformerConfig(
            shape="decoder-only",
            vocab_size=hf_config["vocab_size"],
            d_model=d_model,
            h=hf_config["n_head"],
            d_ff=hf_config.get("n_inner") or 4 * d_model,
            N=hf_config["n_layer"],
            max_len=hf_config["n_positions"],
            positional="learned",
            norm="pre",
            layer_norm_eps=hf_config.get("layer_norm_epsilon", 1e-5),
            activation=ACTIVATIONS[activation],
            dropout=0.0,  # inference only: the app always runs the model in eval mode
            scale_embeddings=False,
            tie_embeddings=True,
        )
    except ValueError as error:
        raise ModelError(f"GPT-2 config.json: {error}") from error


def _linear(conv1d_weight: torch.Tensor) -> torch.Tensor:
    """Conv1D stores (in, out); nn.Linear wants (out, in)."""
    return conv1d_weight.t().contiguous()


def load_gpt2_state(model: Transformer, tensors: dict[str, torch.Tensor]) -> None:
    """Copy a GPT-2 checkpoint into ``model`` (built from :func:`gpt2_config`), in place.

    Names may carry the ``transformer.`` prefix (``GPT2LMHeadModel``) or not (``GPT2Model``).
    Raises ModelError naming the first missing, unexpected and mis-shaped tensors.
    """
    if model.decoder is None or model.config.shape != "decoder-only":
        raise ModelError("GPT-2 weights need a decoder-only model")
    d, d_ff = model.config.d_model, model.config.d_ff
    n_layers = len(model.decoder.layers)
    found = {name.removeprefix("transformer."): tensor for name, tensor in tensors.items()}
    layer_shapes = {  # Conv1D layout: (in, out)
        "ln_1.weight": (d,), "ln_1.bias": (d,), "attn.c_attn.weight": (d, 3 * d), "attn.c_attn.bias": (3 * d,),
        "attn.c_proj.weight": (d, d), "attn.c_proj.bias": (d,), "ln_2.weight": (d,), "ln_2.bias": (d,),
        "mlp.c_fc.weight": (d, d_ff), "mlp.c_fc.bias": (d_ff,), "mlp.c_proj.weight": (d_ff, d), "mlp.c_proj.bias": (d,),
    }  # fmt: skip
    shapes = {
        "wte.weight": (model.config.vocab_size, d), "wpe.weight": (model.config.max_len, d),
        "ln_f.weight": (d,), "ln_f.bias": (d,),
    }  # fmt: skip
    shapes |= {f"h.{i}.{param}": shape for i in range(n_layers) for param, shape in layer_shapes.items()}
    ignored = {name for name in found if MASK_BUFFER.match(name) or name == "lm_head.weight"}
    check_names("GPT-2", set(found), set(shapes), ignored, n_layers)
    check_shapes("GPT-2", found, shapes)

    state = {
        "decoder.embed.tokens.weight": found["wte.weight"],
        "decoder.embed.positions.weight": found["wpe.weight"],
        "decoder.generator.weight": found["wte.weight"],  # tied: the same Parameter as the embedding
        "decoder.norm.weight": found["ln_f.weight"],
        "decoder.norm.bias": found["ln_f.bias"],
    }
    for i in range(n_layers):
        src, dst = f"h.{i}.", f"decoder.layers.{i}."
        c_attn_w, c_attn_b = found[src + "attn.c_attn.weight"], found[src + "attn.c_attn.bias"]
        for proj, weight, bias in zip(("w_q", "w_k", "w_v"), c_attn_w.split(d, dim=1), c_attn_b.split(d)):
            state[f"{dst}self_attn.{proj}.weight"] = _linear(weight)
            state[f"{dst}self_attn.{proj}.bias"] = bias
        for ours, theirs in (
            ("self_attn.w_o", "attn.c_proj"),
            ("feed_forward.w_1", "mlp.c_fc"),
            ("feed_forward.w_2", "mlp.c_proj"),
        ):
            state[f"{dst}{ours}.weight"] = _linear(found[f"{src}{theirs}.weight"])
            state[f"{dst}{ours}.bias"] = found[f"{src}{theirs}.bias"]
        for sublayer, norm in ((0, "ln_1"), (1, "ln_2")):
            state[f"{dst}sublayers.{sublayer}.norm.weight"] = found[f"{src}{norm}.weight"]
            state[f"{dst}sublayers.{sublayer}.norm.bias"] = found[f"{src}{norm}.bias"]
    model.load_state_dict(state, strict=True)  # copies (and casts fp16/bf16 to our fp32)


def build_gpt2(hf_config: dict, tensors: dict[str, torch.Tensor]) -> Transformer:
    """Our model from a GPT-2 ``config.json`` dict and its tensors, in eval mode (as ``build_bert``)."""
    model = Transformer(gpt2_config(hf_config))
    load_gpt2_state(model, tensors)
    return model.eval()


def load_gpt2(folder: str | Path) -> Transformer:
    """A GPT-2 family folder (``config.json`` + ``model.safetensors``) as our model, in eval mode."""
    return build_gpt2(read_config(folder), read_safetensors(folder))
