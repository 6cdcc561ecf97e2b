"""Blockwise patterns for long inputs: exact blocks equal the full softmax to 1e-6; the pooled passes
(float32) equal the full softmax pooled to 1e-5 relative; the long-input forward keeps the same queries
and keys as the model."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention_viz.analysis.blockwise import normalizers, overview, pattern_block, pooled_region, quantize, tile_size
from attention_viz.core.hooks import capture
from attention_viz.core.longcontext import queries_and_keys
from attention_viz.core.model import Transformer, TransformerConfig


def full_pattern(q: np.ndarray, k: np.ndarray, causal: bool) -> np.ndarray:
    """The whole matrix at once, in float64."""
    s = (q.astype(np.float64) @ k.astype(np.float64).T) / np.sqrt(q.shape[1])
    if causal:
        s[np.triu_indices(len(q), 1)] = -np.inf
    s -= s.max(axis=1, keepdims=True)
    p = np.exp(s)
    return p / p.sum(axis=1, keepdims=True)


def pool(p: np.ndarray, t: int, how: str) -> np.ndarray:
    n_r, n_c = -(-p.shape[0] // t), -(-p.shape[1] // t)
    out = np.zeros((n_r, n_c))
    for i in range(n_r):
        for j in range(n_c):
            tile = p[i * t : (i + 1) * t, j * t : (j + 1) * t]
            out[i, j] = tile.max() if how == "max" else tile.mean()
    return out


def close(pooled: np.ndarray, expected: np.ndarray) -> bool:
    """Within the float32 pass's precision: 1e-5 relative (a logit of ~16 is off by ~2e-6)."""
    return bool(np.all(np.abs(pooled - expected) <= 1e-5 * expected + 1e-12))


@pytest.fixture(scope="module")
def qk():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((301, 16)) * 2.0).astype(np.float32), (rng.standard_normal((301, 16)) * 2.0).astype(np.float32)


@pytest.mark.parametrize("causal", [True, False])
def test_overview_equals_the_full_softmax_pooled(qk, causal):
    q, k = qk
    full = full_pattern(q, k, causal)
    for workers in (1, 3):  # row blocks on one thread, or spread over three
        view = overview(q, k, tiles=37, causal=causal, block_rows=32, chunk=50, workers=workers)  # uneven everything
        assert view.tile_rows == tile_size(301, 37) == 9
        assert close(view.max, pool(full, 9, "max")) and close(view.mean, pool(full, 9, "mean"))
        assert np.abs(view.lse - normalizers(q, k, range(301), causal)).max() <= 1e-5
    given = overview(q, k, tiles=37, causal=causal, block_rows=32, chunk=50, lse=normalizers(q, k, range(301), causal))
    assert given.mean is None and close(given.max, pool(full, 9, "max"))  # the maxima alone, from given normalizers
    block = pattern_block(q, k, range(0, 301), range(0, 301), causal)
    assert np.abs(block - full).max() <= 1e-6
    assert np.allclose(block.sum(axis=1), 1.0, atol=1e-5)
    if causal:
        assert np.all(np.triu(block, 1) == 0.0)  # the future exactly zero


def test_zoomed_regions_pool_the_same_cells_and_end_in_exact_values(qk):
    q, k = qk
    full = full_pattern(q, k, True)
    lse = overview(q, k).lse
    rows, cols = range(120, 290), range(40, 260)
    for how in ("max", "mean"):
        pooled, tr, tc = pooled_region(q, k, lse, rows, cols, tiles=16, pooling=how, block_rows=20, chunk=30)
        assert (tr, tc) == (11, 14)
        region = full[120:290, 40:260]
        expected = np.array([[(np.max if how == "max" else np.mean)(region[i * tr : (i + 1) * tr, j * tc : (j + 1) * tc])
                              for j in range(pooled.shape[1])] for i in range(pooled.shape[0])])  # fmt: skip
        assert close(pooled, expected)
    exact, tr, tc = pooled_region(q, k, lse, range(200, 210), range(190, 205), tiles=64)
    assert (tr, tc) == (1, 1) and np.abs(exact - full[200:210, 190:205]).max() <= 1e-6
    with pytest.raises(ValueError):
        pooled_region(q, k, lse, rows, cols, pooling="median")


def test_quantized_tiles_are_within_half_a_step():
    pooled = np.random.default_rng(1).random((40, 50)).astype(np.float32) * 0.3
    quantized = quantize(pooled, "max")
    assert quantized.codes.dtype == np.uint8 and quantized.codes.max() == 255
    assert np.abs(quantized.values() - pooled).max() <= quantized.scale / 255 / 2 + 1e-7


CONFIGS = {
    "llama-style": dict(positional="rotary", norm="pre", norm_type="rms", activation="silu", gated_ffn=True, n_kv_heads=2),
    "neox-style": dict(positional="rotary", norm="pre", rotary_pct=0.5, parallel_residual=True),
    "post-ln": dict(positional="learned", norm="post"),
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_long_input_forward_keeps_the_models_queries_and_keys(name):
    torch.manual_seed(0)
    config = TransformerConfig(shape="decoder-only", vocab_size=60, d_model=32, h=4, d_ff=64, N=2, max_len=128,
                               dropout=0.0, scale_embeddings=False, **CONFIGS[name])  # fmt: skip
    model = Transformer(config).eval()
    ids = torch.randint(0, 60, (1, 100))
    with torch.inference_mode(), capture(kinds=("q", "k", "pattern")) as recorded:
        model(ids)
    kept = queries_and_keys(model, ids)  # layer 0 with its output, the last one's q and k only
    for layer in range(2):
        assert np.abs(kept.layer(layer)[0] - recorded[f"decoder.layers.{layer}.self_attn.q"][0].numpy()).max() <= 1e-5
        assert np.abs(kept.layer(layer)[1] - recorded[f"decoder.layers.{layer}.self_attn.k"][0].numpy()).max() <= 1e-5
        for head in range(4):
            q, k = kept.head(layer, head)
            assert np.abs(kept.normalizers(layer, head) - normalizers(q, k, range(100))).max() <= 1e-5
            block = pattern_block(q, k, range(0, 100), range(0, 100))
            assert np.abs(block - recorded[f"decoder.layers.{layer}.self_attn.pattern"][0, head].numpy()).max() <= 1e-5
