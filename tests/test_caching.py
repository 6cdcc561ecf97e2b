"""Bounded caches and one model load per process, whatever the number of sessions."""

import threading
from pathlib import Path

import pytest

from attention_viz.backends import registry
from attention_viz.backends.base import Backend
from attention_viz.backends.scratch import ScratchEncoderBackend
from attention_viz.model_cache import ModelCache
from attention_viz.ui import cache


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@pytest.fixture
def forwards(monkeypatch):
    calls = []
    original = ScratchEncoderBackend.run

    def counting(self, text, *args, **kwargs):
        calls.append(text)
        return original(self, text, *args, **kwargs)

    monkeypatch.setattr(ScratchEncoderBackend, "run", counting)
    return calls


SENTENCES = 80  # past the bound (24 results) enough that an unbounded cache could not pass


def test_eighty_sentences_keep_the_result_cache_bounded(forwards):
    cache.run.clear()
    sentences = [f"Sentence number {i} talks about " + " ".join(["attention"] * 120) for i in range(SENTENCES)]
    one = cache.run("minilm", sentences[0])  # the model loaded first, outside the measured growth
    before = rss_mb()
    for sentence in sentences[1:]:
        cache.run("minilm", sentence)
    grown = rss_mb() - before
    assert len(forwards) == SENTENCES
    # each result holds 6 × 12 × 128² float32 ≈ 4.7 MB: kept, the 80 would be ≥ 377 MB; the bound
    # keeps 24 (~113 MB, ~186 MB of RSS with the allocator's slack, measured)
    size = one.stack("pattern").nbytes / 2**20
    assert grown < (cache.MAX_RESULTS + SENTENCES) / 2 * size, f"RSS grew by {grown:.0f} MB ({size:.1f} MB a result)"
    cache.run("minilm", sentences[-1])  # recent: still cached
    assert len(forwards) == SENTENCES
    cache.run("minilm", sentences[0])  # oldest: evicted, so it runs again
    assert len(forwards) == SENTENCES + 1
    cache.run.clear()


def test_a_model_loads_once_even_when_many_sessions_ask_at_once(monkeypatch):
    loads = []
    original = registry.MODELS["minilm"].load

    def counting_load(name, folder):
        loads.append(name)
        return original(name, folder)

    monkeypatch.setitem(registry.MODELS, "minilm", registry.MODELS["minilm"].__class__(
        **{**registry.MODELS["minilm"].__dict__, "load": counting_load}))
    monkeypatch.setattr(registry, "_loaded", ModelCache())
    results = []
    barrier = threading.Barrier(8)

    def session():
        barrier.wait()
        results.append(registry.load_backend("minilm"))

    threads = [threading.Thread(target=session) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert loads == ["minilm"] and len(results) == 8 and all(r is results[0] for r in results)


def test_a_run_the_cache_keeps_has_the_next_runs_memory_made_ready(monkeypatch):
    """The cache keeps each result's memory, so after a run it asks the backend to map the next one's."""
    calls = []
    monkeypatch.setattr(Backend, "keep_memory_ready", lambda self: calls.append(self.name))
    cache.run.clear()
    cache.run("minilm", "A sentence the cache keeps.")
    cache.run("minilm", "A sentence the cache keeps.")  # answered from the cache: no run, nothing to map
    assert calls == ["minilm"]
    cache.run.clear()
