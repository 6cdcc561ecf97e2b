"""Named hook points and per-call capture.

A :class:`HookPoint` is an identity module placed wherever a tensor is worth seeing (q, k, v,
scores, pattern, context of every attention). Its name is its path in the module tree, e.g.
``encoder.layers.3.self_attn.pattern``, assigned by :func:`name_hook_points`, never typed by hand.

One model object serves every browser session at once, so recording must not go through state on
the modules (torch forward hooks are shared by all threads). Instead :func:`capture` installs a
recorder in a :class:`contextvars.ContextVar`: each thread (and each asyncio task) sees only its
own recorder, and the ``finally`` of the context manager removes it even when the forward raises.
Outside a capture a hook point costs one ContextVar lookup.
"""

from __future__ import annotations

import contextvars
import fnmatch
from collections.abc import Collection, Iterator
from contextlib import contextmanager

import torch
from torch import nn

from .names import KINDS  # noqa: F401  (defined without torch: the CLI checks --kinds before loading it)

_active_recorder: contextvars.ContextVar[Recorder | None] = contextvars.ContextVar(
    "attention_viz_recorder", default=None
)


class HookPoint(nn.Module):
    """Identity module; inside a :func:`capture` it hands its input to the active recorder."""

    def __init__(self) -> None:
        super().__init__()
        self.name = ""  # set from the module path by name_hook_points

    @property
    def kind(self) -> str:
        return self.name.rsplit(".", 1)[-1]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        recorder = _active_recorder.get()
        if recorder is not None:
            recorder.offer(self.name, x)
        return x

    def wanted(self) -> bool:
        """Whether this thread's capture records this point: lets a module skip keeping a tensor
        that nobody will read (the attention scores, 1 MB per head at 512 tokens)."""
        recorder = _active_recorder.get()
        return recorder is not None and recorder.wants(self.name)


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
        unknown = set(kinds or ()) - set(KINDS)
        if unknown:
            raise ValueError(f"unknown hook kinds {sorted(unknown)}; choose from {KINDS}")
        self.kinds = None if kinds is None else frozenset(kinds)
        self.names = None if names is None else tuple(names)
        self.calls: dict[str, list[torch.Tensor]] = {}
        self._wanted: dict[str, bool] = {}  # name → decision, so each name is matched once

    def wants(self, name: str) -> bool:
        decision = self._wanted.get(name)
        if decision is None:
            kind_ok = self.kinds is None or name.rsplit(".", 1)[-1] in self.kinds
            name_ok = self.names is None or any(fnmatch.fnmatchcase(name, n) for n in self.names)
            decision = self._wanted[name] = kind_ok and name_ok
        return decision

    def offer(self, name: str, tensor: torch.Tensor) -> None:
        if self.wants(name):
            self.calls.setdefault(name, []).append(tensor.detach())

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
    """Record hook points during the ``with`` block, for this thread/task only.

    ``kinds``: which tensors (default the softmax patterns only; ``None`` = all of :data:`KINDS`).
    ``names``: optional glob patterns on hook names, e.g. ``["encoder.layers.0.*"]``.
    Captures do not nest: the inner one would silently steal the outer one's tensors.
    """
    if _active_recorder.get() is not None:
        raise RuntimeError("a capture is already active in this context")
    recorder = Recorder(kinds, names)
    token = _active_recorder.set(recorder)
    try:
        yield recorder
    finally:
        _active_recorder.reset(token)


def capture_active() -> bool:
    """True inside a :func:`capture` of the current thread/task (tests check it is gone after)."""
    return _active_recorder.get() is not None


# -- head ablation ------------------------------------------------------------------------------
# Same per-call rule as capture: the heads to remove live in a ContextVar, never on the modules,
# so two sessions ablating different heads of one shared model never see each other's choice.

_active_ablation: contextvars.ContextVar[dict[str, HeadRemoval] | None] = contextvars.ContextVar(
    "attention_viz_ablation", default=None
)


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

    def apply(self, context: torch.Tensor) -> torch.Tensor:
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
    """Remove heads during the ``with`` block, for this thread/task only.

    ``removals``: context hook name (``encoder.layers.2.self_attn.context``) → :class:`HeadRemoval`.
    The attention hands the replaced context to its ``context`` hook point and to the output
    projection, so a capture records exactly what ``W_O`` received.
    """
    if _active_ablation.get() is not None:
        raise RuntimeError("an ablation is already active in this context")
    token = _active_ablation.set(dict(removals))
    try:
        yield
    finally:
        _active_ablation.reset(token)


def ablated(name: str, context: torch.Tensor) -> torch.Tensor:
    """``context`` with this call's removed heads of attention ``name`` replaced (itself when none)."""
    removals = _active_ablation.get()
    if removals is None:
        return context
    removal = removals.get(name)
    return context if removal is None else removal.apply(context)
