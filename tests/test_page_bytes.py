"""Heavy pages in the heavy slot, and every page's bytes bounded (issue 40).

Before, Head ablation of a 1,000-token text sent a 59–64 MB before/after chart (a hover label per
cell) and ran its forwards outside the heavy slot; the "Attention tensors (.json)" download had no
size limit (445 MB for one 964-token result); ``heads --probes 1000000000`` grew without bound.
Now the pair is max-pooled to at most 128 tiles a side (checked against a brute-force max over
each tile), a long comparison takes a heavy slot, a download past ``ATTENTION_VIZ_DOWNLOAD_MB`` is
refused in a sentence, and ``--probes`` has a ceiling."""

from __future__ import annotations

import contextlib
import io
import json
import threading

import numpy as np
import pytest

from test_cache_bytes import long_model, text  # noqa: F401 - the fixture

from attention_viz import cli
from attention_viz.analysis.ablation_view import pooled_map
from attention_viz.cli.heads import MAX_PROBES
from attention_viz.errors import ServerBusy
from attention_viz.figures.ablation import pattern_pair
from attention_viz.runtime import byte_cache
from attention_viz.runtime.byte_cache import ByteBudgetCache
from attention_viz.runtime.settings import DOWNLOAD_MB_ENV
from attention_viz.ui import ablation_cache, cache, export
from attention_viz.ui.heavy import HeavyGate

MB = 2**20
LONG = 1000


def random_pattern(n: int, seed: int) -> np.ndarray:
    weights = np.random.default_rng(seed).random((n, n)).astype(np.float32) ** 8
    return weights / weights.sum(axis=1, keepdims=True)


def test_a_long_pair_is_pooled_to_a_few_mb():
    labels = [f"w{i}" for i in range(LONG)]
    figure = pattern_pair(random_pattern(LONG, 0), random_pattern(LONG, 1), (labels, labels), (labels, labels))
    size = len(figure.to_json())
    assert size < 3 * MB, f"{size / MB:.1f} MB"
    assert all(np.asarray(trace.z).shape == (125, 125) for trace in figure.data)  # tiles of 8 tokens: 1000 / 8
    assert "largest weight" in figure.layout.annotations[0].text


def test_each_tile_keeps_its_largest_weight():
    matrix = random_pattern(LONG, 2)
    labels = [f"w{i}" for i in range(LONG)]
    pooled, (rows, cols) = pooled_map(matrix, (labels, labels), tiles=100)
    size = 10  # 1000 positions in at most 100 tiles
    expected = np.array([[matrix[r:r + size, c:c + size].max() for c in range(0, LONG, size)]
                         for r in range(0, LONG, size)])
    np.testing.assert_array_equal(pooled, expected)
    assert rows[0] == "0–9 w0" and cols[-1] == "990–999 w990"


def test_a_short_pair_is_sent_cell_by_cell():
    labels = ["the", "cat", "sat"]
    matrix = random_pattern(3, 3)
    pooled, shown = pooled_map(matrix, (labels, labels))
    assert pooled is matrix and shown == (labels, labels)


@pytest.fixture
def served(monkeypatch):
    monkeypatch.setattr(cache, "beyond_loopback", lambda address: False)
    monkeypatch.setattr(byte_cache, "_shared", ByteBudgetCache(1024 * MB))


def test_a_long_comparison_takes_a_heavy_slot(long_model, served, monkeypatch):  # noqa: F811
    gate = HeavyGate(1)
    monkeypatch.setattr(ablation_cache, "heavy", gate)
    holding, release = threading.Event(), threading.Event()

    def other_visitor():
        with gate("someone else's heavy work"):
            holding.set()
            release.wait(30)

    thread = threading.Thread(target=other_visitor)
    thread.start()
    holding.wait(30)
    try:
        with pytest.raises(ServerBusy):
            ablation_cache.comparison(long_model, text(0), None, [(("decoder", "self_attn"), 1, 1)], "zero")
        short = ablation_cache.comparison(long_model, "the cat sat on the mat", None,
                                          [(("decoder", "self_attn"), 1, 1)], "zero")  # light: no slot needed
        assert len(short.before.tokens) < 10
    finally:
        release.set()
        thread.join()
    done = ablation_cache.comparison(long_model, text(0), None, [(("decoder", "self_attn"), 1, 1)], "zero")
    assert len(done.before.tokens) == LONG


def test_the_ablation_page_of_a_long_text_sends_a_few_mb(long_model, served):  # noqa: F811
    from apphelpers import app, charts

    at = app(model=long_model, text=text(0), view="ablation", ablate="1.1")
    assert not at.exception and not at.error, [e.value for e in at.error]
    sizes = [len(json.dumps(spec)) for spec in charts(at)]
    assert len(sizes) >= 2 and sum(sizes) < 5 * MB, [f"{s / MB:.1f} MB" for s in sizes]


def test_a_download_past_the_limit_is_refused_in_a_sentence(long_model, served, monkeypatch):  # noqa: F811
    result = cache.run(long_model, text(0))
    sizes = export.download_sizes(result)
    assert sizes["json"] > len(json.dumps(result.arrays[next(iter(result.arrays))].round(6).tolist())) * 0.5
    assert sizes["npz"] == sum(a.nbytes for a in result.arrays.values())
    limit = 256 * MB
    refusal = export.too_large("json", sizes["json"], limit)
    assert refusal is not None and "\n" not in refusal and ".npz" in refusal and DOWNLOAD_MB_ENV in refusal
    assert export.too_large("npz", sizes["npz"], limit) is None  # ~130 MB: offered
    assert "command line" in export.too_large("npz", sizes["npz"], 64 * MB)


def test_the_page_offers_only_what_fits(long_model, served, monkeypatch):  # noqa: F811
    from apphelpers import app

    monkeypatch.setenv(DOWNLOAD_MB_ENV, "200")
    at = app(model=long_model, text=text(0), view="head")
    captions = " ".join(c.value for c in at.caption)
    assert "The .json of this result would be about" in captions and "more than the 200 MB" in captions
    assert "The .npz" not in captions


def test_heads_probes_has_a_ceiling():
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = cli.main(["heads", "--model", "minilm", "--probes", "1000000000"])
    assert code == 2 and err.getvalue().count("\n") == 1 and f"between 0 and {MAX_PROBES}" in err.getvalue()
