"""Bounded caches and one model load per process, whatever the number of sessions."""

import threading
from pathlib import Path

import pytest

from attention_viz.backends import registry
from attention_viz.backends.base import Backend
from attention_viz.backends.scratch import ScratchEncoderBackend
from attention_viz.runtime import byte_cache
from attention_viz.runtime.byte_cache import ByteBudgetCache
from attention_viz.runtime.model_cache import ModelCache
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
KEPT = 24


def test_eighty_sentences_keep_the_result_cache_bounded(forwards, monkeypatch):
    sentences = [f"Sentence number {i} talks about " + " ".join(["attention"] * 120) for i in range(SENTENCES)]
    one = cache.run("minilm", sentences[0])  # the model loaded first, outside the measured growth
    # a budget of bytes (ATTENTION_VIZ_CACHE_MB) that holds about KEPT of these results
    monkeypatch.setattr(byte_cache, "_shared", ByteBudgetCache(KEPT * byte_cache.nbytes(one)))
    cache.run("minilm", sentences[0])
    before = rss_mb()
    for sentence in sentences[1:]:
        cache.run("minilm", sentence)
    grown = rss_mb() - before
    assert len(forwards) == SENTENCES + 1
    # each result holds 6 × 12 × 128² float32 ≈ 4.7 MB: kept, the 80 would be ≥ 377 MB; the budget
    # keeps 24 (~113 MB, ~186 MB of RSS with the allocator's slack, measured)
    size = one.stack("pattern").nbytes / 2**20
    assert grown < (KEPT + SENTENCES) / 2 * size, f"RSS grew by {grown:.0f} MB ({size:.1f} MB a result)"
    cache.run("minilm", sentences[-1])  # recent: still cached
    assert len(forwards) == SENTENCES + 1
    cache.run("minilm", sentences[0])  # oldest: evicted, so it runs again
    assert len(forwards) == SENTENCES + 2


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


def _write_builder(folder: Path, height: int, helper_width: int) -> None:
    (folder / "fig_pkg").mkdir(exist_ok=True)
    (folder / "fig_pkg" / "__init__.py").write_text("")
    (folder / "fig_pkg" / "helper.py").write_text(f"WIDTH = {helper_width}\n")
    (folder / "fig_pkg" / "builder.py").write_text(
        "import plotly.graph_objects as go\nfrom . import helper\n\n"
        f"def build():\n    return go.Figure(layout=dict(height={height}, width=helper.WIDTH))\n")


def test_the_figure_key_changes_when_a_builders_constant_or_helper_changes(tmp_path, monkeypatch):
    """Bytecode keeps ``height=300`` and ``height=400`` alike (constants live beside it): the key
    is the source of the builder's package, so an edited constant or helper is a new figure."""
    import importlib
    import os

    monkeypatch.syspath_prepend(str(tmp_path))
    _write_builder(tmp_path, 300, 500)
    module = importlib.import_module("fig_pkg.builder")
    first = cache.builder_source(module.build)
    assert cache.builder_source(module.build) == first  # stable while nothing changes
    code = module.build.__code__.co_code
    builder_file = tmp_path / "fig_pkg" / "builder.py"
    _write_builder(tmp_path, 400, 500)
    os.utime(builder_file, ns=(1, 10**18))  # a new modification time, as an editor saving would give
    assert cache.builder_source(module.build) != first
    assert importlib.reload(module).build.__code__.co_code == code  # what the old key could not tell apart
    second = cache.builder_source(module.build)
    _write_builder(tmp_path, 400, 600)  # only the helper the builder calls
    os.utime(tmp_path / "fig_pkg" / "helper.py", ns=(1, 2 * 10**18))
    assert cache.builder_source(module.build) != second
    for name in ("fig_pkg.builder", "fig_pkg.helper", "fig_pkg"):
        monkeypatch.delitem(__import__("sys").modules, name)
