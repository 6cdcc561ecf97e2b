"""Long inputs of a model with a sliding window (Mistral): the blockwise path limits each windowed
layer's queries to their band of keys [r − W + 1, r] — zero outside it, normalizers over it alone, the
same patterns as the model's own forward with its sliding-window mask — while the layers exempt from
the window (``full_attention_layers``) see the whole causal past; an 8k input computes only the band's
logits; a Mistral checkpoint opens past the capture limit in the backend and the head view."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
import torch

from apphelpers import app, level_maps
from single_view import problems
from test_long_input import LENGTH, long_text
from test_ours_decoder import save

from attention_viz.core import longcontext
from attention_viz.analysis import blockwise
from attention_viz.analysis.blockwise import normalizers, overview, pattern_block, pooled_region
from attention_viz.analysis.long_input import LongInput, long_heatmap
from attention_viz.backends.registry import load_backend
from attention_viz.core.hooks import capture
from attention_viz.core.model import Transformer, TransformerConfig
from attention_viz.core.names import DECODER_SELF
from attention_viz.inputs.tokens import Tokens

WINDOW = 64
LAYOUT = dict(shape="decoder-only", vocab_size=50, d_model=32, h=4, n_kv_heads=2, d_ff=64, positional="rotary",
              norm="pre", norm_type="rms", activation="silu", gated_ffn=True, dropout=0.0, scale_embeddings=False,
              qkv_bias=False, out_bias=False, ffn_bias=False, generator_bias=False)  # fmt: skip


def mistral(n_layers: int, max_len: int, window: int, full: tuple[int, ...] = ()) -> Transformer:
    torch.manual_seed(0)
    config = TransformerConfig(**LAYOUT, N=n_layers, max_len=max_len, sliding_window=window, full_attention_layers=full)
    return Transformer(config).eval()


def band(rows: range, cols: range, window: int | None) -> np.ndarray:
    """True where query r may see key c: c ≤ r, and r − c < window."""
    offset = np.arange(rows.start, rows.stop)[:, None] - np.arange(cols.start, cols.stop)[None, :]
    return offset >= 0 if window is None else (offset >= 0) & (offset < window)


def outside(n: int, t: int, window: int) -> np.ndarray:
    """(tiles, tiles): True where a t × t tile of an n × n pattern lies wholly outside the band."""
    first = np.arange(0, n, t)
    last = np.minimum(first + t, n) - 1
    future = first[None, :] > last[:, None]  # its first key after its last query
    gone = first[:, None] - last[None, :] >= window  # its last key W or more before its first query
    return future | gone


def pool(p: np.ndarray, t: int, how: str) -> np.ndarray:
    """(n, n) with n a multiple of t → the max or mean of each t × t tile."""
    tiles = p.reshape(p.shape[0] // t, t, p.shape[1] // t, t)
    return tiles.max(axis=(1, 3)) if how == "max" else tiles.mean(axis=(1, 3))


def test_each_layers_blockwise_pattern_equals_the_models_windowed_forward():
    """600 tokens (two of the forward's 512-query blocks), window 64 on layers 0 and 2, layer 1 exempt:
    exact cells, overviews (with and without the forward's normalizers) and a zoom equal the captured
    patterns, which the model's own forward masked with its sliding window."""
    model, n = mistral(3, 1024, WINDOW, full=(1,)), 600
    ids = torch.randint(0, 50, (1, n))
    with torch.inference_mode(), capture(kinds=("q", "k", "pattern")) as recorded:
        model(ids)
    kept = longcontext.queries_and_keys(model, ids)
    assert kept.window == [WINDOW, None, WINDOW]
    everything = range(n)
    for layer in range(3):
        window = kept.window[layer]
        prefix = f"decoder.layers.{layer}.self_attn"
        assert np.abs(kept.layer(layer)[0] - recorded[f"{prefix}.q"][0].numpy()).max() <= 1e-5  # layer 0's windowed
        assert np.abs(kept.layer(layer)[1] - recorded[f"{prefix}.k"][0].numpy()).max() <= 1e-5  # output fed 1, 2
        fused = kept.normalizers(layer)  # the last layer's by the kernel with the keys for values
        for head in range(4):
            captured = recorded[f"{prefix}.pattern"][0, head].numpy()
            q, k = kept.head(layer, head)
            assert np.abs(fused[head] - normalizers(q, k, everything, window=window)).max() <= 1e-5
            exact = pattern_block(q, k, everything, everything, window=window)
            assert np.abs(exact - captured).max() <= 1e-6
            assert np.all(exact[~band(everything, everything, window)] == 0.0)
            assert np.abs(exact.sum(axis=1) - 1.0).max() <= 1e-6
            whole = overview(q, k, tiles=60, window=window)  # tiles of 10 tokens
            assert np.abs(whole.max - pool(captured, 10, "max")).max() <= 1e-6
            assert np.abs(whole.mean - pool(captured, 10, "mean")).max() <= 1e-6
            given = overview(q, k, tiles=60, lse=fused[head], window=window)
            assert np.abs(given.max - pool(captured, 10, "max")).max() <= 1e-6
            for how in ("max", "mean"):
                zoom, tr, tc = pooled_region(q, k, whole.lse, range(100, 400), range(50, 350), tiles=30, pooling=how,
                                             window=window)  # fmt: skip
                assert (tr, tc) == (10, 10)
                assert np.abs(zoom - pool(captured[100:400, 50:350], 10, how)).max() <= 1e-6
        # the window is the layer's own: the exempt layer weighs keys far behind the band
        assert (layer == 1) == bool(np.any(recorded[f"{prefix}.pattern"][0].numpy()[:, 500, :400] > 0))


def test_a_window_as_long_as_the_input_restricts_nothing():
    model = mistral(2, 256, 128)
    assert longcontext.queries_and_keys(model, torch.randint(0, 50, (1, 128))).window == [None, None]
    assert longcontext.queries_and_keys(model, torch.randint(0, 50, (1, 129))).window == [128, 128]
    with pytest.raises(ValueError):
        overview(np.ones((8, 4), np.float32), np.ones((8, 4), np.float32), causal=False, window=4)


def test_an_8k_input_computes_only_the_band(monkeypatch):
    """8192 tokens, window 128: every logit the forward's kernel and the blockwise passes compute is
    counted; none is outside a block's band, and all together are about T × (W + block), against the
    T²/2 = 33.5 million of a full causal head; numpy's peak allocation stays far below one (T, T) array."""
    n, window = 8192, 128
    model = mistral(2, n, window)
    kernel_calls, logit_blocks = [], []
    fused, mask_outside = longcontext._FLASH_CPU, blockwise._mask_outside

    def kernel(q, k, v, dropout, causal, attn_mask=None):
        kernel_calls.append((q.shape[2], k.shape[2], causal, None if attn_mask is None else attn_mask.shape))
        return fused(q, k, v, dropout, causal, attn_mask=attn_mask)

    def counted_mask(s, rows, cols, w=None):  # every block of logits the passes compute goes through it
        logit_blocks.append((s.shape, w))
        mask_outside(s, rows, cols, w)

    monkeypatch.setattr(longcontext, "_FLASH_CPU", kernel)
    monkeypatch.setattr(blockwise, "_mask_outside", counted_mask)
    ids = torch.randint(0, 50, (1, n))
    kept = longcontext.queries_and_keys(model, ids)
    tokens = Tokens("x" * n, tuple(ids[0].tolist()), ("x",) * n, tuple((i, i + 1) for i in range(n)),
                    (False,) * n, (False,) * n, tuple(range(n)))
    long = LongInput("tiny", tokens, kept, 0)
    lse = [kept.normalizers(0), kept.normalizers(1)]  # layer 0's with its output, the last's by the same banded kernel
    assert kept.window == [window, window] and not any(causal for *_, causal, _ in kernel_calls)
    for queries, keys, _, shape in kernel_calls:
        assert keys <= queries + window - 1 and shape == (queries, keys)
    assert sum(q * k for q, k, *_ in kernel_calls) <= 2 * n * (longcontext.WINDOW_BLOCK + window)  # two layers

    tracemalloc.start()
    try:
        for layer, head in ((0, 0), (1, 3)):
            logit_blocks.clear()
            q, k = kept.head(layer, head)
            whole = long.overview(layer, head, tiles=512)  # the full pass: normalizers, max and mean tiles
            assert np.abs(whole.lse - lse[layer][head]).max() <= 1e-4
            assert sum(shape[0] * shape[1] for shape, _ in logit_blocks) <= n * (window + 2 * 256)
            assert all(w == window for _, w in logit_blocks)
            empty = outside(n, 16, window)  # tiles of 16 tokens
            assert np.all(whole.max[empty] == 0.0) and np.all(whole.max[~empty] > 0)
            zoom = long_heatmap(long, layer, head, whole, range(n - 2048, n), range(n - 2048, n))  # tiles of 4
            assert zoom.tile_rows == 4 and np.all(zoom.codes[outside(2048, 4, window)] == 0)
            rows, cols = range(n - 512, n), range(n - 512 - window + 1, n)  # every key the last 512 rows see
            exact = long_heatmap(long, layer, head, whole, rows, cols, tiles=len(cols)).exact
            assert np.abs(exact.sum(axis=1) - 1.0).max() <= 1e-6 and np.all(exact[~band(rows, cols, window)] == 0.0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 32 << 20  # one (T, T) float32 array: 256 MB


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("window")
    save(root / "mistral", "mistral", max_position_embeddings=4096, sliding_window=WINDOW)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ATTENTION_VIZ_MODEL_ROOTS", str(root))
        yield root / "mistral"


def test_a_mistral_checkpoint_reads_past_the_capture_limit(folder):
    """3001 tokens through the backend: the exact cells of both layers (the last one's normalizers
    made by the windowed kernel on demand) equal the captured first 1024 tokens' patterns."""
    backend = load_backend(f"hf:{folder}")
    text = long_text()
    result = backend.run(text)
    assert backend.can_read_long and result.meta["sliding_window"] == WINDOW and result.meta["dropped"] > 0
    long = backend.long_input(*backend.long_tokens(text))
    assert long.length == LENGTH + 1 and long.kept.window == [WINDOW, WINDOW]
    rows, cols = range(900, 1024), range(800, 1024)
    for layer in range(2):
        for pooling in ("max", "mean"):
            whole = long.overview(layer, 2, means=pooling == "mean")
            cells = long_heatmap(long, layer, 2, whole, rows, cols, pooling)
            assert np.abs(cells.exact - result.pattern(DECODER_SELF, layer, 2)[900:1024, 800:1024]).max() <= 1e-5
            assert np.all(cells.exact[~band(rows, cols, WINDOW)] == 0.0)


def test_the_head_view_draws_a_windowed_model_past_the_capture_limit(folder):
    at = app(view="head", model=f"hf:{folder}", text=long_text())
    assert problems(at) == [] and any("this view reads all of it" in info.value for info in at.info)
    [(_, _, z)] = level_maps(at)  # our own element (ui/level_canvas.py)
    assert z.dtype == np.uint8 and z.shape == (501, 501)  # tiles of 6 tokens
    assert np.all(z[outside(LENGTH + 1, 6, WINDOW)] == 0) and np.all(z[np.diag_indices(501)] > 0)
