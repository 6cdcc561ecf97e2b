"""Context mixing of a run, layer by layer: value zeroing (Mohebbi et al. 2023) and ALTI (Ferrando
et al. 2022), saved as ``{part}.layers.{l}.self_attn.value_zeroing`` / ``.alti`` (``[query, key]``).

Both start from one forward of our Transformer that captures, per layer, the residual stream
entering it (``resid_pre``), the values and the attention weights. ALTI is then numpy
(:mod:`attention_viz.analysis.alti`) on those arrays and the layer's W_O, b_O and LayerNorm.
Value zeroing re-runs each layer alone on its captured input, T copies in one batch: copy j has
key j's values zeroed in every head (an intervention on the layer's ``v`` hook point indexing the
batch), and everything after the values — attention output, W_O, residual, norms, feed-forward —
is recomputed by the layer's own forward (:mod:`attention_viz.analysis.value_zeroing`).

Models that run in our own Transformer (minilm, the trained Transformers, ``hf:`` folders in ours)
get both. An encoder-only or decoder-only ``hf:`` model that runs in ``transformers`` gets value
zeroing through forward hooks where its attention has a value projection of its own (BERT's
``value``, ``v_proj``, ``v_lin``), and ALTI is refused there; anything else gets a one-line ModelError.
"""

from __future__ import annotations

import contextvars
import re
from contextlib import nullcontext
from collections.abc import Collection, Sequence
from typing import Protocol

import numpy as np
import torch
from torch import nn

from ..analysis.ablation import Ablation
from ..analysis.alti import PostNorm, alti
from ..analysis.value_zeroing import cosine_distances, value_zeroing_map
from ..core.attention import sliding_window_mask
from ..errors import ModelError
from ..runtime import progress
from ..core.hooks import HeadRemoval, capture, intervene
from ..core.model import DecoderLayer, EncoderLayer, Transformer, decoder_mask
from ..core.names import DECODER_SELF, ENCODER_SELF, Group, hook_name, layer_hook_name
from ..core.result import AttentionResult
from .ours import ablation_context, output_projection, removals



class Backend(Protocol):
    """What the measures read of a backend (base.Backend has it; base.py loads this module when a view
    first asks, so naming the class here would tie the two modules in a circle)."""

    name: str
    shape: str
    implementation: str

    def ablation_refusal(self) -> ModelError: ...

MEASURES = ("value_zeroing", "alti")  # the kinds the maps are saved under
ZEROED_ELEMENTS = 1 << 24  # floats a batch of zeroed copies may hold in its largest tensors (64 MB)


def check_measures(measures: Collection[str]) -> tuple[str, ...]:
    unknown = sorted(set(measures) - set(MEASURES))
    if unknown:
        raise ModelError(f"unknown context-mixing measure {', '.join(unknown)}: choose from {', '.join(MEASURES)}")
    return tuple(m for m in MEASURES if m in measures)


def mixing_arrays(
    backend: Backend, result: AttentionResult, measures: Collection[str], ablation: Ablation | None = None
) -> dict[str, np.ndarray]:
    """``measures`` of every self-attention layer for the tokens of ``result`` (what ``backend`` read),
    float32 ``[query, key]`` keyed by hook name; a ModelError where the backend cannot give them."""
    measures = check_measures(measures)
    model = getattr(backend, "model", None)
    if isinstance(model, Transformer):
        target = None if result.target_tokens is None else result.target_tokens.ids
        return context_mixing(model, result.tokens.ids, target, measures, ablation)
    if backend.implementation != "transformers":
        raise ModelError(f"{backend.name} cannot give value zeroing or ALTI: it has no multi-head self-attention")
    registry = getattr(backend, "registry", None)
    if "alti" in measures and registry is None:
        raise ModelError(f"{backend.name} cannot give ALTI: it runs in transformers and its attention does not go "
                         "through transformers' attention registry, where our hook points read the values")
    if ablation is not None and ablation.heads:
        raise ModelError(f"{backend.name} cannot give value zeroing or ALTI with heads removed: that runs in our own "
                         "Transformer only")
    out = transformers_value_zeroing(backend, result) if "value_zeroing" in measures else {}
    if "alti" in measures:
        from .hf_mixing import registry_alti  # transformers' registry: loaded with the backend that uses it

        out.update(registry_alti(backend.name, registry, result))
    return out


def context_mixing(
    model: Transformer,
    ids: Sequence[int],
    target_ids: Sequence[int] | None = None,
    measures: Collection[str] = MEASURES,
    ablation: Ablation | None = None,
) -> dict[str, np.ndarray]:
    """Every self-attention layer's maps for token ``ids`` (the decoder's input ``target_ids`` too for
    an encoder–decoder model), with ``ablation``'s heads removed throughout."""
    measures = check_measures(measures)
    device = next(model.parameters()).device
    src = torch.tensor([list(ids)], device=device)
    tgt = None if target_ids is None else torch.tensor([list(target_ids)], device=device)
    shape = model.config.shape
    if shape == "encoder-decoder" and tgt is None:
        raise ModelError("an encoder–decoder model needs the decoder's tokens for context mixing")
    out: dict[str, np.ndarray] = {}
    removed = removals(model, ablation) if ablation is not None and ablation.heads else {}
    with torch.inference_mode(), ablation_context(model, ablation):
        with capture(kinds=("resid_pre", "v", "pattern")) as recorded:
            model(src, tgt)
        memory = model.encode(src) if shape == "encoder-decoder" else None
        for part, group in (("encoder", ENCODER_SELF), ("decoder", DECODER_SELF)):
            stack = getattr(model, part)
            if stack is None:
                continue
            layers = progress.steps(f"value zeroing, {part} layers", len(stack.layers)) if "value_zeroing" in measures else None
            for index, layer in enumerate(stack.layers):
                x = recorded[layer_hook_name(part, index)]  # (1, T, d_model)
                if layers is not None:
                    run = _layer_run(layer, x.size(1), stack, index, memory)
                    out[hook_name(group, index, "value_zeroing")] = _value_zeroing(layer, group, index, x, run)
                    layers.done()
                if "alti" in measures:
                    removal = removed.get(hook_name(group, index, "context"))
                    out[hook_name(group, index, "alti")] = _alti(model, layer, group, index, x, recorded, removal)
    return out


class _LayerRun:
    """How to call one layer on a batch of copies of its input, and which keys each query reads."""

    def __init__(self, layer: nn.Module, mask: torch.Tensor | None, memory: torch.Tensor | None) -> None:
        self.layer, self.mask, self.memory = layer, mask, memory

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if isinstance(self.layer, EncoderLayer):
            return self.layer(x, self.mask)
        memory = None if self.memory is None else self.memory.expand(x.size(0), -1, -1)
        return self.layer(x, self.mask, memory, None)

    def allowed(self, length: int) -> np.ndarray | None:
        if self.mask is None:
            return None
        return self.mask.reshape(-1, length, length)[0].cpu().numpy()


def _layer_run(layer: nn.Module, length: int, stack: nn.Module, index: int, memory: torch.Tensor | None) -> _LayerRun:
    if isinstance(layer, EncoderLayer):
        return _LayerRun(layer, None, None)  # one unpadded sentence: every key is readable
    if not isinstance(layer, DecoderLayer):
        raise ModelError(f"layer {index} is not a Transformer layer of ours")
    device = memory.device if memory is not None else next(layer.parameters()).device
    mask = decoder_mask(length, None, device)
    window = stack.windows[index]
    if window is not None:
        mask = mask & sliding_window_mask(length, window, device)
    return _LayerRun(layer, mask, memory)


def _value_zeroing(layer: nn.Module, group: Group, index: int, x: torch.Tensor, run: _LayerRun) -> np.ndarray:
    """C of one layer: its real output, then blocks of copies of its input, copy j with key j's
    values zeroed in every head (the paper zeroes v_j = x_j W_V + b_V, bias included)."""
    length, d_model = x.shape[1], x.shape[2]
    output = run(x)[0].float().cpu().numpy()  # (T, d_model): the layer's output in the real run
    hidden = getattr(getattr(layer, "feed_forward", None), "w_1", None)
    width = max(d_model, 0 if hidden is None else hidden.out_features)
    copies = max(1, ZEROED_ELEMENTS // (length * width + layer.self_attn.h * length * length))
    distances = np.empty((length, length))
    for start in range(0, length, copies):
        keys = torch.arange(start, min(start + copies, length), device=x.device)

        def zero_key(v: torch.Tensor, hook: object, keys: torch.Tensor = keys) -> torch.Tensor:
            v = v.clone()  # (J, h_kv, T, d_k)
            v[torch.arange(len(keys), device=v.device), :, keys] = 0.0  # copy b loses key keys[b]
            return v

        with intervene([(hook_name(group, index, "v"), zero_key)]):
            zeroed = run(x.expand(len(keys), -1, -1))  # (J, T, d_model)
        distances[:, start : start + len(keys)] = cosine_distances(output, zeroed.float().cpu().numpy())
    return value_zeroing_map(distances, run.allowed(length)).astype(np.float32)


def _alti(
    model: Transformer, layer: nn.Module, group: Group, index: int, x: torch.Tensor, recorded,
    removal: HeadRemoval | None,
) -> np.ndarray:
    """ALTI of the layer's self-attention block from the captured arrays (numpy, float64), with the
    heads ``removal`` takes out (an ablation) left out of the decomposition as they are of the output."""
    attention = layer.self_attn
    sublayer = layer.sublayers[0]
    post_norm = None
    if not sublayer.pre_norm:  # post-LN: the norm after the residual is linearized row by row
        norm = sublayer.norm
        eps = norm.eps if norm.eps is not None else torch.finfo(norm.weight.dtype).eps
        post_norm = PostNorm(
            gamma=norm.weight.detach().float().cpu().numpy(),
            beta=None if getattr(norm, "bias", None) is None else norm.bias.detach().float().cpu().numpy(),
            eps=float(eps),
            centred=isinstance(norm, nn.LayerNorm),
        )
    pattern = recorded[hook_name(group, index, "pattern")][0].float().cpu().numpy()
    w_o = output_projection(model, group, index)
    b_o = np.zeros(w_o.shape[1], np.float32) if attention.w_o.bias is None else (
        attention.w_o.bias.detach().float().cpu().numpy())
    if removal is not None:  # heads removed by an ablation give nothing of any token to the block's output
        pattern = pattern.copy()
        pattern[list(removal.heads)] = 0.0
        if removal.replacement is not None:  # a mean ablation's constant rows join the bias: no token's
            rows = removal.replacement.double().numpy()  # (removed, d_k)
            per_head = w_o.reshape(attention.h, attention.d_k, -1)[list(removal.heads)]  # (removed, d_k, d)
            b_o = b_o + np.einsum("rk,rkd->d", rows, per_head)
    c = alti(x[0].float().cpu().numpy(), pattern, recorded[hook_name(group, index, "v")][0].float().cpu().numpy(),
             w_o, b_o, post_norm)
    return c.astype(np.float32)


# -- models that run in transformers: forward hooks on the value projection ----------------------

VALUE_PROJECTIONS = ("value", "v_proj", "v_lin")  # BERT/RoBERTa/ELECTRA, OPT/BART-style, DistilBERT
_LAYER_PATH = re.compile(r"^(.*?\.(\d+))\.")  # the value projection's path up to its layer's index
# Which call the value hooks act for: torch's forward hooks are shared by every thread, so each
# call's hooks act only while this holds that call's own _Zeroing (set in its context, as
# hooks.intervene does for our model); another thread's forward, or another call's hooks, pass.
_zeroing: contextvars.ContextVar[_Zeroing | None] = contextvars.ContextVar("attention_viz_zeroing", default=None)


class _Zeroing:
    """One call's state: which key each copy of the batch loses, and the layer outputs seen."""

    def __init__(self) -> None:
        self.keys = torch.empty(0, dtype=torch.long)
        self.outputs: list[torch.Tensor] = []

    def zero(self, module: nn.Module, args: object, output: torch.Tensor) -> torch.Tensor | None:
        if _zeroing.get() is not self:
            return None
        output = output.clone()  # (J, T, h·d_k)
        output[torch.arange(len(self.keys), device=output.device), self.keys.to(output.device)] = 0.0
        return output

    def zero_heads(self, v: torch.Tensor, hook: object) -> torch.Tensor | None:
        """The same at a v hook point, whose tensor is (J, h_kv, T, d_k)."""
        if _zeroing.get() is not self or not len(self.keys):
            return None
        v = v.clone()
        v[torch.arange(len(self.keys), device=v.device), :, self.keys.to(v.device)] = 0.0
        return v

    def keep(self, module: nn.Module, args: object, output) -> None:
        if _zeroing.get() is self:
            self.outputs.append(output[0] if isinstance(output, tuple) else output)

    def layer_output(self, model: nn.Module, ids: torch.Tensor, extra: dict, keys: torch.Tensor) -> torch.Tensor:
        """The hooked layer's output ``(B, T, d)`` in a forward of ``ids``, copy b without the values
        of key ``keys[b]`` (empty ``keys``: nothing zeroed)."""
        self.keys, self.outputs = keys, []
        token = _zeroing.set(self)
        try:
            model(input_ids=ids, attention_mask=torch.ones_like(ids), **extra)
        finally:
            _zeroing.reset(token)
        return self.outputs[-1]


def _registry_values(backend: Backend) -> dict[int, tuple[str, nn.Module]]:
    """Layer → (its v hook name, its layer module) where the attention runs through our registered
    function (any family, fused Q/K/V projections too); empty otherwise."""
    registry = getattr(backend, "registry", None)
    if registry is None:
        return {}
    from .hf_attention import layer_path  # transformers' registry: loaded with the backend that uses it

    return {site.layer: (hook_name(site.group, site.layer, "v"), registry.model.get_submodule(layer_path(site.path)))
            for site in registry.sites if site.group in (ENCODER_SELF, DECODER_SELF)}


def _value_projections(model: nn.Module) -> dict[int, tuple[nn.Module, nn.Module]]:
    """Layer → (its value projection, its layer module), found by the names families give them."""
    values = {}
    for path, module in model.named_modules():
        match = _LAYER_PATH.match(path)
        if match and path.rsplit(".", 1)[-1] in VALUE_PROJECTIONS and isinstance(module, nn.Linear):
            values[int(match.group(2))] = (module, model.get_submodule(match.group(1)))
    return values


def transformers_value_zeroing(backend: Backend, result: AttentionResult) -> dict[str, np.ndarray]:
    """Value zeroing of an encoder-only or decoder-only ``transformers`` model whose attention has a
    value projection of its own (an ``nn.Linear`` named value, v_proj or v_lin in every layer): the
    model on T copies of the input per layer, copy j with row j of that layer's value projection
    output zeroed by a forward hook, the layer's own output read by another."""
    model = backend.model
    if backend.shape not in ("encoder-only", "decoder-only"):
        raise ModelError(f"{backend.name} cannot give value zeroing here: it is {backend.shape} and runs in "
                         "transformers (encoder-only and decoder-only models can)")
    values = _registry_values(backend) or _value_projections(model)
    if not values or sorted(values) != list(range(len(values))):
        raise ModelError(f"{backend.name} runs in transformers and its attention has no value projection of its own "
                         "(e.g. GPT-2 fuses Q, K and V): value zeroing cannot reach its values")
    group = ENCODER_SELF if backend.shape == "encoder-only" else DECODER_SELF
    ids = torch.tensor([list(result.tokens.ids)], device=next(model.parameters()).device)
    length = ids.size(1)
    extra = {"use_cache": False} if backend.shape == "decoder-only" else {}
    allowed = np.tril(np.ones((length, length), dtype=bool)) if backend.shape == "decoder-only" else None
    width = model.config.hidden_size * 4 + model.config.num_attention_heads * length
    copies = max(1, ZEROED_ELEMENTS // (length * width))
    out = {}
    layers = progress.steps("value zeroing, layers", len(values))
    for index, (value, layer) in sorted(values.items()):
        call = _Zeroing()
        handles = [layer.register_forward_hook(call.keep)]
        # at our v hook point (heads first: (B, h_kv, T, d)) where the attention runs through the registry
        zeroing = intervene([(value, call.zero_heads)]) if isinstance(value, str) else nullcontext()
        if not isinstance(value, str):
            handles.append(value.register_forward_hook(call.zero))
        try:
            with torch.inference_mode(), zeroing:
                real = call.layer_output(model, ids, extra, torch.empty(0, dtype=torch.long))[0]
                distances = np.empty((length, length))
                for start in range(0, length, copies):
                    keys = torch.arange(start, min(start + copies, length))
                    zeroed = call.layer_output(model, ids.expand(len(keys), -1), extra, keys)
                    distances[:, start : start + len(keys)] = cosine_distances(
                        real.float().cpu().numpy(), zeroed.float().cpu().numpy())
        finally:
            for handle in handles:
                handle.remove()
        out[hook_name(group, index, "value_zeroing")] = value_zeroing_map(distances, allowed).astype(np.float32)
        layers.done()
    return out

