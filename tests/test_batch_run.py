"""``av.run(model, [texts])``: texts of different lengths in one padded, masked forward give each
text's arrays as if it ran alone (encoder, grouped-query decoder, the induction model); models that
decode step by step run the texts in turn."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import attention_viz as av
from attention_viz.backends.batched import batches_in_one_forward
from attention_viz.backends.registry import load_backend
from attention_viz.errors import ModelError
from attention_viz.core.hooks import KINDS
from test_patching import save_llama

TEXTS = {
    "minilm": ["The animal didn't cross the street because it was too tired.", "A short one.",
               "The cat sat on the mat."],
    "llama": ["the cat sat on the mat because it was tired", "the dog ran", "it was the park and the cat"],
    "induction": ["a b c a b", "q 7 m x 2 k a q 7 m x 2 k", "z"],
}


@pytest.fixture(scope="module")
def llama(tmp_path_factory) -> str:
    folder = tmp_path_factory.mktemp("llama")
    save_llama(folder)
    return f"hf:{folder}"


@pytest.mark.parametrize("model", list(TEXTS))
def test_each_text_of_a_batch_equals_its_own_run(model, llama):
    name = llama if model == "llama" else model
    assert batches_in_one_forward(load_backend(name))
    batch = av.run(name, TEXTS[model], kinds=KINDS)
    lengths = {len(result.tokens) for result in batch}
    assert len(lengths) == 3  # padding really happened
    for text, result in zip(TEXTS[model], batch):
        alone = av.run(name, text, kinds=KINDS)
        assert result.tokens.labels == alone.tokens.labels and result.meta["batch"] == 3
        assert set(result.arrays) == set(alone.arrays)
        for key, array in alone.arrays.items():
            np.testing.assert_allclose(result.arrays[key], array, rtol=0, atol=2e-5, err_msg=key)


def test_one_forward_for_the_whole_batch(monkeypatch):
    backend = load_backend("minilm")
    calls = []
    original = type(backend.model).forward

    def counted(self, *args, **kwargs):
        calls.append(args[0].shape)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(type(backend.model), "forward", counted)
    av.run("minilm", TEXTS["minilm"])
    assert calls == [torch.Size([3, 16])]


def test_a_translation_model_runs_the_texts_in_turn():
    texts = ["the law was signed .", "the council votes ."]
    batch = av.run("toy-translate", texts)
    for text, result in zip(texts, batch):
        assert result.meta["translation"] == av.run("toy-translate", text).meta["translation"]


def test_bad_batches_are_one_line():
    with pytest.raises(ModelError, match="a list of one or more texts"):
        av.run("minilm", [])
    with pytest.raises(ModelError, match="a list of texts takes no target"):
        av.run("toy-translate", ["the law was signed ."], target="la loi a été signée .")
