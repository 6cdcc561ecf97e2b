"""A process-wide cache bounded by the bytes it holds, not by its number of entries.

A count says nothing about memory: one 1,000-token result of a 16-layer, 32-head model holds about
2 GB of patterns, a short sentence of minilm a few hundred kB. Every cache made here (results,
figures, the ablation page's runs) shares one budget, ``ATTENTION_VIZ_CACHE_MB`` (read when the
process starts caching), and when a new value would take the total past it the least recently used
values go first, whichever cache they belong to. A value larger than the whole budget is handed
back without being kept. Values are never copied: cached values must never be mutated (results
are not); a caller that needs its own copy stores bytes (:func:`cached` with ``pickled=True``).

Keys are made from the arguments' contents (arrays by their bytes), except parameters whose name
starts with ``_``, which are left out of the key as Streamlit's caches do. One value per key is
computed at a time: a second caller of the same key waits for the first instead of computing again.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import inspect
import pickle
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from contextlib import AbstractContextManager, nullcontext
from typing import Any, TypeVar

import numpy as np

from .settings import CACHE_MB_ENV, DEFAULT_CACHE_MB, whole_number

OBJECT_BYTES = 64  # what a small Python object costs besides the arrays and strings it holds
LARGE, SAMPLE = 500_000, 100_000  # elements of an array past which its key is made from a sample
T = TypeVar("T")


def nbytes(value: Any) -> int:
    """The bytes ``value`` holds: its arrays' and strings' sizes, through containers, dataclasses
    and plain objects, each object counted once however often it is referred to."""
    seen: set[int] = set()
    total = 0
    stack = [value]
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, np.ndarray):
            total += item.nbytes
        elif isinstance(item, (str, bytes, bytearray)):
            total += len(item)
        elif isinstance(item, dict):
            total += OBJECT_BYTES
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple, set, frozenset)):
            total += OBJECT_BYTES
            stack.extend(item)
        elif hasattr(item, "__dict__") and not isinstance(item, type):
            total += OBJECT_BYTES
            stack.extend(vars(item).values())
        else:
            total += OBJECT_BYTES
    return total


def array_digest(array: np.ndarray) -> str:
    """A digest of an array's values: all of them, or past ``LARGE`` elements a fixed sample of
    ``SAMPLE`` (as Streamlit's own cache keys do: hashing 75 MB of patterns would cost a tenth of a
    second on every rerun of a page that draws them)."""
    if array.dtype.hasobject:  # Python objects have no bytes of their own to hash
        return hashlib.sha1(pickle.dumps(array, protocol=pickle.HIGHEST_PROTOCOL)).hexdigest()
    flat = np.ascontiguousarray(array).reshape(-1)
    if flat.size >= LARGE:
        flat = flat[np.random.RandomState(0).randint(0, flat.size, SAMPLE)]
    return hashlib.sha1(flat.view(np.uint8)).hexdigest()


def stable_key(value: Any) -> Hashable:
    """A hashable stand-in for ``value`` made from its contents: equal arguments give equal keys
    across calls and sessions (arrays by dtype, shape and :func:`array_digest`)."""
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape, array_digest(value))
    if isinstance(value, dict):
        return ("dict", tuple(sorted(((repr(k), stable_key(v)) for k, v in value.items()))))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(stable_key(v) for v in value))
    if isinstance(value, (set, frozenset)):
        return ("set", tuple(sorted(repr(stable_key(v)) for v in value)))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (type(value).__qualname__, tuple(stable_key(getattr(value, f.name)) for f in dataclasses.fields(value)))
    if type(value).__hash__ is object.__hash__ or type(value).__hash__ is None:  # identity, or none: by content
        return ("pickled", hashlib.sha1(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)).hexdigest())
    return value


class ByteBudgetCache:
    """Values by key, least recently used out first while their bytes exceed the budget."""

    def __init__(self, budget_bytes: int) -> None:
        self.budget_bytes = budget_bytes
        self._entries: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self._computing: dict[Hashable, threading.Lock] = {}

    @property
    def bytes_held(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)

    def get_or_compute(self, key: Hashable, compute: Callable[[], T], size: Callable[[T], int] = nbytes) -> T:
        found, value = self._get(key)
        if found:
            return value
        with self._lock:
            computing = self._computing.setdefault(key, threading.Lock())
        with computing:  # one computation of a key at a time; the others find its value
            found, value = self._get(key)
            if found:
                return value
            try:
                value = compute()
                self._put(key, value, size(value))
            finally:
                with self._lock:
                    self._computing.pop(key, None)
        return value

    def _get(self, key: Hashable) -> tuple[bool, Any]:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return False, None
            self._entries.move_to_end(key)
            return True, entry[0]

    def _put(self, key: Hashable, value: Any, size: int) -> None:
        if size > self.budget_bytes:  # larger than everything together: kept by the caller only
            return
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            while self._entries and self._bytes + size > self.budget_bytes:
                _, (_, freed) = self._entries.popitem(last=False)
                self._bytes -= freed
            self._entries[key] = (value, size)
            self._bytes += size

    def clear(self, keep: Callable[[Hashable], bool] = lambda key: False) -> None:
        """Forget every value whose key ``keep`` does not accept."""
        with self._lock:
            for key in [k for k in self._entries if not keep(k)]:
                self._bytes -= self._entries.pop(key)[1]


_shared: ByteBudgetCache | None = None


def shared_cache() -> ByteBudgetCache:
    """The process's one budget, ``ATTENTION_VIZ_CACHE_MB`` (read on first use)."""
    global _shared
    if _shared is None:
        _shared = ByteBudgetCache(whole_number(CACHE_MB_ENV, DEFAULT_CACHE_MB) * 2**20)
    return _shared


def cached(
    shown: Callable[[], AbstractContextManager] = nullcontext, *, pickled: bool = False
) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """``function`` with its values kept in :func:`shared_cache`, keyed by its name and the contents
    of its arguments (``_``-named ones left out). ``shown``: a context entered while a value is
    computed (a spinner). ``pickled``: the value is kept as its pickle and each caller gets a fresh
    copy (for values a caller changes), and the pickle's length is what it costs."""

    def decorate(function: Callable[..., T]) -> Callable[..., T]:
        signature = inspect.signature(function)
        name = f"{function.__module__}.{function.__qualname__}"

        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> T:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            key = (name, stable_key({k: v for k, v in bound.arguments.items() if not k.startswith("_")}))

            def compute() -> Any:
                with shown():
                    value = function(*args, **kwargs)
                return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL) if pickled else value

            value = shared_cache().get_or_compute(key, compute, len if pickled else nbytes)
            return pickle.loads(value) if pickled else value

        wrapper.clear = lambda: shared_cache().clear(keep=lambda key: key[0] != name)  # type: ignore[attr-defined]
        return wrapper

    return decorate
