"""Long inputs (past 1,024 tokens) through transformers' decoders with our attention function
(backends/hf_long.py): each layer's q/k from one forward, the patterns rebuilt blockwise equal
transformers' eager ``output_attentions`` at the same length (scaled rotary, a family's own query
scaling, sliding and interleaved windows, Gemma 2's soft-capped logits, GPT-OSS's sinks). For the two
families with extras every long view's numbers equal the same computed from eager's patterns, through
numpy's passes and the torch twin: pooled tiles, zooms, exact cells, a query's rows, a token's
rollout, the head detector's scores; and the head view draws them."""

import numpy as np
import pytest
import torch

from apphelpers import app, level_maps
from single_view import problems
from test_long_extras import pool

from attention_viz.analysis.blockwise import head_logits, normalizers, pattern_block
from attention_viz.analysis.detector import MASKS, head_scores, offset_mask
from attention_viz.analysis.detector_view import OFFSET
from attention_viz.analysis.long_detector import long_scores
from attention_viz.analysis.long_input import NUMPY_PASSES, LongInput, query_rows, token_rollout
from attention_viz.backends.hf import HFBackend
from attention_viz.backends.hf_long import long_refusal
from attention_viz.backends.long_passes import TORCH_PASSES
from benchmarks.families import WORDS, save_family

EXTRAS = ("gemma2", "gpt-oss")  # soft-capped logits with windows; sinks with windows

LENGTH = 1300  # past the 1,024 tokens a capture holds
TEXT = " ".join(WORDS[i * 7 % len(WORDS)] for i in range(LENGTH - 1))  # with <s>: LENGTH tokens


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("long")
    made = {f: save_family(root / f, f, max_position_embeddings=4096)
            for f in ("llama3.1", "qwen3", "gemma3", "mistral", *EXTRAS)}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ATTENTION_VIZ_MODEL_ROOTS", str(root))
        yield made


def eager_patterns(folder, model: torch.nn.Module, ids: list[int]) -> np.ndarray:
    """(layers, heads, T, T) float64: transformers' eager attention of ``ids``, with ``output_attentions``."""
    reference = type(model).from_pretrained(folder, attn_implementation="eager").eval()
    with torch.no_grad():
        attentions = reference(torch.tensor([ids]), output_attentions=True).attentions
    return np.stack([a[0].double().numpy() for a in attentions])


@pytest.fixture(scope="module")
def extras(folders):
    """family → (its long input, eager's patterns of the same tokens)."""
    made = {}
    for family in EXTRAS:
        backend = HFBackend(str(folders[family]))
        long = backend.long_input(*backend.long_tokens(TEXT))
        made[family] = long, eager_patterns(folders[family], backend.model, long.tokens.ids)
    return made


@pytest.mark.parametrize("family", ["llama3.1", "qwen3", "gemma3", "mistral", *EXTRAS])
def test_blockwise_patterns_equal_transformers_eager_past_the_capture_limit(folders, family):
    backend = HFBackend(str(folders[family]))
    assert backend.can_read_long and backend.max_tokens == 1024
    tokens, dropped = backend.long_tokens(TEXT)
    assert len(tokens) == LENGTH and dropped == 0
    long = backend.long_input(tokens, dropped)
    long.overview(0, 0)  # the landing view: layer 0's forward stops there, the later layers wait for a view
    assert long.kept._q[1] is None and long.kept._q[0] is not None
    attentions = eager_patterns(folders[family], backend.model, tokens.ids)
    rows, cols = range(LENGTH - 40, LENGTH), range(0, LENGTH)
    for layer in range(long.n_layers):
        for head in (0, long.n_heads - 1):
            q, k = long.kept.head(layer, head)
            logits = head_logits(long.kept, layer, head).options
            got = pattern_block(q, k, rows, cols, **logits)
            np.testing.assert_allclose(got, attentions[layer, head, rows.start :], atol=1e-5)
            lse = long.kept.normalizers(layer, head)
            assert lse.shape == (LENGTH,) and np.isfinite(lse).all()
            np.testing.assert_allclose(lse[rows.start :], normalizers(q, k, rows, **logits))
    if family in ("gemma3", "mistral", *EXTRAS):
        assert any(w is not None for w in long.kept.window)  # the window reached the passes
    overview = long.overview(0, 0)
    assert overview.max.max() <= 1 + 1e-5


@pytest.mark.slow
@pytest.mark.parametrize("passes", [NUMPY_PASSES, TORCH_PASSES], ids=["numpy", "torch"])
@pytest.mark.parametrize("family", EXTRAS)
def test_every_long_view_applies_the_soft_cap_and_the_sinks(extras, family, passes):
    kept_long, eager = extras[family]
    long = LongInput(kept_long.model, kept_long.tokens, kept_long.kept, 0, passes)
    assert long.length == LENGTH
    if family == "gemma2":
        assert set(long.kept.softcap) == {0.3} and long.kept.sinks == [None, None]
    else:
        assert long.kept.softcap == [None, None] and all(s.shape == (long.n_heads,) for s in long.kept.sinks)
        assert eager.sum(axis=-1).min() < 0.9  # the sinks take a share of the rows a test can see
    early, late = range(0, 40), range(LENGTH - 40, LENGTH)
    for layer in range(long.n_layers):
        for head in range(long.n_heads):
            p, q_k, logits = eager[layer, head], long.kept.head(layer, head), head_logits(long.kept, layer, head)
            for rows in (early, late):  # early rows: few keys, where a sink's share is largest
                exact = passes.pattern_block(*q_k, rows, range(LENGTH), **logits.options)
                np.testing.assert_allclose(exact, p[rows.start : rows.stop], atol=1e-5)
                np.testing.assert_allclose(exact.sum(axis=1), p[rows.start : rows.stop].sum(axis=1), atol=1e-5)
            whole = long.overview(layer, head)  # its own normalizers
            t = whole.tile_rows
            np.testing.assert_allclose(whole.max, pool(p, t, t, "max"), atol=1e-5)
            np.testing.assert_allclose(whole.mean, pool(p, t, t, "mean"), atol=1e-5)
            np.testing.assert_allclose(long.overview(layer, head, means=False).max, pool(p, t, t, "max"), atol=1e-5)
            rows, cols = range(300, 1250), range(100, 1200)  # a zoom, from the overview's normalizers
            for pooling in ("max", "mean"):
                pooled, tr, tc = passes.pooled_region(*q_k, whole.lse, rows, cols, tiles=64, pooling=pooling,
                                                      **logits.options)  # fmt: skip
                np.testing.assert_allclose(pooled, pool(p[300:1250, 100:1200], tr, tc, pooling), atol=1e-5)
    for query in (5, LENGTH - 1):
        np.testing.assert_allclose(query_rows(long, query), eager[:, :, query, : query + 1], atol=1e-5)
    rolled = np.eye(LENGTH)[LENGTH - 1]
    for layer in reversed(range(long.n_layers)):  # Abnar & Zuidema: rows of ½ Ā + ½ I, renormalized
        mixing = 0.5 * eager[layer].mean(axis=0) + 0.5 * np.eye(LENGTH)
        rolled = rolled @ (mixing / mixing.sum(axis=1, keepdims=True))
    np.testing.assert_allclose(token_rollout(long, LENGTH - 1), rolled, atol=1e-5)
    ids, special = np.asarray(long.tokens.ids), np.asarray(long.tokens.special)
    masks = {**MASKS, OFFSET: offset_mask(-2)}
    expected = head_scores([(eager, ids, special)], masks)
    ours = head_scores([], masks, long_scores(long, -2, most=LENGTH))
    for name in expected:
        np.testing.assert_allclose(ours[name], expected[name], atol=1e-5, err_msg=name)


@pytest.mark.parametrize("family", EXTRAS)
def test_the_head_view_reads_them_past_the_capture_limit(folders, family):
    model = f"hf:{folders[family]}"
    at = app(view="head", model=model)
    at.file_uploader(key="text_file").set_value(("long.txt", TEXT.encode(), "text/plain")).run()
    assert problems(at) == []
    assert any(f"{LENGTH:,} tokens" in info.value for info in at.info)
    [(_, _, levels)] = level_maps(at)
    assert levels.dtype == np.uint8 and levels.max() > 0


def test_sinks_the_passes_cannot_read_are_refused_in_one_sentence(folders):
    backend = HFBackend(str(folders["gpt-oss"]))
    del backend.registry.module(next(s for s in backend.registry.sites if s.sinks)).sinks
    refused = long_refusal(backend.registry, backend.name)
    assert "sinks" in refused and "\n" not in refused
