"""Our hook points inside transformers' own forward, for every family that calls its attention
through transformers' registry.

transformers 5.x calls each family's attention as ``fn(module, query, key, value, attention_mask,
scaling=, dropout=, **extras)``, looked up by ``config._attn_implementation`` in
``AttentionInterface``. We register :func:`attention_forward` there under :data:`IMPLEMENTATION` and
load models with ``attn_implementation=IMPLEMENTATION``: it receives q and k after rotary, k and v
with the key/value heads not repeated, the mask, the scaling (Gemma's query scalar, GPT-2's layer
scaling, T5's 1.0 are all in it) and the family's extras — ``softcap`` (Gemma 2), ``s_aux`` (GPT-OSS's
sinks), ``position_bias`` (T5); sliding windows arrive inside the mask. There each tensor passes the
same :class:`~attention_viz.core.hooks.HookPoint` our own Transformer has (q, k, v, scores, pattern,
context, read or replaced per call through the same ContextVar), and ``resid_pre`` comes from a
forward pre-hook on each layer that does the same.

Where nobody asked for a layer's scores or pattern (and no gradient is wanted), the context comes from
transformers' own SDPA function, so that layer costs what the SDPA forward costs. Softcapping and sinks
have no fused kernel: those layers always take the explicit path, as transformers' eager does.

The masks come from transformers' SDPA mask function (registered under the same name): a boolean
mask (True = may attend), or None where the mask is only causal or only bidirectional.

What is set on a model's modules at load (:func:`attach`) never changes afterwards: the hook points
live in a weak table beside the modules, and the pre-hooks only read the caller's ContextVar.
"""

from __future__ import annotations

import contextvars
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from ..core.attention import (HALF, causal_attention, family_scores, grouped_context, sees_no_later_key,
                              softmax_with_sinks)
from ..core.hooks import HookPoint, interventions_active
from ..core.names import CROSS, DECODER_SELF, ENCODER_SELF, KINDS, Group, hook_name, layer_hook_name

IMPLEMENTATION = "attention_viz"  # the attn_implementation our models load with

# attention module → its hook points (kind → HookPoint), set by attach(); weak, so a dropped model goes
_POINTS: weakref.WeakKeyDictionary[nn.Module, dict[str, HookPoint]] = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class Call:
    """One call of the registry during the probe forward: the module, its query and key lengths, and
    what the family passed that changes the pattern."""

    module: nn.Module
    queries: int
    keys: int
    scaling: float
    window: int | None  # sliding_window: the last W keys, itself included
    softcap: float | None
    sinks: bool


@dataclass(frozen=True)
class Site:
    """Where one attention module sits (its group, its layer, its path in the model) and the extras
    its family passes (the long path rebuilds patterns from q/k with them)."""

    group: Group
    layer: int
    path: str
    scaling: float = 1.0
    window: int | None = None
    softcap: float | None = None
    sinks: bool = False


def attention_forward(module: nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                      attention_mask: torch.Tensor | None, scaling: float | None = None, dropout: float = 0.0,
                      **extras) -> tuple[torch.Tensor, torch.Tensor | None]:
    """transformers' attention contract: query (B, h, Tq, d), key/value (B, h_kv, Tk, d) → the context
    (B, Tq, h, d) and the weights (or None). The mask is bool (True = may attend) or None."""
    softcap, sinks = extras.get("softcap"), extras.get("s_aux")
    scaling = query.size(-1) ** -0.5 if scaling is None else scaling
    if _probe.get() is not None:
        _probe_seen(Call(module, query.size(-2), key.size(-2), float(scaling), extras.get("sliding_window"),
                         softcap, sinks is not None))
    points = _POINTS.get(module) if interventions_active() else None
    explicit = softcap is not None or sinks is not None  # no fused kernel has them: as transformers' eager
    if points is None and not explicit:
        return _sdpa(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **extras)
    if points is not None:
        query, key, value = points["q"](query), points["k"](key), points["v"](value)
    wants_scores = points is not None and points["scores"].wanted()
    if not explicit and not wants_scores and not points["pattern"].wanted() and not torch.is_grad_enabled():
        context = _sdpa(module, query, key, value, attention_mask, dropout=dropout,
                        scaling=scaling, **extras)[0].transpose(1, 2)  # (B, h, Tq, d)
        weights = None
    else:
        context, pattern = _explicit(module, query, key, value, attention_mask, float(scaling), extras, points,
                                     wants_scores)
        weights = pattern.to(query.dtype)
    if points is not None:
        context = points["context"](context)
    return context.transpose(1, 2).contiguous(), weights


def _explicit(module: nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
              mask: torch.Tensor | None, scaling: float, extras: dict, points: dict[str, HookPoint] | None,
              wants_scores: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """The context (B, h, Tq, d) and the pattern, step by step through the hook points. Where nobody
    reads the scores, a causal self-attention on the CPU goes a block of queries at a time
    (:func:`~attention_viz.core.attention.causal_attention`: the pattern written once, the products
    above the diagonal skipped); otherwise the whole square, each step written into the scores."""
    softcap, sinks, bias = extras.get("softcap"), extras.get("s_aux"), extras.get("position_bias")
    causal = extras.get("is_causal")
    causal = getattr(module, "is_causal", True) if causal is None else causal
    boolean = mask is None or mask.dtype == torch.bool  # else an additive float mask: the whole square
    if (boolean and not wants_scores and bias is None and not torch.is_grad_enabled()
            and sees_no_later_key(query, key, mask, causal)):
        half = query.dtype in HALF  # the products in float32, as family_scores makes them
        blocks = causal_attention(query.float() if half else query, key.float() if half else key, value, mask,
                                  scaling, softcap, sinks, eager_rounding=True)
        pattern = blocks.pattern if points is None else points["pattern"](blocks.pattern)
        # a pattern an intervention replaced mixes the values anew
        return (blocks.context if pattern is blocks.pattern else grouped_context(pattern, value)), pattern
    allowed = _allowed(mask, query.size(-2), key.size(-2), query.device, causal)
    if mask is not None and mask.dtype != torch.bool:  # an additive float mask
        bias = mask if bias is None else bias + mask
    scores = family_scores(query, key, scaling, allowed, bias, softcap)  # (B, h, Tq, Tk) float32
    if points is not None:
        scores = points["scores"](scores)
    pattern = softmax_with_sinks(scores, sinks, allowed, overwrite=not wants_scores)  # nobody keeps the scores
    if points is not None:
        pattern = points["pattern"](pattern)
    return grouped_context(pattern, value), pattern


def _allowed(mask: torch.Tensor | None, queries: int, keys: int, device: torch.device,
             causal: bool) -> torch.Tensor | None:
    """The boolean mask (True = may attend) of the call; a causal one where the SDPA mask function
    left it out (a plain causal mask is passed as None, as transformers' SDPA reads it)."""
    if mask is not None:
        if mask.dtype == torch.bool:
            return mask
        return mask > torch.finfo(mask.dtype).min / 2  # an additive mask: 0 (or a bias) where allowed
    if not causal or queries == 1:
        return None
    # bottom-right aligned, as transformers' masks are: query i of Tq sees keys up to Tk - Tq + i
    return torch.ones(queries, keys, dtype=torch.bool, device=device).tril(keys - queries)


# -- registration --------------------------------------------------------------------------------


_sdpa: Callable = None  # type: ignore[assignment]  # transformers' SDPA attention, bound by register()


def register() -> None:
    """Make :data:`IMPLEMENTATION` loadable (idempotent): our attention function and the SDPA mask.
    Called when a model loads, not on import: transformers' attention modules set process environment
    (torch's inductor cache folder) when they are imported."""
    global _sdpa
    from transformers import AttentionInterface
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    _sdpa = sdpa_attention_forward
    if IMPLEMENTATION not in AttentionInterface._global_mapping:
        AttentionInterface.register(IMPLEMENTATION, attention_forward)
        AttentionMaskInterface.register(IMPLEMENTATION, sdpa_mask)


# -- naming a loaded model's attention modules ----------------------------------------------------

# The probe forward records which modules the registry calls, in call order (per call, like a capture).
_probe: contextvars.ContextVar[list[Call] | None] = contextvars.ContextVar("attention_viz_probe", default=None)


def _probe_seen(call: Call) -> None:
    calls = _probe.get()
    if calls is not None:
        calls.append(call)


def probe(run: Callable[[], object]) -> list[Call]:
    """The registry's calls during ``run()``, in call order."""
    calls: list[Call] = []
    token = _probe.set(calls)
    try:
        with torch.inference_mode():
            run()
        return calls
    finally:
        _probe.reset(token)


def name_sites(model: nn.Module, calls: Sequence[Call], shape: str, decoder_length: int) -> list[Site]:
    """Each called module's group and layer. Encoder–decoder: the encoder's modules are its layers in
    order; in the decoder a module whose key length differs from ``decoder_length`` queries reads the
    encoder (cross-attention). Every module is named once, the first time it is called."""
    paths = {module: path for path, module in model.named_modules()}
    encoder = model.get_encoder() if shape == "encoder-decoder" else None
    encoder_modules = set(encoder.modules()) if encoder is not None else set()
    counts: dict[Group, int] = {}
    sites, seen = [], set()
    for call in calls:
        if call.module in seen:
            continue
        seen.add(call.module)
        if shape == "encoder-only":
            group = ENCODER_SELF
        elif shape == "decoder-only":
            group = DECODER_SELF
        elif call.module in encoder_modules:
            group = ENCODER_SELF
        else:
            group = CROSS if (call.queries, call.keys) != (decoder_length, decoder_length) else DECODER_SELF
        sites.append(Site(group, counts.get(group, 0), paths[call.module], call.scaling, call.window, call.softcap,
                          call.sinks))
        counts[group] = counts.get(group, 0) + 1
    return sites


def layer_path(path: str) -> str:
    """The layer that holds an attention module: its path up to the first index
    (``model.layers.3.self_attn`` → ``model.layers.3``, ``encoder.block.0.layer.1.EncDecAttention`` →
    ``encoder.block.0``)."""
    parts = path.split(".")
    first = next(i for i, part in enumerate(parts) if part.isdigit())
    return ".".join(parts[: first + 1])


def attach(model: nn.Module, sites: Sequence[Site]) -> None:
    """Hook points for every site's module (kept beside it), and a pre-hook on each layer that passes
    the residual stream entering it through ``{part}.layers.{i}.resid_pre``."""
    modules = dict(model.named_modules())
    layers_done = set()
    for site in sites:
        points = {}
        for kind in KINDS:
            point = HookPoint()
            point.name = hook_name(site.group, site.layer, kind)
            points[kind] = point
        _POINTS[modules[site.path]] = points
        if site.group == CROSS:
            continue
        path = layer_path(site.path)
        if path in layers_done:
            continue
        layers_done.add(path)
        resid = HookPoint()
        resid.name = layer_hook_name(site.group[0], site.layer)
        modules[path].register_forward_pre_hook(_residual_hook(resid), with_kwargs=True)


def _residual_hook(point: HookPoint):
    def hook(layer: nn.Module, args: tuple, kwargs: dict):
        if not interventions_active():
            return None
        if args:
            return (point(args[0]), *args[1:]), kwargs
        if "hidden_states" in kwargs:
            return args, {**kwargs, "hidden_states": point(kwargs["hidden_states"])}
        return None
    return hook


def points_of(module: nn.Module) -> dict[str, HookPoint] | None:
    """The hook points attached to an attention module (None for modules we did not name)."""
    return _POINTS.get(module)
