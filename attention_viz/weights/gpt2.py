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
from collections.abc import Mapping
from pathlib import Path

import torch

from ..errors import ModelError
from ..core.model import Transformer, TransformerConfig
from .loading import Checkpoint, Layout, fill, on_meta
from .safetensors_io import SafetensorsFolder, read_config

ACTIVATIONS = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu": "gelu", "relu": "relu"}
REQUIRED = ("vocab_size", "n_positions", "n_embd", "n_layer", "n_head")
# Causal-mask buffers old checkpoints saved alongside the weights; our mask is computed, not stored.
MASK_BUFFER = re.compile(r"^h\.\d+\.attn\.(bias|masked_bias)$")
LAYER_NAME = re.compile(r"^h\.(?P<i>\d+)\.(?P<module>.+)\.(?P<param>weight|bias)$")
TOP = {
    "wte.weight": "decoder.embed.tokens.weight",
    "wpe.weight": "decoder.embed.positions.weight",
    "ln_f.weight": "decoder.norm.weight",
    "ln_f.bias": "decoder.norm.bias",
}
NORMS = {"ln_1": 0, "ln_2": 1}  # → decoder.layers.{i}.sublayers.{n}.norm
LINEARS = {"attn.c_proj": "self_attn.w_o", "mlp.c_fc": "feed_forward.w_1", "mlp.c_proj": "feed_forward.w_2"}


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


def gpt2_layout(model: Transformer) -> Layout:
    """How a GPT-2 checkpoint fills ``model`` (built from :func:`gpt2_config`).

    Names may carry the ``transformer.`` prefix (``GPT2LMHeadModel``) or not (``GPT2Model``).
    """
    if model.decoder is None or model.config.shape != "decoder-only":
        raise ModelError("GPT-2 weights need a decoder-only model")
    d, d_ff = model.config.d_model, model.config.d_ff
    n_layers = len(model.decoder.layers)
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
    return Layout(
        family="GPT-2",
        prefix="transformer.",
        expected=shapes,
        ignored=lambda name: bool(MASK_BUFFER.match(name)) or name == "lm_head.weight",
        convert=lambda name, tensor: _convert(name, tensor, d),
        n_layers=n_layers,
    )


def _convert(name: str, tensor: torch.Tensor, d: int) -> list[tuple[str, torch.Tensor]]:
    """One GPT-2 tensor → our parameters: q, k, v split out of ``c_attn``, Conv1D weights transposed."""
    if name in TOP:
        return [(TOP[name], tensor)]  # wte fills the generator too: it is the same Parameter
    layer = LAYER_NAME.match(name)
    i, module, param = layer["i"], layer["module"], layer["param"]
    dst = f"decoder.layers.{i}."
    if module == "attn.c_attn":
        parts = tensor.split(d, dim=-1)  # (d, d) each, or (d,) for the bias
        return [
            (f"{dst}self_attn.{proj}.{param}", _linear(part) if param == "weight" else part)
            for proj, part in zip(("w_q", "w_k", "w_v"), parts)
        ]
    if module in NORMS:
        return [(f"{dst}sublayers.{NORMS[module]}.norm.{param}", tensor)]
    return [(f"{dst}{LINEARS[module]}.{param}", _linear(tensor) if param == "weight" else tensor)]


def load_gpt2_state(
    model: Transformer,
    tensors: Mapping[str, torch.Tensor] | Checkpoint,
    *,
    device: str | torch.device = "cpu",
    dtype: torch.dtype | None = None,
) -> None:
    """Fill ``model`` (built from :func:`gpt2_config`, on meta or not) from a GPT-2 checkpoint, in
    place, in ``dtype`` (None: float32) on ``device``.

    Raises ModelError naming the first missing, unexpected and mis-shaped tensors.
    """
    fill(model, tensors, gpt2_layout(model), device=device, dtype=dtype)


def build_gpt2(
    hf_config: dict,
    tensors: Mapping[str, torch.Tensor] | Checkpoint,
    *,
    device: str | torch.device = "cpu",
    dtype: torch.dtype | None = None,
) -> Transformer:
    """Our model from a GPT-2 ``config.json`` dict and its tensors, in eval mode (as ``build_bert``)."""
    model = on_meta(gpt2_config(hf_config))
    load_gpt2_state(model, tensors, device=device, dtype=dtype)
    return model.eval()


def load_gpt2(
    folder: str | Path, *, device: str | torch.device = "cpu", dtype: torch.dtype | None = None
) -> Transformer:
    """A GPT-2 family folder (``config.json`` + safetensors, sharded or not) as our model, in eval
    mode, read tensor by tensor onto ``device`` in ``dtype`` (None: float32)."""
    return build_gpt2(read_config(folder), SafetensorsFolder(folder), device=device, dtype=dtype)
