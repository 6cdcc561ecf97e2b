"""Torch hooks on a shared transformers model for the length of one call: registered on entry,
removed on exit, and acting only in the context that registered them, so a forward another thread
(another session) runs through the same modules meanwhile passes untouched, and nothing stays on
the modules after the call."""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from torch import nn

_owner: contextvars.ContextVar[object | None] = contextvars.ContextVar("attention_viz_module_hooks", default=None)


@contextmanager
def module_hooks(pre: Sequence[tuple[nn.Module, Callable]] = (),
                 post: Sequence[tuple[nn.Module, Callable]] = (),
                 pre_with_kwargs: Sequence[tuple[nn.Module, Callable]] = ()) -> Iterator[None]:
    """``pre``: forward pre-hooks ``fn(module, args)``; ``post``: forward hooks ``fn(module, args,
    output)``; ``pre_with_kwargs``: ``fn(module, args, kwargs)``; each as torch defines them."""
    key = object()

    def gated(fn: Callable) -> Callable:
        return lambda *a: fn(*a) if _owner.get() is key else None

    token = _owner.set(key)
    handles = [module.register_forward_pre_hook(gated(fn)) for module, fn in pre]
    handles += [module.register_forward_hook(gated(fn)) for module, fn in post]
    handles += [module.register_forward_pre_hook(gated(fn), with_kwargs=True) for module, fn in pre_with_kwargs]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()
        _owner.reset(token)
