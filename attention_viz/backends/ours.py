"""What every backend running our own Transformer (model.py) shares: placing it on a device and dtype,
its inputs there and its outputs back as float32 numpy, reading an attention's output projection, and
turning a plain :class:`~attention_viz.analysis.ablation.Ablation` into the per-call
head removal of :func:`attention_viz.core.hooks.ablate`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np
import torch

from ..analysis.ablation import Ablation, format_head
from ..errors import ModelError
from ..core.hooks import HeadRemoval, ablate
from ..core.model import MultiHeadAttention, Transformer
from ..core.names import Group
from ..runtime.device import Placement


def placed(model: Transformer, placement: Placement) -> Transformer:
    """``model`` moved to ``placement``'s device, its floating weights and buffers cast to its dtype."""
    return model.to(device=placement.device, dtype=placement.torch_dtype)


def device_of(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device


def input_ids(model: torch.nn.Module, ids: list[int]) -> torch.Tensor:
    """One sequence of token ids as a ``(1, T)`` batch on the model's device."""
    return torch.tensor([ids], device=device_of(model))


def to_numpy(tensor: torch.Tensor) -> np.ndarray:
    """float32 on the CPU, whatever the model's device and dtype (numpy has no bfloat16)."""
    return tensor.detach().float().cpu().numpy()


def attention_module(model: Transformer, group: Group, layer: int) -> MultiHeadAttention | None:
    part, attn = group
    stack = getattr(model, part, None)
    if stack is None or not 0 <= layer < len(stack.layers):
        return None
    module = getattr(stack.layers[layer], attn, None)
    return module if isinstance(module, MultiHeadAttention) else None


def output_projection(model: Transformer, group: Group, layer: int) -> np.ndarray | None:
    """W_O as ``(h·d_k, d_model)`` for ``x W_O`` (nn.Linear stores its transpose)."""
    module = attention_module(model, group, layer)
    return None if module is None else to_numpy(module.w_o.weight.T).copy()


def removals(model: Transformer, ablation: Ablation) -> dict[str, HeadRemoval]:
    """Context hook name → HeadRemoval; a ModelError names any head the model does not have."""
    def heads_of(group: Group, layer: int) -> int:
        module = attention_module(model, group, layer)
        return 0 if module is None else module.h

    return head_removals(ablation, heads_of, device_of(model))


def head_removals(ablation: Ablation, heads_of: Callable[[Group, int], int],
                  device: torch.device) -> dict[str, HeadRemoval]:
    """Context hook name → HeadRemoval for any model that says how many heads each attention has
    (``heads_of``: 0 where there is no such attention); a ModelError names a head it lacks."""
    for head in ablation.heads:
        group, layer, index = head
        if not 0 <= index < heads_of(group, layer):
            raise ModelError(f"the model has no head {format_head(head)}")
    out = {}
    for name, heads in ablation.by_context().items():
        rows = ablation.replacement(name)
        replacement = None if rows is None else torch.as_tensor(rows, dtype=torch.float32, device=device)
        out[name] = HeadRemoval(heads, replacement)
    return out


@contextmanager
def ablation_context(model: Transformer, ablation: Ablation | None) -> Iterator[None]:
    """The ``with`` block runs ``model`` without ``ablation``'s heads (nothing when None or empty)."""
    if ablation is None or not ablation.heads:
        yield
        return
    with ablate(removals(model, ablation)):
        yield
