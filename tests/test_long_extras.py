"""Soft-capped logits (Gemma 2: s → c · tanh(s / c)) and attention sinks (GPT-OSS: a per-head logit in every
row's normalizer, with no value) in every blockwise pass, numpy's and its torch twin, with and without a
sliding window: each output equals a float64 brute force of the whole pattern written here to 1e-5
(normalizers, pooled tiles, zooms, exact cells, mixed rows, scattered cells). Through real checkpoints:
tests/test_registry_long.py."""

from __future__ import annotations

import numpy as np
import pytest

from test_blockwise_torch import random_qk
from test_blockwise_torch import same as close

from attention_viz.analysis.blockwise import HeadLogits, normalizers, tile_size
from attention_viz.analysis.long_input import NUMPY_PASSES, Passes
from attention_viz.backends.long_passes import TORCH_PASSES
from attention_viz.core import blockwise_torch

PASSES = {"numpy": NUMPY_PASSES, "torch": TORCH_PASSES}
CASES = [  # (T, d_k, window, softcap, sink): no T a multiple of the tiles, blocks or chunks
    (301, 16, None, 5.0, None),
    (301, 16, None, None, 3.0),
    (523, 8, 37, 5.0, 1.5),
    (777, 16, 100, 2.0, -1.0),
]


def brute_force(q: np.ndarray, k: np.ndarray, head: HeadLogits) -> tuple[np.ndarray, np.ndarray]:
    """(P (T, T), lse (T,)) in float64 from the whole logit matrix at once, as the papers write it."""
    s = (q.astype(np.float64) @ k.astype(np.float64).T) / np.sqrt(q.shape[1])
    if head.softcap is not None:
        s = head.softcap * np.tanh(s / head.softcap)
    rows, cols = np.indices(s.shape)
    hidden = cols > rows
    if head.window is not None:
        hidden |= rows - cols >= head.window
    s[hidden] = -np.inf
    every = s if head.sink is None else np.concatenate([s, np.full((len(s), 1), head.sink)], axis=1)
    top = every.max(axis=1, keepdims=True)
    lse = top[:, 0] + np.log(np.exp(every - top).sum(axis=1))
    return np.exp(s - lse[:, None]), lse


def pool(p: np.ndarray, tr: int, tc: int, how: str) -> np.ndarray:
    """``p`` cut into tiles of tr × tc cells (the last ones maybe smaller): each tile's max or mean."""
    rows, cols = -(-p.shape[0] // tr), -(-p.shape[1] // tc)
    padded = np.zeros((rows * tr, cols * tc))  # the weights are ≥ 0: padding never wins a max
    padded[: p.shape[0], : p.shape[1]] = p
    tiles = padded.reshape(rows, tr, cols, tc)
    if how == "max":
        return tiles.max(axis=(1, 3))
    counts = np.outer(np.minimum(tr, p.shape[0] - np.arange(rows) * tr), np.minimum(tc, p.shape[1] - np.arange(cols) * tc))
    return tiles.sum(axis=(1, 3)) / counts


@pytest.mark.parametrize("which", PASSES)
@pytest.mark.parametrize(("length", "d_k", "window", "softcap", "sink"), CASES)
def test_every_pass_applies_the_soft_cap_and_the_sink(which, length, d_k, window, softcap, sink):
    passes: Passes = PASSES[which]
    head = HeadLogits(window, softcap, sink)
    q, k = random_qk(length, d_k, length + d_k)
    p, lse = brute_force(q, k, head)
    if sink is not None:
        assert p.sum(axis=1).min() < 0.99  # the sink takes a share a test can see
    if softcap is not None:
        assert not close(brute_force(q, k, HeadLogits(window, None, sink))[0], p)  # so does the cap

    t = tile_size(length, 37)
    view = passes.overview(q, k, tiles=37, block_rows=64, chunk=100, **head.options)  # uneven blocks
    assert close(view.lse, lse) and close(view.max, pool(p, t, t, "max")) and close(view.mean, pool(p, t, t, "mean"))
    given = passes.overview(q, k, tiles=37, lse=lse, **head.options)
    assert given.mean is None and close(given.max, pool(p, t, t, "max"))  # the maxima alone, from given normalizers

    rows, cols = range(length // 3, length - 5), range(7, length - 20)
    np.testing.assert_allclose(passes.pattern_block(q, k, rows, cols, **head.options),
                               p[rows.start : rows.stop, cols.start : cols.stop], atol=1e-6)
    for pooling in ("max", "mean"):
        pooled, tr, tc = passes.pooled_region(q, k, lse, rows, cols, tiles=16, pooling=pooling, **head.options)
        assert close(pooled, pool(p[rows.start : rows.stop, cols.start : cols.stop], tr, tc, pooling))
    exact, tr, tc = passes.pooled_region(q, k, lse, range(40, 52), range(30, 45), tiles=16, **head.options)
    assert (tr, tc) == (1, 1) and np.abs(exact - p[40:52, 30:45]).max() <= 1e-6  # a region that fits: cells

    weights = np.random.default_rng(1).random(length - 9)
    weights[:200] = 0.0  # blocks of zero weight are skipped
    assert close(passes.rows_mixed(q, k, lse, weights, block_rows=100, **head.given_lse),
                 weights @ p[: len(weights), : len(weights)])

    rng = np.random.default_rng(2)
    at_rows, at_keys = rng.integers(0, length, 500), rng.integers(0, length, 500)  # future and outside the band too
    assert close(passes.cells(q, k, lse, at_rows, at_keys, **head.given_lse), p[at_rows, at_keys])


@pytest.mark.parametrize(("length", "d_k", "window", "softcap", "sink"), CASES)
def test_exact_normalizers_in_both_twins(length, d_k, window, softcap, sink):
    head = HeadLogits(window, softcap, sink)
    q, k = random_qk(length, d_k, length)
    _, lse = brute_force(q, k, head)
    rows = range(length // 2, length)
    np.testing.assert_allclose(normalizers(q, k, rows, chunk=97, **head.options), lse[rows.start :], rtol=1e-12)
    np.testing.assert_allclose(blockwise_torch.normalizers(q, k, rows, chunk=97, **head.options), lse[rows.start :],
                               rtol=1e-12)
