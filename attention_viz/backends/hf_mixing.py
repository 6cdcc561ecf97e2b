"""ALTI (Ferrando et al. 2022) of transformers' models whose attention runs through our registered
function: one forward captures each layer's input (``resid_pre``), values and pattern at our hook
points, and :func:`attention_viz.analysis.alti.alti` decomposes the block in the layout the layer's
norms have (:meth:`attention_viz.backends.hf_model.RegistryModel.norm_layout`): pre-norm, a LayerNorm
after the residual (BERT), or an RMSNorm on the attention's output (Gemma 2/3, OLMo 2). Written once
per layout, not per family; any other layout is refused naming what is unknown."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from ..analysis.alti import PostNorm, alti
from ..core.hooks import capture
from ..core.names import CROSS, hook_name, layer_hook_name
from ..core.result import AttentionResult
from ..errors import ModelError
from .hf_model import RegistryModel


def norm_arrays(norm: nn.Module) -> PostNorm:
    """A LayerNorm or RMSNorm module as plain arrays; Gemma's RMSNorm scales by 1 + weight."""
    weight = norm.weight.detach().double().cpu().numpy()
    gamma = 1.0 + weight if type(norm).__name__.startswith("Gemma") else weight
    bias = getattr(norm, "bias", None)
    eps = next(float(getattr(norm, a)) for a in ("eps", "variance_epsilon") if hasattr(norm, a))
    return PostNorm(gamma=gamma, beta=None if bias is None else bias.detach().double().cpu().numpy(), eps=eps,
                    centred=isinstance(norm, nn.LayerNorm))


def registry_alti(name: str, registry: RegistryModel, result: AttentionResult) -> dict[str, np.ndarray]:
    """``[query, key]`` ALTI maps of every self-attention layer for ``result``'s tokens."""
    if registry.shape == "encoder-decoder":
        raise ModelError(f"{name} cannot give ALTI: the decoder of a transformers encoder–decoder also reads the "
                         "encoder, which the decomposition of a self-attention block leaves out")
    sites = [s for s in registry.sites if s.group != CROSS]
    try:
        layouts = [registry.norm_layout(site) for site in sites]
    except ModelError as unknown:
        raise ModelError(f"{name} cannot give ALTI: {unknown}") from None
    ids = torch.tensor([list(result.tokens.ids)], device=next(registry.model.parameters()).device)
    extra = {"use_cache": False} if registry.shape == "decoder-only" else {}
    with torch.inference_mode(), capture(kinds=("pattern", "v", "resid_pre")) as recorded:
        registry.model(input_ids=ids, **extra)
    out = {}
    for site, (layout, norm) in zip(sites, layouts):
        group, layer = site.group, site.layer

        def read(hook: str) -> np.ndarray:
            return recorded[hook][0].float().cpu().numpy()

        x = read(layer_hook_name(group[0], layer))
        post_norm = norm_arrays(norm) if layout == "post" else None
        attention_norm = norm_arrays(norm) if layout == "sandwich" else None
        c = alti(x, read(hook_name(group, layer, "pattern")), read(hook_name(group, layer, "v")),
                 registry.output_projection(group, layer), registry.output_bias(group, layer), post_norm,
                 attention_norm)
        out[hook_name(group, layer, "alti")] = c.astype(np.float32)
    return out
