"""The logit lens (attention_viz/backends/logit_lens.py) against transformers' own modules: the
hidden states of ``output_hidden_states=True`` (the stream entering each layer; the last one already
through the final norm) → the model's final norm → its LM head → softmax, on a tiny GPT-2 and a tiny
Llama; the figure draws what the lens measured; refusals in one sentence."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from attention_viz.backends.logit_lens import logit_lens
from attention_viz.backends.registry import load_backend
from attention_viz.errors import ModelError
from attention_viz.figures.logit_lens import logit_lens_heatmap
from test_patching import PAIRS, folders  # noqa: F401 (folders: a fixture)


@torch.no_grad()
def their_probabilities(folder: str, architecture: str, text: str) -> tuple[torch.Tensor, list[int]]:
    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    ids = AutoTokenizer.from_pretrained(folder)(text)["input_ids"]
    out = model(torch.tensor([ids]), output_hidden_states=True)
    norm = model.transformer.ln_f if architecture == "gpt2" else model.model.norm
    *entering, output = out.hidden_states
    logits = [model.lm_head(norm(h[0])) for h in entering] + [model.lm_head(output[0])]
    torch.testing.assert_close(logits[-1], out.logits[0])  # the last depth is the model's output
    return torch.stack(logits).softmax(-1), ids


@pytest.mark.parametrize("architecture", ["gpt2", "llama"])
def test_every_depth_equals_transformers_hidden_states_through_norm_and_head(folders, architecture):
    text, _, answer, _ = PAIRS[architecture]
    ours = logit_lens(load_backend(f"hf:{folders[architecture]}"), text, answer, top=3)
    probs, ids = their_probabilities(folders[architecture], architecture, text)
    assert probs.shape[:2] == (3, len(ids)) and ours.top_probs.shape == (3, len(ids), 3)
    best = probs.topk(3, dim=-1)
    np.testing.assert_allclose(ours.top_probs, best.values.numpy(), rtol=0, atol=1e-5)
    assert (ours.top_ids[..., 0] == best.indices[..., 0].numpy()).all()
    tokenizer = AutoTokenizer.from_pretrained(folders[architecture])
    a = tokenizer(f"{text} {answer}")["input_ids"][len(ids)]
    np.testing.assert_allclose(ours.answer_probs, probs[..., a].numpy(), rtol=0, atol=1e-6)
    assert ours.top_tokens[-1][-1][0] == tokenizer.decode([int(best.indices[-1, -1, 0])])
    assert ours.rows == ("embeddings", "after layer 0", "after layer 1 (output)")


def test_the_induction_model_predicts_the_copy_only_after_its_second_layer():
    lens = logit_lens(load_backend("induction"), "q 7 m x 2 k a q 7 m x 2 k", "a")
    assert lens.top_tokens[-1][-1][0] == "a" and lens.answer_probs[-1, -1] > 0.5
    assert lens.first_row_predicting(-1, lens.top_ids[-1, -1, 0]) == 2  # not from the embeddings, not after layer 0


def test_the_figure_draws_the_lens():
    lens = logit_lens(load_backend("induction"), "q 7 m x 2 k a q 7 m x 2 k", "a")
    heat = logit_lens_heatmap(lens).data[0]
    np.testing.assert_allclose(np.asarray(heat.z, dtype=float), lens.answer_probs, atol=1e-6)
    assert heat.text[-1][-1] == "a"
    no_answer = logit_lens_heatmap(logit_lens(load_backend("induction"), "q 7 m x 2 k a q 7 m x 2 k")).data[0]
    np.testing.assert_allclose(np.asarray(no_answer.z, dtype=float), lens.top_probs[..., 0], atol=1e-6)


def test_models_without_an_unembedding_are_refused():
    with pytest.raises(ModelError, match="^minilm is a sentence encoder with no unembedding: the logit lens needs"):
        logit_lens(load_backend("minilm"), "it was tired")
