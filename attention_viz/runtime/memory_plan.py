"""Memory planned before a run, not hoped for: the bytes a forward of T tokens needs on the model's
device, against what that device has free, so a run that cannot fit is refused in one sentence
(needed, free, the longest input that fits) instead of dying in the allocator halfway through.

The estimate is a sum of the tensors the run holds at its peak, from the model's shape:

* weights: every parameter and buffer (already resident once the model is on the device: the free
  memory the device reports has them taken off);
* activations: the largest layer's working set — residual stream in and out, the normalized input,
  q/k/v and their rotated copies, the context, the feed-forward's hidden layer (two of them gated),
  and a block of next-token logits; an eager capture adds that layer's float32 scores and softmax
  (h × T² each) and the boolean mask; the long path adds one block of its blockwise passes instead;
* kept: what outlives each layer — a full capture's arrays (pattern and scores layers × h × T² × 4
  bytes each, q/context layers × h × T × d_k × 4, k/v per K/V head), or the long path's q/k,
  (h + h_kv) × T × d_k × (4 on the CPU, the model's element size on a GPU) per layer, and its
  normalizers.

The long path runs layers as views ask (core/longcontext.py), so it is planned a layer at a time: the
head view's landing needs layer 0 alone; before each further layer :func:`layer_room` asks again, with
what is then free, and where one more layer does not fit beside the layers kept on a GPU it has the
lowest of them moved to host memory (8B shape, 128k tokens: 1.3 GB of q/k a layer, 43 GB for 32).

A part of the free memory is left aside (:data:`HEADROOM`) for what the sum leaves out: the allocator's
rounding and fragmentation, kernels' workspaces.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path

import torch

from ..core.blockwise_torch import BLOCK_ROWS, CHUNK
from ..core.hooks import KINDS
from ..core.model import Transformer
from ..errors import ModelError

GB = 1e9
HEADROOM = 0.9  # the share of the free memory a run may plan to use
LOGIT_ROWS = 256  # next-token positions scored at once (backends/ours_decoder.py)
TILES = 512  # the long path's pooled tiles per side
SQUARE_KINDS = ("scores", "pattern")  # (query × key) arrays per head
ROW_KINDS = {"q": "h", "context": "h", "k": "kv", "v": "kv"}  # (T × d_k) arrays per query or K/V head
FLOAT32 = 4


@dataclass(frozen=True)
class MemoryPlan:
    """One run's bytes on its device: what it needs and what is free."""

    device: str
    length: int
    weights: int
    weights_resident: bool  # already on the device: counted out of ``free`` there
    activations: int
    kept: int
    free: int

    @property
    def needed(self) -> int:
        """Bytes the run adds to the device: activations and what it keeps, plus weights not yet there."""
        return self.activations + self.kept + (0 if self.weights_resident else self.weights)

    @property
    def fits(self) -> bool:
        return self.needed <= HEADROOM * self.free


def free_bytes(device: torch.device | str) -> int:
    """Bytes a run may still take on ``device``: CUDA's free memory plus what torch's caching allocator
    holds unused; on the CPU the available RAM (psutil, else /proc/meminfo)."""
    device = torch.device(device)
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return int(free + torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device))
    try:
        import psutil
    except ImportError:
        return _meminfo_available()
    return int(psutil.virtual_memory().available)


def _meminfo_available() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024  # kB
    raise ModelError("cannot tell the free memory of this machine (no MemAvailable in /proc/meminfo)")


def _layers(model: Transformer) -> int:
    """Attention layers a forward runs (each of an encoder–decoder's decoder layers counted twice)."""
    config = model.config
    decoder = config.N_dec or config.N
    if config.shape == "encoder-only":
        return config.N
    if config.shape == "decoder-only":
        return decoder
    return config.N + 2 * decoder


def weight_bytes(model: Transformer) -> int:
    return sum(t.numel() * t.element_size() for t in [*model.parameters(), *model.buffers()])


def _element(model: Transformer) -> int:
    return next(model.parameters()).element_size()


def activation_bytes(model: Transformer, length: int, square: bool) -> int:
    """The largest layer's working set for ``length`` tokens; ``square``: the eager attention's
    float32 scores and softmax and the mask (h × T² each), else one block of the long path's passes."""
    config, b, t = model.config, _element(model), length
    rows = t * 3 * (config.h + config.kv_heads) * config.d_k  # q, k, v, rotated q and k, context
    stream = 3 * t * config.d_model  # residual in, out, normalized
    ffn = t * config.d_ff * (3 if config.gated_ffn else 2) if config.feed_forward else 0
    logits = min(t, LOGIT_ROWS) * config.vocab_size * FLOAT32 * 2 if config.generator else 0
    if square:
        attention = 2 * config.h * t * t * FLOAT32 + t * t
    else:
        attention = 3 * min(t, BLOCK_ROWS) * min(t, CHUNK) * FLOAT32 + 2 * TILES * TILES * 8
    return (rows + stream + ffn) * b + logits + attention


def capture_bytes(model: Transformer, length: int, kinds: Collection[str] | None) -> int:
    """What a capture of ``kinds`` (None: every kind) keeps: float32 arrays of every layer."""
    config, layers = model.config, _layers(model)
    kinds = KINDS if kinds is None else kinds
    heads = {"h": config.h, "kv": config.kv_heads}
    square = sum(config.h * length * length for kind in SQUARE_KINDS if kind in kinds)
    rows = sum(heads[per] * length * config.d_k for kind, per in ROW_KINDS.items() if kind in kinds)
    return layers * (square + rows) * FLOAT32


def long_bytes(model: Transformer, length: int, layers: int | None = None) -> int:
    """What the long path keeps for ``layers`` layers (None: every layer): their q and k (in the
    model's dtype on a GPU, float32 numpy on the CPU) and each head's float32 normalizers."""
    config, layers = model.config, _layers(model) if layers is None else layers
    element = FLOAT32 if next(model.parameters()).device.type == "cpu" else _element(model)
    return layers * ((config.h + config.kv_heads) * length * config.d_k * element + config.h * length * FLOAT32)


def _plan(model: Transformer, length: int, free: int | None, activations: int, kept: int,
          device: torch.device | None) -> MemoryPlan:  # fmt: skip
    here = next(model.parameters()).device
    device = here if device is None else torch.device(device)
    free = free_bytes(device) if free is None else free
    return MemoryPlan(str(device), length, weight_bytes(model), device == here, activations, kept, free)


def plan_capture(model: Transformer, length: int, kinds: Collection[str] | None = ("pattern",),
                 free: int | None = None, device: torch.device | None = None) -> MemoryPlan:  # fmt: skip
    """A forward of ``length`` tokens capturing ``kinds``, on ``device`` (default: where the model is);
    ``free``: the device's free bytes (default: asked of the device)."""
    activations, kept = activation_bytes(model, length, True), capture_bytes(model, length, kinds)
    return _plan(model, length, free, activations, kept, device)


def plan_long(model: Transformer, length: int, free: int | None = None,
              device: torch.device | None = None, layers: int | None = 1) -> MemoryPlan:  # fmt: skip
    """The long path (core/longcontext.py) over ``length`` tokens keeping ``layers`` layers' q/k (1:
    the next layer a view asks for, beside what the device already holds; None: every layer at once)."""
    kept = long_bytes(model, length, layers)
    return _plan(model, length, free, activation_bytes(model, length, False), kept, device)


def largest_length(plan: Callable[[int], MemoryPlan], limit: int) -> int:
    """The longest input up to ``limit`` whose plan fits (0: not even one token)."""
    lo, hi = 0, limit
    while lo < hi:  # the needed bytes grow with the length
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if plan(mid).fits else (lo, mid - 1)
    return lo


def _refuse(name: str, what: str, plan: MemoryPlan, longest: int, advice: str = "") -> ModelError:
    resident = "on top of its weights" if plan.weights_resident else f"weights ({plan.weights / GB:.2f} GB) included"
    fits = f"at most {longest} tokens fit" if longest else "not even one token fits"
    return ModelError(f"{name}: {what} needs about {plan.needed / GB:.2f} GB on {plan.device} ({resident}) "
                      f"but {plan.free / GB:.2f} GB is free, of which a run plans on {HEADROOM:.0%}: {fits}{advice}")


def check_capture(model: Transformer, name: str, length: int, kinds: Collection[str] | None = ("pattern",),
                  free: int | None = None, longer: str = "") -> MemoryPlan:  # fmt: skip
    """:func:`plan_capture`, or a ModelError with the numbers when it does not fit; ``longer``: what
    the caller offers for inputs past the longest that fits (e.g. the blockwise path)."""
    plan = plan_capture(model, length, kinds, free)
    if plan.fits:
        return plan
    longest = largest_length(lambda n: plan_capture(model, n, kinds, plan.free), length)
    every = kinds is None or any(kind in kinds for kind in SQUARE_KINDS)
    what = f"capturing every head of {length} tokens" if every else f"a forward of {length} tokens"
    raise _refuse(name, what, plan, longest, longer)


def check_long(model: Transformer, name: str, length: int, free: int | None = None) -> MemoryPlan:
    """:func:`plan_long` of the first layer a view reads, or a ModelError with the numbers when it
    does not fit."""
    plan = plan_long(model, length, free)
    if plan.fits:
        return plan
    longest = largest_length(lambda n: plan_long(model, n, plan.free), length)
    raise _refuse(name, f"reading {length} tokens blockwise", plan, longest)


def layer_room(model: Transformer, name: str, length: int,
               free: Callable[[], int] | None = None) -> Callable[[int, int], int]:  # fmt: skip
    """The long path's question before it makes another layer's q/k, given the layer and the bytes of
    q/k it keeps on a GPU (``movable``): how many of those bytes must first go to host memory (0: none).
    ModelError with the numbers where that layer does not fit even with every kept one moved.
    ``free``: the device's free bytes now (default: asked of the device where the model is)."""
    device = next(model.parameters()).device

    def room(layer: int, movable: int) -> int:
        plan = plan_long(model, length, free_bytes(device) if free is None else free())
        short = max(0, plan.needed - int(HEADROOM * plan.free))
        if short <= movable:
            return short
        freed = plan_long(model, length, plan.free + movable)  # every kept layer moved to the host
        longest = largest_length(lambda n: plan_long(model, n, freed.free), length)
        raise _refuse(name, f"reading layer {layer} of {length} tokens blockwise", freed, longest,
                      f" (earlier layers' q/k moved to host memory counted as free)" if movable else "")

    return room
