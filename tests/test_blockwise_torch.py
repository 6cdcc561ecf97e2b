"""The blockwise passes in torch (core/blockwise_torch.py, what a long input is read with on a GPU) give
numpy's answers to 1e-5 — pooled tiles, normalizers, zooms, exact cells; causal or not, T no multiple of
any block, sliding windows — from numpy arrays or tensors; the long forward that keeps q/k on the device
(public fused attention, normalizers from a row pass) equals the CPU kernel's under grouped-query
attention and a window; a real checkpoint's long input reads the same through either path; the backend
picks the torch passes exactly when q/k were kept on the device. Here on the CPU: the same code runs
on CUDA."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from test_long_input import long_text
from test_long_window import mistral
from test_ours_decoder import save

from attention_viz.analysis import blockwise
from attention_viz.analysis.long_input import NUMPY_PASSES, LongInput, long_heatmap
from attention_viz.backends.long_passes import TORCH_PASSES, passes_for
from attention_viz.backends.registry import load_backend
from attention_viz.core import blockwise_torch
from attention_viz.core.longcontext import queries_and_keys
from attention_viz.inputs.tokens import Tokens

TOLERANCE = 1e-5


def same(ours: np.ndarray, numpy_path: np.ndarray) -> bool:
    """Equal to 1e-5, absolute (probabilities and normalizers) and relative to the value."""
    ours, numpy_path = np.asarray(ours, dtype=np.float64), np.asarray(numpy_path, dtype=np.float64)
    assert ours.shape == numpy_path.shape
    return bool(np.all(np.abs(ours - numpy_path) <= TOLERANCE * np.maximum(1.0, np.abs(numpy_path))))


def random_qk(length: int, d_k: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return tuple((rng.standard_normal((length, d_k)) * 2.0).astype(np.float32) for _ in range(2))


CASES = [  # (T, d_k, causal, window): no T a multiple of the tiles, the row blocks or the chunks
    (301, 16, True, None),
    (301, 16, False, None),
    (523, 8, True, 37),
    (1000, 32, True, None),
    (777, 16, True, 100),
]


@pytest.mark.parametrize(("length", "d_k", "causal", "window"), CASES)
def test_every_pass_equals_numpys(length, d_k, causal, window):
    q, k = random_qk(length, d_k, length + d_k)
    options = dict(tiles=37, causal=causal, window=window)
    expected = blockwise.overview(q, k, **options)
    ours = blockwise_torch.overview(q, k, block_rows=64, chunk=100, **options)  # uneven blocks
    assert (ours.tile_rows, ours.tile_cols) == (expected.tile_rows, expected.tile_cols)
    assert same(ours.lse, expected.lse) and same(ours.max, expected.max) and same(ours.mean, expected.mean)
    given = blockwise_torch.overview(torch.from_numpy(q), torch.from_numpy(k), lse=expected.lse, **options)
    assert given.mean is None and same(given.max, expected.max)  # tensors in, the maxima alone
    rows, cols = range(50, 170), range(10, 260)
    assert same(blockwise_torch.normalizers(q, k, rows, causal, window=window),
                blockwise.normalizers(q, k, rows, causal, window=window))  # fmt: skip
    exact = blockwise_torch.pattern_block(q, k, rows, cols, causal, window)
    assert np.abs(exact - blockwise.pattern_block(q, k, rows, cols, causal, window)).max() <= 1e-6
    if window is not None:
        assert np.all(exact[np.arange(50, 170)[:, None] - np.arange(10, 260)[None, :] >= window] == 0.0)
    for pooling in ("max", "mean"):
        region = dict(tiles=16, pooling=pooling, causal=causal, window=window)
        theirs, tr, tc = blockwise.pooled_region(q, k, expected.lse, range(40, 290), range(30, 260), **region)
        pooled, our_tr, our_tc = blockwise_torch.pooled_region(q, k, expected.lse, range(40, 290), range(30, 260),
                                                               block_rows=20, chunk=30, **region)  # fmt: skip
        assert (our_tr, our_tc) == (tr, tc) > (1, 1) and same(pooled, theirs)
    cells, tr, tc = blockwise_torch.pooled_region(q, k, expected.lse, range(200, 210), range(190, 205), tiles=64,
                                                  causal=causal, window=window)  # fmt: skip
    expected_cells = blockwise.pattern_block(q, k, range(200, 210), range(190, 205), causal, window)
    assert (tr, tc) == (1, 1) and same(cells, expected_cells)


def test_every_normalizer_is_the_causal_row_pass_of_every_row():
    q, k = random_qk(700, 16, 1)
    for window in (None, 50):
        ours = blockwise_torch.every_normalizer(torch.from_numpy(q), torch.from_numpy(k), window, 96, 128)
        expected = blockwise.normalizers(q, k, range(700), window=window)
        assert ours.dtype == torch.float32 and same(ours.numpy(), expected)


def test_bad_arguments_are_refused_as_numpy_refuses_them():
    q, k = random_qk(40, 8, 2)
    with pytest.raises(ValueError, match="sliding window"):
        blockwise_torch.overview(q, k, causal=False, window=8)
    with pytest.raises(ValueError, match="pooling"):
        blockwise_torch.pooled_region(q, k, np.zeros(40), range(40), range(40), tiles=4, pooling="median")


@pytest.mark.parametrize("window", [None, 64])
def test_the_long_forward_on_the_device_path_equals_the_cpu_kernels(window):
    """Grouped-query attention (4 heads reading 2 K/V heads), 700 tokens (no multiple of a window block);
    with a window, layer 1 is exempt from it (full attention)."""
    model = mistral(2, 1024, window or 1024, full=(1,) if window else ())
    ids = torch.randint(0, 50, (1, 700), generator=torch.Generator().manual_seed(3))
    host, device = queries_and_keys(model, ids), queries_and_keys(model, ids, on_device=True)
    assert not host.on_device and device.on_device and passes_for(host) is NUMPY_PASSES
    assert passes_for(device) is TORCH_PASSES
    assert device.window == host.window == ([window, None] if window else [None, None])
    for layer in range(2):
        q, k = device.layer(layer)
        assert isinstance(q, torch.Tensor) and q.dtype == torch.float32 and tuple(k.shape) == (2, 700, 8)
        assert same(q.numpy(), host.layer(layer)[0]) and same(k.numpy(), host.layer(layer)[1])
        assert same(device.normalizers(layer), host.normalizers(layer))
        assert torch.equal(device.head(layer, 3)[1], k[1])  # query head 3 reads K/V head 1
    tokens = long_tokens(ids[0].tolist())
    numpy_long = LongInput("tiny", tokens, host, 0)
    torch_long = LongInput("tiny", tokens, device, 0, passes_for(device))
    for layer, head in ((0, 1), (1, 2)):
        reads_the_same(numpy_long, torch_long, layer, head)


def test_a_bfloat16_model_keeps_its_queries_and_keys_in_bfloat16_and_reads_as_their_float32_copy():
    """On the device path the kept q/k are the projections' own dtype (half the bytes of a float32
    copy, no digits lost); the passes read them in float32, as numpy reads a float32 copy."""
    model = mistral(2, 1024, 1024).to(torch.bfloat16)
    ids = torch.randint(0, 50, (1, 700), generator=torch.Generator().manual_seed(5))  # the regions reads_the_same zooms into
    device = queries_and_keys(model, ids, on_device=True)
    q, k = device.layer(0)  # layer 0: later layers read outputs the two paths' kernels round apart in bfloat16
    assert q.dtype == k.dtype == torch.bfloat16
    host = queries_and_keys(model, ids)  # float32 numpy copies of the same bfloat16 values
    assert same(q.float().numpy(), host.layer(0)[0]) and same(k.float().numpy(), host.layer(0)[1])
    tokens = long_tokens(ids[0].tolist())
    reads_the_same(LongInput("tiny", tokens, host, 0), LongInput("tiny", tokens, device, 0, passes_for(device)), 0, 2)


def long_tokens(ids: list[int]) -> Tokens:
    n = len(ids)
    return Tokens("x" * n, tuple(ids), ("x",) * n, tuple((i, i + 1) for i in range(n)), (False,) * n, (False,) * n,
                  tuple(range(n)))  # fmt: skip


def reads_the_same(numpy_long: LongInput, torch_long: LongInput, layer: int, head: int) -> None:
    """Overviews (with and without means), a zoom and exact cells of one head through both passes."""
    for means in (True, False):
        theirs, ours = numpy_long.overview(layer, head, 64, means), torch_long.overview(layer, head, 64, means)
        assert same(ours.lse, theirs.lse) and same(ours.max, theirs.max)
        assert (ours.mean is None) == (theirs.mean is None) == (not means)
    whole = numpy_long.overview(layer, head, 64)
    n = numpy_long.length
    for rows, cols in ((range(n), range(n)), (range(100, 600), range(0, 500)), (range(300, 340), range(280, 330))):
        for pooling in ("max", "mean"):
            theirs = long_heatmap(numpy_long, layer, head, whole, rows, cols, pooling, tiles=64)
            ours = long_heatmap(torch_long, layer, head, whole, rows, cols, pooling, tiles=64)
            assert ours.is_exact == theirs.is_exact and same(ours.values(), theirs.values())
            assert ours.is_exact == (len(rows) <= 64)


@pytest.mark.slow
def test_a_checkpoints_long_input_reads_the_same_on_the_torch_path(tmp_path):
    """A Llama checkpoint (grouped-query, rotary) opened by the backend, past its capture limit: its own
    long input (numpy, on this CPU) against the same tokens kept as tensors and read by the torch passes."""
    backend = load_backend(f"hf:{save(tmp_path / 'llama', 'llama', max_position_embeddings=4096)}")
    tokens, dropped = backend.long_tokens(long_text(2000))
    assert len(tokens) > backend.max_tokens and dropped == 0
    numpy_long = backend.long_input(tokens)
    assert numpy_long.passes is NUMPY_PASSES  # the model is on the CPU
    kept = queries_and_keys(backend.model, torch.tensor([tokens.ids]), on_device=True)
    torch_long = LongInput(backend.name, tokens, kept, 0, passes_for(kept))
    for layer, head in ((0, 0), (1, 3)):
        reads_the_same(numpy_long, torch_long, layer, head)


@pytest.mark.gpu
def test_on_cuda_the_kept_tensors_stay_there_and_read_as_on_the_cpu():
    """Where a GPU exists: the model on CUDA keeps q/k there by default, and every read equals the CPU's."""
    model = mistral(2, 1024, 64, full=(1,))
    ids = torch.randint(0, 50, (1, 700), generator=torch.Generator().manual_seed(4))
    host = queries_and_keys(model, ids)
    kept = queries_and_keys(model.to("cuda"), ids)
    assert kept.on_device and kept.layer(1)[0].device.type == "cuda" and passes_for(kept) is TORCH_PASSES
    tokens = long_tokens(ids[0].tolist())
    for layer, head in ((0, 1), (1, 2)):
        on_cuda = LongInput("tiny", tokens, kept, 0, TORCH_PASSES)
        reads_the_same(LongInput("tiny", tokens, host, 0), on_cuda, layer, head)


@pytest.mark.parametrize(("length", "window"), [(301, None), (523, 37), (1000, None), (777, 100)])
def test_rows_mixed_is_the_weighted_sum_of_the_dense_rows_on_either_path(length, window):
    """One step of a token's rollout through a head: Σ_r w[r] · P[r, :] over the first rows, from the
    normalizers, equal to the dense pattern's; rows weighted 0 are skipped, not wrong."""
    q, k = random_qk(length, 16, length)
    s = (q.astype(np.float64) @ k.T.astype(np.float64)) / 4.0
    row, col = np.arange(length)[:, None], np.arange(length)[None, :]
    hidden = (col > row) | ((col <= row - window) if window is not None else False)
    s[hidden] = -np.inf
    lse = np.log(np.exp(s - s.max(1, keepdims=True)).sum(1)) + s.max(1)
    dense = np.exp(s - lse[:, None])
    n = length - 50
    weights = np.random.default_rng(1).random(n)
    weights[: n // 2] = 0.0  # the first blocks weigh nothing
    expected = weights @ dense[:n, :n]
    for mixed in (blockwise.rows_mixed(q, k, lse, weights, block_rows=64, window=window),
                  blockwise_torch.rows_mixed(q, k, lse, weights, block_rows=100, window=window),
                  blockwise_torch.rows_mixed(torch.from_numpy(q), torch.from_numpy(k), lse, weights, window=window)):
        assert mixed.shape == (n,) and mixed.dtype == np.float64
        assert np.abs(mixed - expected).max() <= 1e-5 * max(1.0, np.abs(expected).max())
