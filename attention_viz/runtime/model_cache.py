"""The process's loaded models: at most ``ATTENTION_VIZ_MAX_MODELS``, least recently used evicted.

Every browser session shares one process, and a link can name any model, so the cache must never
grow without bound. Loads run one at a time: a burst of links naming new models queues instead of
loading them all at once, while sessions whose model is already loaded never wait.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

from ..errors import ModelError

MAX_MODELS_ENV = "ATTENTION_VIZ_MAX_MODELS"
DEFAULT_MAX_MODELS = 4  # minilm and the three demo models fit; an hf: model then evicts the oldest

V = TypeVar("V")


def max_models() -> int:
    """The operator's bound on loaded models (``ATTENTION_VIZ_MAX_MODELS``, default 4)."""
    raw = os.environ.get(MAX_MODELS_ENV, "").strip()
    if not raw:
        return DEFAULT_MAX_MODELS
    if not raw.isdigit() or int(raw) < 1:
        raise ModelError(f"{MAX_MODELS_ENV} must be a whole number of at least 1, got {raw!r}")
    return int(raw)


class ModelCache(Generic[V]):
    """A thread-safe LRU of loaded models keyed by name.

    ``capacity`` None reads ``ATTENTION_VIZ_MAX_MODELS`` at every load, so the operator's setting
    applies without the cache being rebuilt. An evicted model is freed once the sessions still
    running it finish, so memory peaks at capacity + 1 models (the one being loaded).
    """

    def __init__(self, capacity: int | None = None) -> None:
        self._capacity = capacity
        self._items: OrderedDict[str, V] = OrderedDict()
        self._lock = threading.Lock()  # guards _items; held only for dictionary operations
        self._load_lock = threading.Lock()  # one load at a time

    def get_or_load(self, key: str, load: Callable[[], V]) -> V:
        """The cached value for ``key``, else ``load()``'s, cached (a failing load caches nothing)."""
        hit = self._hit(key)
        if hit is not None:
            return hit
        with self._load_lock:
            hit = self._hit(key)  # another session may have loaded it while this one waited
            if hit is not None:
                return hit
            capacity = self._capacity or max_models()
            value = load()
            with self._lock:
                self._items[key] = value
                while len(self._items) > capacity:
                    self._items.popitem(last=False)
            return value

    def keys(self) -> list[str]:
        """Cached names, least recently used first."""
        with self._lock:
            return list(self._items)

    def _hit(self, key: str) -> V | None:
        with self._lock:
            if key not in self._items:
                return None
            self._items.move_to_end(key)
            return self._items[key]
