"""A 16k-token upload reaches the head view on the CPU for the families people open: a Llama-3.1-shaped
model (llama3 rotary scaling, 8 layers × 8 heads) in our decoder, and a Qwen3 of that shape in
transformers' own modules with our attention function (windows: tests/test_registry_long.py). Eager attention would keep 8 × 8 × 16k²
float32 weights (64 GB); the long path keeps each layer's q/k and rebuilds one head's tiles."""

from __future__ import annotations

import numpy as np
import pytest

from apphelpers import app, level_maps
from single_view import problems

from attention_viz.backends.registry import load_backend
from benchmarks.families import WORDS, save_family

TOKENS = 16_384
SHAPE = dict(num_hidden_layers=8, num_attention_heads=8, num_key_value_heads=4, hidden_size=64, head_dim=8,
             intermediate_size=96, max_position_embeddings=TOKENS + 64)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("long16k")
    made = {family: f"hf:{save_family(root / family, family, **SHAPE)}" for family in ("llama3.1", "qwen3")}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ATTENTION_VIZ_MODEL_ROOTS", str(root))
        yield made


@pytest.mark.slow
@pytest.mark.parametrize("family", ["llama3.1", "qwen3"])
def test_a_16k_token_upload_reaches_the_head_view(folders, family):
    rng = np.random.default_rng(0)
    text = " ".join(rng.choice(WORDS, TOKENS - 1))  # with <s>: TOKENS tokens
    backend = load_backend(folders[family])
    assert backend.can_read_long and len(backend.long_tokens(text)[0]) == TOKENS
    at = app(view="head", model=folders[family])
    at.file_uploader(key="text_file").set_value(("long.txt", text.encode(), "text/plain")).run()
    assert problems(at) == []
    assert any(f"{TOKENS:,} tokens" in info.value for info in at.info)
    [(_, _, levels)] = level_maps(at)
    assert levels.dtype == np.uint8 and levels.max() > 0
