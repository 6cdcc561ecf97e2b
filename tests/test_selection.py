"""From a result and the user's choices to the drawn matrix."""

import numpy as np
import pytest

from attention_viz.core.result import AttentionResult
from attention_viz.analysis.selection import Choice, displayed, group_tokens
from attention_viz.inputs.tokens import from_words

rng = np.random.default_rng(0)


def stochastic(*shape):
    x = rng.random(shape).astype(np.float32)
    return x / x.sum(-1, keepdims=True)


@pytest.fixture
def encdec() -> AttentionResult:
    source = from_words(["<s>", "the", "cat", "</s>"], [1, 5, 6, 2], [True, False, False, True])
    target = from_words(["<bos>", "le", "chat"], [1, 7, 8], [True, False, False])
    arrays = {
        "encoder.layers.0.self_attn.pattern": stochastic(2, 4, 4),
        "decoder.layers.0.self_attn.pattern": stochastic(2, 3, 3),
        "decoder.layers.0.cross_attn.pattern": stochastic(2, 3, 4),
    }
    return AttentionResult("toy", source, arrays, target)


def test_cross_attention_reads_target_rows_and_source_columns(encdec):
    queries, keys = group_tokens(encdec, ("decoder", "cross_attn"))
    assert queries.labels == ("<bos>", "le", "chat") and keys.labels[1:3] == ("the", "cat")
    shown = displayed(encdec, Choice(("decoder", "cross_attn"), 0, 1))
    assert shown.matrix.shape == (3, 4)
    np.testing.assert_array_equal(shown.matrix, encdec.arrays["decoder.layers.0.cross_attn.pattern"][1])


def test_hiding_special_tokens_renormalizes_each_side_with_its_own_flags(encdec):
    shown = displayed(encdec, Choice(("decoder", "cross_attn"), 0, "mean", hide_special=True))
    assert shown.query_labels == ["le", "chat"] and shown.key_labels == ["the", "cat"]
    np.testing.assert_allclose(shown.matrix.sum(-1), 1, atol=1e-6)
    assert any("renormalized" in note for note in shown.notes)


def test_max_over_heads_says_rows_no_longer_sum_to_one(encdec):
    shown = displayed(encdec, Choice(("encoder", "self_attn"), 0, "max"))
    assert (shown.matrix.sum(-1) >= 1 - 1e-6).all()
    assert any("no longer sum to 1" in note for note in shown.notes)


def test_word_level_keeps_rows_summing_to_one():
    tokens = from_words(["[CLS]", "un", "believ", "able", "!", "[SEP]"], [101, 1, 2, 3, 4, 102],
                        [True, False, False, False, False, True])
    result = AttentionResult("m", tokens, {"encoder.layers.0.self_attn.pattern": stochastic(3, 6, 6)})
    shown = displayed(result, Choice(words=True))
    assert len(shown.query_labels) == len(tokens.words())
    np.testing.assert_allclose(shown.matrix.sum(-1), 1, atol=1e-5)
