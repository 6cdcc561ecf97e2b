"""Long inputs (past 1,024 tokens) through transformers' decoders with our attention function
(backends/hf_long.py): each layer's q/k from one forward, the patterns rebuilt blockwise equal
transformers' eager ``output_attentions`` at the same length (scaled rotary, a family's own query
scaling, sliding and interleaved windows); soft-capped and sink families are refused in one sentence."""

import numpy as np
import pytest
import torch

from attention_viz.analysis.blockwise import normalizers, pattern_block
from attention_viz.backends.hf import HFBackend
from attention_viz.errors import ModelError
from benchmarks.families import WORDS, save_family

LENGTH = 1300  # past the 1,024 tokens a capture holds
TEXT = " ".join(WORDS[i * 7 % len(WORDS)] for i in range(LENGTH - 1))  # with <s>: LENGTH tokens


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("long")
    return {f: save_family(root / f, f, max_position_embeddings=4096)
            for f in ("llama3.1", "qwen3", "gemma3", "mistral", "gemma2", "gpt-oss")}


@pytest.mark.parametrize("family", ["llama3.1", "qwen3", "gemma3", "mistral"])
def test_blockwise_patterns_equal_transformers_eager_past_the_capture_limit(folders, family):
    backend = HFBackend(str(folders[family]))
    assert backend.can_read_long and backend.max_tokens == 1024
    tokens, dropped = backend.long_tokens(TEXT)
    assert len(tokens) == LENGTH and dropped == 0
    long = backend.long_input(tokens, dropped)
    long.overview(0, 0)  # the landing view: layer 0's forward stops there, the later layers wait for a view
    assert long.kept._q[1] is None and long.kept._q[0] is not None
    reference = type(backend.model).from_pretrained(folders[family], attn_implementation="eager").eval()
    with torch.no_grad():
        attentions = reference(torch.tensor([tokens.ids]), output_attentions=True).attentions
    rows, cols = range(LENGTH - 40, LENGTH), range(0, LENGTH)
    for layer in range(long.n_layers):
        window = long.kept.window[layer]
        for head in (0, long.n_heads - 1):
            q, k = long.kept.head(layer, head)
            got = pattern_block(q, k, rows, cols, window=window)
            np.testing.assert_allclose(got, attentions[layer][0, head, rows.start :].numpy(), atol=2e-5)
            lse = long.kept.normalizers(layer, head)
            assert lse.shape == (LENGTH,) and np.isfinite(lse).all()
            np.testing.assert_allclose(lse[rows.start :], normalizers(q, k, rows, window=window))
    if family in ("gemma3", "mistral"):
        assert any(w is not None for w in long.kept.window)  # the window reached the passes
    overview = long.overview(0, 0)
    assert overview.max.max() <= 1 + 1e-5


@pytest.mark.parametrize("family, extra", [("gemma2", "soft-caps"), ("gpt-oss", "sinks")])
def test_families_the_passes_do_not_model_are_refused_in_one_sentence(folders, family, extra):
    backend = HFBackend(str(folders[family]))
    assert not backend.can_read_long
    with pytest.raises(ModelError, match=extra) as refused:
        backend.long_input(*backend.long_tokens(TEXT))
    assert "\n" not in str(refused.value)
