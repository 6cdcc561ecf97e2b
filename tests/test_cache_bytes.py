"""The result and figure caches are bounded by the bytes they hold (issue 40).

Before, the result cache kept 24 results whatever their size: each distinct 1,000-token link on a
4-layer, 8-head model kept ~125 MB resident. Now every cache shares ``ATTENTION_VIZ_CACHE_MB``,
evicting the least recently used: eight distinct ~1,000-token results under a small budget leave the
cache holding at most the budget, counted here from the kept results' own arrays."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

from test_ours_decoder import WORDS, save_tokenizer

from attention_viz.runtime import byte_cache
from attention_viz.runtime.byte_cache import ByteBudgetCache, cached, nbytes, stable_key
from attention_viz.runtime.settings import CACHE_MB_ENV
from attention_viz.ui import cache

TOKENS = 1000


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@pytest.fixture(scope="module")
def long_model(tmp_path_factory) -> str:
    """A 4-layer, 8-head GPT-2 that reads 1,024 tokens (in our own decoder)."""
    folder = tmp_path_factory.mktemp("gpt2-long")
    torch.manual_seed(0)
    n = save_tokenizer(folder)
    GPT2LMHeadModel(GPT2Config(vocab_size=n, n_embd=32, n_layer=4, n_head=8, n_positions=1024)).save_pretrained(folder)
    return f"hf:{folder}"


def text(seed: int) -> str:
    words = np.random.default_rng(seed).choice(WORDS, TOKENS - 1)
    return " ".join(words)


@pytest.fixture
def budget(monkeypatch):
    """A fresh shared cache of 300 MB, in a server on this machine only (so it loads hf: folders)."""
    monkeypatch.setattr(cache, "beyond_loopback", lambda address: False)
    shared = ByteBudgetCache(300 * 2**20)
    monkeypatch.setattr(byte_cache, "_shared", shared)
    return shared


def held(result) -> int:
    """The bytes of a result's arrays, counted directly."""
    return sum(array.nbytes for array in result.arrays.values())


def test_eight_long_results_stay_under_the_budget(long_model, budget):
    results = [cache.run(long_model, text(seed)) for seed in range(8)]
    assert all(len(r.tokens) == TOKENS for r in results)
    one = held(results[0])
    assert one > 128 * 10**6  # 4 × 8 × 1000² float32 patterns a result: about a gigabyte for eight
    assert budget.bytes_held <= budget.budget_bytes
    kept = [r for r in results if any(value is r for value, _ in budget._entries.values())]
    assert 1 <= len(kept) < 8 and sum(held(r) for r in kept) <= budget.budget_bytes
    assert results[-1] in kept and results[0] not in kept  # the oldest went first
    assert cache.run(long_model, text(7)) is results[-1]  # the newest is answered from the cache


def test_eight_long_results_leave_the_process_near_where_it_started(long_model, budget):
    cache.run(long_model, text(100))  # the model loaded and its first memory mapped, outside the growth
    before = rss_mb()
    for seed in range(101, 109):
        cache.run(long_model, text(seed))
    grown = rss_mb() - before
    assert grown < 2 * budget.budget_bytes / 2**20, f"RSS grew by {grown:.0f} MB under a 300 MB budget"


def test_the_least_recently_used_goes_first():
    kept = ByteBudgetCache(250)
    for key in "abc":
        kept.get_or_compute(key, lambda: np.zeros(10), size=lambda _: 100)
    assert len(kept) == 2 and kept.bytes_held == 200
    kept.get_or_compute("b", lambda: pytest.fail("b is kept"))  # b used: c is the oldest now
    kept.get_or_compute("d", lambda: np.zeros(10), size=lambda _: 100)
    assert set(kept._entries) == {"b", "d"}


def test_a_value_larger_than_the_budget_is_not_kept():
    kept = ByteBudgetCache(100)
    value = kept.get_or_compute("big", lambda: np.zeros(1000))
    assert value.shape == (1000,) and len(kept) == 0 and kept.bytes_held == 0


def test_bytes_are_counted_through_objects_once():
    array = np.zeros((10, 10), dtype=np.float32)
    assert nbytes({"a": array, "b": array}) < 2 * array.nbytes  # the same array twice is held once
    assert nbytes([array, np.ones(5)]) >= array.nbytes + 40


def test_keys_follow_contents_not_identity():
    assert stable_key([np.arange(3)]) == stable_key([np.arange(3)])
    assert stable_key({"x": np.arange(3)}) != stable_key({"x": np.arange(4)})


def test_figures_are_kept_as_copies_and_counted(budget):
    calls = []

    @cached(pickled=True)
    def spec(n: int) -> dict:
        calls.append(n)
        return {"data": [{"z": np.zeros((n, n))}]}

    first = spec(100)
    first["data"][0]["z"][0, 0] = 1.0  # a caller's change never reaches the next caller
    assert spec(100)["data"][0]["z"][0, 0] == 0.0 and calls == [100]
    assert budget.bytes_held >= 100 * 100 * 8


def test_the_budget_is_the_operators(monkeypatch):
    monkeypatch.setattr(byte_cache, "_shared", None)
    monkeypatch.setenv(CACHE_MB_ENV, "300")
    assert byte_cache.shared_cache().budget_bytes == 300 * 2**20
    monkeypatch.setattr(byte_cache, "_shared", None)


def test_a_large_arrays_key_is_made_from_a_sample_of_its_values():
    array = np.random.default_rng(0).random(600_000).astype(np.float32)
    changed = array.copy()
    changed[::1000] += 1.0  # a change spread over the array, as another text's patterns are
    assert stable_key(array) == stable_key(array.copy()) and stable_key(array) != stable_key(changed)
    assert stable_key(np.array(["the", "cat"])) != stable_key(np.array(["the", "dog"]))
