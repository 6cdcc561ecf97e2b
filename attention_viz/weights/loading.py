"""A checkpoint into a model built on the meta device, tensor by tensor, on the target device and dtype.

A model built under ``torch.device("meta")`` has every parameter's shape and no memory. Each checkpoint
tensor is then read (shard by shard, from a :class:`~.safetensors_io.SafetensorsFolder`), cast to
the dtype on the device it was read to, renamed, split or transposed by its family's
:class:`Layout`, and becomes the model's parameter: the host never holds a float32 model beside the
checkpoint, only what is already placed, the shard being read (mapped) and the tensor being converted.

Tied parameters (GPT-2's output projection is its embedding) stay one Parameter. Buffers the model
computes at construction (the sinusoidal table) are computed again on the device. At the end every
parameter must have come from the checkpoint and nothing may be left on meta: a model that ran on
initial or missing weights would draw attention that looks as real as any other.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Protocol

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from ..core.model import Transformer, TransformerConfig
from ..core.positional import SinusoidalEncoding, sinusoidal
from ..errors import ModelError
from .matching import check_names, check_shapes, listed
from .safetensors_io import owned

Converted = list[tuple[str, torch.Tensor]]  # our parameter name → its tensor


@dataclass(frozen=True)
class Layout:
    """How one family's checkpoint becomes our parameters."""

    family: str  # for messages: "Llama", "GPT-2" …
    prefix: str  # what a task class adds to every name ("model." …); optional in the checkpoint
    expected: dict[str, tuple[int, ...]]  # checkpoint name (no prefix) → its shape as stored
    ignored: Callable[[str], bool]  # names known and left out (old mask buffers, a tied head's copy)
    convert: Callable[[str, torch.Tensor], Converted]  # checkpoint name, tensor → ours
    n_layers: int  # for messages


class Checkpoint(Protocol):
    """Names and shapes known before any tensor is read; tensors read one at a time."""

    shapes: Mapping[str, tuple[int, ...]]

    def read(self, names: Iterable[str], device: str | torch.device) -> Iterator[tuple[str, torch.Tensor]]: ...


class InMemory:
    """Tensors a caller already holds (a dict), behind the interface of a folder."""

    def __init__(self, tensors: Mapping[str, torch.Tensor]) -> None:
        self.tensors = tensors
        self.shapes = {name: tuple(tensor.shape) for name, tensor in tensors.items()}

    def read(self, names: Iterable[str], device: str | torch.device = "cpu") -> Iterator[tuple[str, torch.Tensor]]:
        for name in names:
            yield name, self.tensors[name]


def as_checkpoint(tensors: Mapping[str, torch.Tensor] | Checkpoint) -> Checkpoint:
    """A dict of tensors wrapped as a :class:`Checkpoint`; a checkpoint as it is."""
    return InMemory(tensors) if isinstance(tensors, Mapping) else tensors


def on_meta(config: TransformerConfig) -> Transformer:
    """Our model with every parameter shaped and none allocated, waiting for :func:`fill`."""
    with torch.device("meta"), DrawNothing():
        return Transformer(config)


RANDOM_INIT = {torch.Tensor.normal_, torch.Tensor.uniform_, nn.init.normal_, nn.init.uniform_}


class DrawNothing(TorchFunctionMode):
    """Random initialisation of a meta tensor, skipped: it has no values to draw, and torch's meta
    ``normal_`` imports ``torch._dynamo`` on its first call (slow, and its memory stays), which the
    model's own path otherwise never loads. Only meta tensors are touched: real ones initialise as
    usual."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        target = args[0] if args else kwargs.get("tensor")  # nn.init passes its tensor by keyword
        if func in RANDOM_INIT and isinstance(target, torch.Tensor) and target.is_meta:
            return target
        return func(*args, **kwargs)



def weight_dtype(dtype: torch.dtype | None) -> torch.dtype:
    """The parameters' dtype: float32 unless a floating-point dtype is asked for."""
    if dtype is None:
        return torch.float32
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ModelError(f"weights need a floating-point dtype, got {dtype}")
    return dtype


def fill(
    model: Transformer,
    checkpoint: Mapping[str, torch.Tensor] | Checkpoint,
    layout: Layout,
    *,
    device: str | torch.device = "cpu",
    dtype: torch.dtype | None = None,
) -> None:
    """Every parameter of ``model`` (on meta, or real) from ``checkpoint`` as ``layout`` maps it.

    Names, then shapes, are checked before any tensor is read: ModelError naming the first missing,
    unexpected and mis-shaped tensors.
    """
    checkpoint, dtype, device = as_checkpoint(checkpoint), weight_dtype(dtype), torch.device(device)
    short: dict[str, str] = {}  # checkpoint name without the prefix → as stored
    for name in checkpoint.shapes:
        bare = name.removeprefix(layout.prefix)
        if bare in short:
            raise ModelError(f"{layout.family} checkpoint holds {bare} twice: as {short[bare]} and as {name}")
        short[bare] = name
    ignored = {name for name in short if layout.ignored(name)}
    check_names(layout.family, set(short), set(layout.expected), ignored, layout.n_layers)
    check_shapes(layout.family, {name: checkpoint.shapes[short[name]] for name in layout.expected}, layout.expected)

    placing = Placing(model)
    wanted = {short[name]: name for name in layout.expected}
    for stored, tensor in checkpoint.read(wanted, device):
        for ours, part in layout.convert(wanted[stored], owned(tensor, device, dtype)):
            placing.place(ours, part)
    placing.finish(layout.family, device, dtype)


class Placing:
    """Our parameters as they are placed: tied names share one Parameter; all must be placed."""

    def __init__(self, model: Transformer) -> None:
        self.model = model
        by_parameter: dict[int, list[str]] = defaultdict(list)
        for name, parameter in model.named_parameters(remove_duplicate=False):
            by_parameter[id(parameter)].append(name)
        self.tied = {name: names for names in by_parameter.values() for name in names}
        self.placed: set[str] = set()

    def place(self, name: str, tensor: torch.Tensor) -> None:
        if name in self.placed:  # its tied partner already placed the one Parameter they share
            return
        old = self.model.get_parameter(name)
        if tuple(tensor.shape) != tuple(old.shape):
            raise ModelError(f"{name} would get shape {tuple(tensor.shape)}, the model's is {tuple(old.shape)}")
        parameter = nn.Parameter(alone(tensor), requires_grad=old.requires_grad)
        for partner in self.tied[name]:
            path, _, leaf = partner.rpartition(".")
            setattr(self.model.get_submodule(path), leaf, parameter)
            self.placed.add(partner)

    def finish(self, family: str, device: torch.device, dtype: torch.dtype) -> None:
        """Buffers onto the device; ModelError naming what the checkpoint left unfilled or on meta."""
        unfilled = set(self.tied) - self.placed
        if unfilled:
            raise ModelError(f"{family} checkpoint left parameters without weights: {listed(unfilled)}")
        rebuild_buffers(self.model, device, dtype)
        on_meta = [name for name, t in (*self.model.named_parameters(), *self.model.named_buffers()) if t.is_meta]
        if on_meta:
            raise ModelError(f"{family} model has tensors with no values (on meta): {listed(on_meta)}")


def rebuild_buffers(model: nn.Module, device: torch.device, dtype: torch.dtype) -> None:
    """The buffers a model computes at construction, computed again on ``device`` (floating ones in
    ``dtype``, as ``model.to`` would cast them). Of ours only the sinusoidal table is a buffer
    (rotary angles and causal masks are made per forward); any other left on meta is named in the
    error of :meth:`Placing.finish`, not guessed at here."""
    for module in model.modules():
        for name, buffer in module.named_buffers(recurse=False):
            if buffer.is_meta and isinstance(module, SinusoidalEncoding) and name == "pe":
                buffer = sinusoidal(*buffer.shape)
            if not buffer.is_meta:
                setattr(module, name, buffer.to(device=device, dtype=dtype if buffer.is_floating_point() else None))


def alone(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor`` in memory of its own size: a view (one third of a fused q/k/v tensor) would keep
    the whole fused tensor alive, and a transposed one runs slower."""
    if tensor.is_contiguous() and tensor.untyped_storage().nbytes() == tensor.nbytes:
        return tensor
    return tensor.clone(memory_format=torch.contiguous_format)
