"""The Logit lens page (Explore): the induction model's lens drawn, the answer in the link; a model
without a next-token head is told so in a sentence."""

from __future__ import annotations

import numpy as np
from apphelpers import messages
from single_view import array, figures, link, open_view, problems

from attention_viz.backends.logit_lens import logit_lens
from attention_viz.backends.registry import load_backend

TEXT = "q 7 m x 2 k a q 7 m x 2 k"


def test_the_lens_is_drawn_and_its_answer_kept_in_the_link():
    at = open_view("logit_lens", model="induction", text=TEXT, answer="a")
    assert not problems(at)
    (figure,) = figures(at)
    expected = logit_lens(load_backend("induction"), TEXT, "a")
    np.testing.assert_allclose(array(figure["data"][0]["z"]).reshape(expected.answer_probs.shape),
                               expected.answer_probs, atol=1e-6)
    assert link(at).get("answer") == "a"


def test_an_encoder_is_told_in_a_sentence():
    at = open_view("logit_lens", model="minilm", text="it was tired")
    assert not problems(at) and not figures(at)
    assert any("no next-token head" in m for m in messages(at))
