"""The bounded model cache: at most N models loaded, least recently used evicted, loads one at a time."""

import gc
import threading
import time
import weakref

import pytest

from attention_viz.backends import registry
from attention_viz.errors import ModelError
from attention_viz.runtime.model_cache import DEFAULT_MAX_MODELS, MAX_MODELS_ENV, ModelCache, max_models


class Model:
    """Stands in for a loaded backend (weak-referenceable, so freeing can be observed)."""

    def __init__(self, name: str) -> None:
        self.name = name


def loader(name: str, log: list[str]):
    def load() -> Model:
        log.append(name)
        return Model(name)

    return load


def test_never_more_than_capacity_and_the_least_recently_used_goes():
    cache, loads = ModelCache(capacity=2), []
    a = cache.get_or_load("a", loader("a", loads))
    cache.get_or_load("b", loader("b", loads))
    assert cache.get_or_load("a", loader("a", loads)) is a  # a hit, and now the most recent
    cache.get_or_load("c", loader("c", loads))
    assert cache.keys() == ["a", "c"] and loads == ["a", "b", "c"]
    cache.get_or_load("b", loader("b", loads))  # evicted earlier: loads again
    assert loads == ["a", "b", "c", "b"] and cache.keys() == ["c", "b"]


def test_many_distinct_names_never_grow_it_and_evicted_models_are_freed():
    cache, loads = ModelCache(capacity=3), []
    refs = []
    for i in range(200):
        refs.append(weakref.ref(cache.get_or_load(f"m{i}", loader(f"m{i}", loads))))
        assert len(cache.keys()) <= 3
    gc.collect()
    alive = [ref().name for ref in refs if ref() is not None]
    assert alive == ["m197", "m198", "m199"] and len(loads) == 200


def test_a_failing_load_caches_nothing_and_evicts_nothing():
    cache, loads = ModelCache(capacity=1), []
    kept = cache.get_or_load("good", loader("good", loads))

    def broken() -> Model:
        raise ModelError("no such model")

    with pytest.raises(ModelError):
        cache.get_or_load("bad", broken)
    assert cache.keys() == ["good"] and cache.get_or_load("good", loader("good", loads)) is kept


def test_concurrent_sessions_load_a_model_once_and_loads_run_one_at_a_time():
    cache, loads = ModelCache(capacity=4), []
    running, most = [0], [0]
    guard = threading.Lock()

    def slow(name: str):
        def load() -> Model:
            with guard:
                running[0] += 1
                most[0] = max(most[0], running[0])
            time.sleep(0.05)
            with guard:
                running[0] -= 1
            loads.append(name)
            return Model(name)

        return load

    barrier = threading.Barrier(12)
    got: list[Model] = []

    def session(i: int) -> None:
        barrier.wait()
        got.append(cache.get_or_load(f"m{i % 3}", slow(f"m{i % 3}")))

    threads = [threading.Thread(target=session, args=(i,)) for i in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(loads) == ["m0", "m1", "m2"] and most[0] == 1
    assert len({id(model) for model in got}) == 3


def test_a_loaded_model_answers_while_another_loads():
    cache = ModelCache(capacity=4)
    ready = cache.get_or_load("ready", lambda: Model("ready"))
    started, release = threading.Event(), threading.Event()

    def stuck() -> Model:
        started.set()
        release.wait(10)
        return Model("slow")

    loading = threading.Thread(target=cache.get_or_load, args=("slow", stuck))
    loading.start()
    try:
        assert started.wait(10)
        begun = time.monotonic()
        assert cache.get_or_load("ready", lambda: Model("never")) is ready
        assert time.monotonic() - begun < 1
    finally:
        release.set()
        loading.join()


def test_the_operator_setting(monkeypatch):
    monkeypatch.delenv(MAX_MODELS_ENV, raising=False)
    assert max_models() == DEFAULT_MAX_MODELS
    monkeypatch.setenv(MAX_MODELS_ENV, "1")
    cache, loads = ModelCache(), []  # no capacity given: the environment's, read at each load
    cache.get_or_load("a", loader("a", loads))
    cache.get_or_load("b", loader("b", loads))
    assert cache.keys() == ["b"]
    for bad in ("0", "-2", "two", "1.5"):
        monkeypatch.setenv(MAX_MODELS_ENV, bad)
        with pytest.raises(ModelError, match=MAX_MODELS_ENV):
            max_models()


def test_the_registry_keeps_at_most_the_operators_number_of_models(monkeypatch):
    monkeypatch.setenv(MAX_MODELS_ENV, "1")
    monkeypatch.setattr(registry, "_loaded", ModelCache())
    first = registry.load_backend("toy-translate")
    assert registry.load_backend("toy-translate") is first
    registry.load_backend("toy-translate-rnn")
    assert registry._loaded.keys() == ["toy-translate-rnn on cpu/float32"]  # one entry per name and placement
    assert registry.load_backend("toy-translate") is not first  # evicted, so loaded afresh
