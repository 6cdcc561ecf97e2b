"""Direct logit attribution of transformers' decoders whose attention runs through our registered
function (:mod:`attention_viz.backends.hf_attention`); the parts are those of
:mod:`attention_viz.analysis.logit_attribution`.

One forward captures the stream entering every layer (``resid_pre``) and every head's context, and a
forward pre-hook on the final norm (for this call only, :mod:`.hf_module_hooks`) keeps the stream it reads. A head writes
its context through its columns of W_O; where the family puts the attention's output through a norm
before the residual (Gemma 2/3, OLMo 2: the "sandwich" layout) that norm's scale is frozen at the run's
own value, so the heads still add up to what the attention wrote. A layer's MLP (experts included)
wrote the rest of what the layer added: the stream leaving it, minus the stream entering it, minus the
attention's output. Every part then goes through the final norm with the run's scale frozen and is
dotted with W_U[answer] − W_U[wrong], times the family's logit scale (Cohere). A final soft-cap
(Gemma 2: c·tanh(z/c)) is not linear, so the parts split the logit difference before it; the metric
says so.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from ..core.hooks import capture
from ..core.names import DECODER_SELF, hook_name, layer_hook_name
from ..errors import ModelError
from .hf_mixing import norm_arrays
from .hf_model import RegistryModel
from .hf_module_hooks import module_hooks

Linear = Callable[[torch.Tensor], torch.Tensor]


def linear_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, eps: float,
                centred: bool) -> tuple[Linear, torch.Tensor]:
    """A norm over the last dimension as a linear map with its scale frozen at ``x`` (..., d_model):
    (apply, bias) with norm(y) = apply(y) + bias for every y (n, ..., d_model) whose parts sum to x."""
    x = x - x.mean(-1, keepdim=True) if centred else x
    scale = torch.sqrt((x * x).mean(-1, keepdim=True) + eps)

    def apply(y: torch.Tensor) -> torch.Tensor:
        y = y - y.mean(-1, keepdim=True) if centred else y
        return y / scale * weight

    return apply, bias if bias is not None else torch.zeros_like(x)


def frozen_registry_norm(norm: nn.Module, x: torch.Tensor) -> tuple[Linear, torch.Tensor]:
    """A transformers norm (RMSNorm, Gemma's 1 + weight, LayerNorm, Cohere's bias-free LayerNorm) as
    :func:`linear_norm` at ``x``, in ``x``'s dtype."""
    arrays = norm_arrays(norm)
    centred = arrays.centred or type(norm).__name__.endswith("LayerNorm")
    as_tensor = lambda a: None if a is None else torch.as_tensor(a, dtype=x.dtype, device=x.device)  # noqa: E731
    return linear_norm(x, as_tensor(arrays.gamma), as_tensor(arrays.beta), arrays.eps, centred)


def check_decoder(name: str, registry: RegistryModel, what: str) -> None:
    if registry.shape == "encoder-only":
        raise ModelError(f"{name} is a sentence encoder with no unembedding: {what} needs a decoder's next-token "
                         "logits")
    if registry.shape != "decoder-only":
        raise ModelError(f"{what} runs on decoder-only models; {name} is {registry.shape}")
    if not registry.has_lm_head:
        raise ModelError(f"{name} has no LM head: {what} needs its unembedding")


def registry_parts(registry: RegistryModel, ids: list[int], answer: int, wrong: int,
                   p: int) -> dict[str, torch.Tensor | float]:
    """``heads`` (N, h), ``mlp`` (N,), ``embed``, ``rest`` and ``total`` at position ``p`` of ``ids``."""
    sites = sorted((s for s in registry.sites if s.group == DECODER_SELF), key=lambda s: s.layer)
    device = next(registry.model.parameters()).device
    final_norm = registry.final_norm()
    kept: list[torch.Tensor] = []
    keep = [(final_norm, lambda module, args: kept.append(args[0][0, p].detach()))]
    with torch.inference_mode(), capture(kinds=("resid_pre", "context")) as recorded, module_hooks(pre=keep):
        registry.model(input_ids=torch.tensor([ids], device=device), use_cache=False, logits_to_keep=1)
    with torch.inference_mode():
        return _parts(registry, sites, recorded, kept[-1], answer, wrong, p)


def _parts(registry: RegistryModel, sites: list, recorded, kept: torch.Tensor, answer: int, wrong: int,
           p: int) -> dict[str, torch.Tensor | float]:
    final_norm, head = registry.final_norm(), registry.model.get_output_embeddings()
    final = kept.double()
    cap, scale = registry.logit_factor()
    direction = (head.weight[answer] - head.weight[wrong]).double() * scale
    norm, norm_bias = frozen_registry_norm(final_norm, final)

    def dla(y: torch.Tensor) -> torch.Tensor:
        return norm(y) @ direction

    entering = [recorded[layer_hook_name("decoder", s.layer)][0, p].double() for s in sites] + [final]
    rest = norm_bias @ direction
    if getattr(head, "bias", None) is not None:
        rest = rest + (head.bias[answer] - head.bias[wrong]).double() * scale
    heads, mlps = [], []
    for i, site in enumerate(sites):
        context = recorded[hook_name(DECODER_SELF, site.layer, "context")][0, :, p].double()  # (h, d_head)
        projection = registry.projection(DECODER_SELF, site.layer)
        if projection is None:
            raise ModelError(f"cannot find the output projection of {site.path}")
        w_o = (projection.weight.T if isinstance(projection, nn.Linear) else projection.weight).double()
        written = torch.einsum("hk,hkd->hd", context, w_o.reshape(context.size(0), context.size(1), -1))
        bias = getattr(projection, "bias", None)
        bias = torch.zeros_like(final) if bias is None else bias.double()
        output_norm = registry.attention_output_norm(site)
        if output_norm is not None:  # sandwich: the attention's output normed before the residual
            apply, after = frozen_registry_norm(output_norm, written.sum(0) + bias)
            written, bias = apply(written), apply(bias) + after
        heads.append(dla(written))
        mlps.append(dla(entering[i + 1] - entering[i] - written.sum(0) - bias))  # the rest of what the layer added
        rest = rest + dla(bias)
    pre_cap = head(final_norm(kept)).double() * scale
    return {"heads": torch.stack(heads), "mlp": torch.stack(mlps), "embed": float(dla(entering[0])),
            "rest": float(rest), "total": float(pre_cap[answer] - pre_cap[wrong]), "cap": cap}
