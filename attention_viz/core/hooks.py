"""Named hook points, and the one way to reach inside a forward: per-call interventions.

A :class:`HookPoint` is an identity module placed wherever a tensor is worth seeing or changing (q,
k, v, scores, pattern and context of every attention, the residual stream entering every layer).
Its name is its path in the module tree, e.g. ``encoder.layers.3.self_attn.pattern``, assigned by
:func:`name_hook_points`, never typed by hand.

One model object serves every browser session at once, so nothing may go through state on the
modules (torch forward hooks are shared by all threads). :func:`intervene` installs a list of
``(hook name, function)`` pairs in a :class:`contextvars.ContextVar`: each thread (and each asyncio
task) sees only its own, and the ``finally`` of the context manager removes them even when the
forward raises. At a hook point each function gets the tensor and the hook point and returns None
(it only reads) or a tensor of the same shape that replaces it downstream (TransformerLens's
``run_with_hooks(fwd_hooks=[(name, fn)])``). :func:`capture` (reading) and :func:`ablate`
(replacing heads' outputs) are two uses of it; activation patching and value zeroing are others.
Outside any intervention a hook point costs one ContextVar lookup.
"""

from __future__ import annotations

import contextvars
import fnmatch
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager

import torch
from torch import nn

from .names import KINDS, LAYER_KINDS  # (defined without torch: the CLI checks --kinds before loading it)

HookFn = Callable[[torch.Tensor, "HookPoint"], "torch.Tensor | None"]
# where a function applies: an exact hook name, a glob (``encoder.layers.*.self_attn.context``), or
# a predicate on the name
Where = str | Callable[[str], bool]


class Interventions:
    """The pairs of one :func:`intervene` block. ``observe``: a capture's frame, whose functions
    run after every replacing one, so a capture records exactly what flows on downstream."""

    def __init__(self, fwd_hooks: Sequence[tuple[Where, HookFn]], observe: bool = False) -> None:
        self.fwd_hooks = list(fwd_hooks)
        self.observe = observe
        self._by_name: dict[str, tuple[HookFn, ...]] = {}  # each name matched once per block

    def at(self, name: str) -> tuple[HookFn, ...]:
        functions = self._by_name.get(name)
        if functions is None:
            functions = self._by_name[name] = tuple(fn for where, fn in self.fwd_hooks if _matches(where, name))
        return functions


def _matches(where: Where, name: str) -> bool:
    if callable(where):
        return bool(where(name))
    return where == name or fnmatch.fnmatchcase(name, where)


_active: contextvars.ContextVar[tuple[Interventions, ...]] = contextvars.ContextVar("attention_viz_hooks", default=())


class HookPoint(nn.Module):
    """Identity module; inside :func:`intervene` (or :func:`capture`) it hands its input to this
    call's functions for its name and passes on what they return."""

    def __init__(self) -> None:
        super().__init__()
        self.name = ""  # set from the module path by name_hook_points

    @property
    def kind(self) -> str:
        return self.name.rsplit(".", 1)[-1]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        frames = _active.get()
        if not frames:
            return x
        for observing in (False, True):  # replacements first; captures then see the final tensor
            for frame in frames:
                if frame.observe != observing:
                    continue
                for fn in frame.at(self.name):
                    replaced = fn(x, self)
                    if replaced is not None:
                        if observing:
                            raise RuntimeError(f"a capture may not replace {self.name}")
                        if replaced.shape != x.shape:
                            raise ValueError(f"{self.name}: a replacement of shape {tuple(replaced.shape)} "
                                             f"for a tensor of shape {tuple(x.shape)}")
                        x = replaced
        return x

    def wanted(self) -> bool:
        """Whether any function of this call listens here: lets a module skip keeping a tensor that
        nobody will read (the attention scores, one (T, T) array per head)."""
        return any(frame.at(self.name) for frame in _active.get())


@contextmanager
def intervene(fwd_hooks: Sequence[tuple[Where, HookFn]]) -> Iterator[None]:
    """Run each ``(where, fn)`` at the hook points it names during the ``with`` block, for this
    thread/task only. Blocks nest: an outer block's functions run before an inner one's."""
    token = _active.set(_active.get() + (Interventions(fwd_hooks),))
    try:
        yield
    finally:
        _active.reset(token)


def run_with_hooks(model: nn.Module, *args: object, fwd_hooks: Sequence[tuple[Where, HookFn]], **kwargs: object):
    """``model(*args, **kwargs)`` with ``fwd_hooks`` active for this one call."""
    with intervene(fwd_hooks):
        return model(*args, **kwargs)


def name_hook_points(root: nn.Module) -> list[str]:
    """Give every HookPoint below ``root`` its module path as name; returns the names in order."""
    names = []
    for path, module in root.named_modules():
        if isinstance(module, HookPoint):
            module.name = path
            names.append(path)
    return names


class Recorder:
    """The tensors of one capture. A hook point that fires several times (one per decoding step)
    keeps every call, in order."""

    def __init__(self, kinds: Collection[str] | None, names: Collection[str] | None) -> None:
        unknown = set(kinds or ()) - set(KINDS) - set(LAYER_KINDS)
        if unknown:
            raise ValueError(f"unknown hook kinds {sorted(unknown)}; choose from {KINDS + LAYER_KINDS}")
        self.kinds = frozenset(KINDS) if kinds is None else frozenset(kinds)  # None: every attention tensor
        self.names = None if names is None else tuple(names)
        self.calls: dict[str, list[torch.Tensor]] = {}
        self._wanted: dict[str, bool] = {}  # name → decision, so each name is matched once

    def wants(self, name: str) -> bool:
        decision = self._wanted.get(name)
        if decision is None:
            kind_ok = name.rsplit(".", 1)[-1] in self.kinds
            name_ok = self.names is None or any(fnmatch.fnmatchcase(name, n) for n in self.names)
            decision = self._wanted[name] = kind_ok and name_ok
        return decision

    def offer(self, name: str, tensor: torch.Tensor) -> None:
        if self.wants(name):
            self.calls.setdefault(name, []).append(tensor.detach())

    def record(self, tensor: torch.Tensor, hook: HookPoint) -> None:
        """The capture's intervention function: keeps the tensor, replaces nothing."""
        self.calls.setdefault(hook.name, []).append(tensor.detach())

    def __contains__(self, name: str) -> bool:
        return name in self.calls

    def __getitem__(self, name: str) -> torch.Tensor:
        """The tensor recorded under ``name``; an error if it fired more than once (use ``steps``)."""
        calls = self.calls[name]
        if len(calls) != 1:
            raise KeyError(f"{name} was recorded {len(calls)} times; use steps({name!r})")
        return calls[0]

    def steps(self, name: str) -> list[torch.Tensor]:
        return self.calls.get(name, [])

    def names_recorded(self) -> list[str]:
        return list(self.calls)


@contextmanager
def capture(
    kinds: Collection[str] | None = ("pattern",), names: Collection[str] | None = None
) -> Iterator[Recorder]:
    """Record hook points during the ``with`` block, for this thread/task only: an intervention
    whose one function reads.

    ``kinds``: which tensors (default the softmax patterns only; ``None`` = all of :data:`KINDS`).
    ``names``: optional glob patterns on hook names, e.g. ``["encoder.layers.0.*"]``.
    Captures do not nest: the inner one would silently steal the outer one's tensors.
    """
    if capture_active():
        raise RuntimeError("a capture is already active in this context")
    recorder = Recorder(kinds, names)
    frame = Interventions([(recorder.wants, recorder.record)], observe=True)
    token = _active.set(_active.get() + (frame,))
    try:
        yield recorder
    finally:
        _active.reset(token)


def capture_active() -> bool:
    """True inside a :func:`capture` of the current thread/task (tests check it is gone after)."""
    return any(frame.observe for frame in _active.get())


def interventions_active() -> bool:
    """True while any :func:`intervene` or :func:`capture` block is open in this thread/task."""
    return bool(_active.get())


# -- head ablation: one use of intervene ---------------------------------------------------------


class HeadRemoval:
    """Which heads of one attention lose their context, and what replaces it.

    ``replacement`` None: zeros (zero ablation); else one ``(heads, d_k)`` row per removed head,
    broadcast over positions (mean ablation: the head's mean context over a probe set).
    """

    def __init__(self, heads: Collection[int], replacement: torch.Tensor | None = None) -> None:
        self.heads = tuple(sorted({int(h) for h in heads}))
        if replacement is not None and tuple(replacement.shape[:1]) != (len(self.heads),):
            raise ValueError(f"one replacement row per removed head expected, got {tuple(replacement.shape)}")
        self.replacement = replacement

    def apply(self, context: torch.Tensor, hook: HookPoint | None = None) -> torch.Tensor:
        """context (B, h, T, d_k) → a new tensor with the removed heads replaced (the input is untouched)."""
        removed = torch.zeros(context.size(1), dtype=torch.bool, device=context.device)
        removed[list(self.heads)] = True
        if self.replacement is None:
            return context.masked_fill(removed[None, :, None, None], 0.0)
        rows = torch.zeros(context.size(1), context.size(-1), dtype=context.dtype, device=context.device)
        rows[list(self.heads)] = self.replacement.to(context.dtype)
        return torch.where(removed[None, :, None, None], rows[None, :, None, :], context)


@contextmanager
def ablate(removals: dict[str, HeadRemoval]) -> Iterator[None]:
    """Remove heads during the ``with`` block, for this thread/task only: each removal replaces its
    attention's ``context`` (the heads' outputs before ``W_O``), keyed by that hook's name
    (``encoder.layers.2.self_attn.context``). The output projection reads the replaced context, and
    a capture records exactly what ``W_O`` received."""
    with intervene([(name, removal.apply) for name, removal in removals.items()]):
        yield
