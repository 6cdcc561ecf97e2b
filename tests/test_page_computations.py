"""What the pages show, computed without Streamlit: the plain functions behind the causal page, the
all-heads table of a cross-attention, the coreference preset, across-layers and positions pages."""

import numpy as np
import pytest

from attention_viz.analysis.causal import causal_mask, future_weight, padding_check, row_change, scores_before_mask
from attention_viz.analysis.composition import across_layers, flow_for
from attention_viz.analysis.coreference import positions
from attention_viz.analysis.cross_stats import cross_head_stats
from attention_viz.analysis.positions import same_token_rows
from attention_viz.core.names import CROSS, DECODER_SELF, hook_name
from attention_viz.core.result import AttentionResult
from attention_viz.inputs.tokens import from_words

rng = np.random.default_rng(0)


def stochastic(*shape) -> np.ndarray:
    x = rng.random(shape).astype(np.float32)
    return x / x.sum(-1, keepdims=True)


def causal(*shape) -> np.ndarray:
    x = rng.random(shape).astype(np.float32) * np.tril(np.ones(shape[-2:], dtype=np.float32))
    return x / x.sum(-1, keepdims=True)


def test_causal_mask_and_future_weight():
    assert causal_mask(3).tolist() == [[True, False, False], [True, True, False], [True, True, True]]
    pattern = causal(4, 4)
    assert future_weight(pattern).largest == 0.0
    assert future_weight(pattern).smallest_row_sum == pytest.approx(1.0, abs=1e-6)
    pattern[0, 3] = 4e-9
    assert future_weight(pattern).largest == pytest.approx(4e-9)  # tiny is not zero


def test_scores_before_mask_are_scaled_dot_products():
    q, k = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    np.testing.assert_allclose(scores_before_mask(q, k), q @ k.T / 2.0)


def decoder_run(self_patterns: np.ndarray, cross_patterns: np.ndarray) -> AttentionResult:
    words = [f"w{i}" for i in range(self_patterns.shape[-1])]
    tokens = from_words(words, list(range(len(words))), [False] * len(words))
    arrays = {}
    for layer in range(len(self_patterns)):
        arrays[hook_name(DECODER_SELF, layer, "pattern")] = self_patterns[layer]
        arrays[hook_name(CROSS, layer, "pattern")] = cross_patterns[layer]
    return AttentionResult("m", tokens, arrays, target_tokens=tokens)


def test_row_change_takes_the_largest_change_of_each_row_over_layers_heads_and_attentions():
    self_a, cross_a = causal(2, 2, 4, 4), stochastic(2, 2, 4, 3)
    self_b, cross_b = self_a.copy(), cross_a.copy()
    self_b[1, 0, 2] += np.float32(0.25)  # row 2, layer 1
    cross_b[0, 1, 3, 0] -= np.float32(0.5)  # row 3, layer 0, cross-attention
    change = row_change(decoder_run(self_a, cross_a), decoder_run(self_b, cross_b))
    np.testing.assert_allclose(change, [0.0, 0.0, 0.25, 0.5], atol=1e-6)
    assert change[0] == 0.0 and change[1] == 0.0  # exactly


def test_padding_check_measures_padding_and_the_difference_from_running_alone():
    alone = [causal(2, 3, 3), causal(2, 2, 2)]
    batch = np.zeros((2, 2, 3, 3), dtype=np.float32)
    batch[0] = alone[0]
    batch[1, :, :2, :2] = alone[1]
    batch[1, :, 2, :2] = 0.5  # the padded query row (never a real token)
    check = padding_check(batch, alone, [["a", "b", "c"], ["x", "y"]])
    assert check.shorter == 1 and check.padded_labels == ["x", "y", "<pad>"]
    assert check.on_padding == 0.0 and check.versus_alone == 0.0
    batch[1, 0, 0, 2] = 1e-7
    assert padding_check(batch, alone, [["a", "b", "c"], ["x", "y"]]).on_padding == pytest.approx(1e-7)


def test_cross_head_stats_read_a_non_square_pattern_and_name_an_alignment_head():
    aligned = np.zeros((1, 2, 4, 3), dtype=np.float32)
    aligned[0, 0, np.arange(4), [0, 1, 2, 2]] = 1.0  # head 0: one source token per row
    aligned[0, 1] = 1 / 3  # head 1: uniform
    table = cross_head_stats(aligned)
    assert [row["role"] for row in table] == ["focused", "broad"]
    assert table[0]["entropy"] == 0.0 and table[1]["entropy"] == pytest.approx(np.log2(3))
    assert not {"previous", "self", "next", "offset"} & set(table[0])
    sink = cross_head_stats(aligned, key_special=[False, False, True])
    assert sink[0]["special"] == pytest.approx(0.5) and sink[0]["role"] == "special-token sink"


def test_coreference_words_are_found_unless_a_tokenizer_split_one():
    labels = ["[CLS]", "The", "animal", "crossed", "the", "street", "it", "[SEP]"]
    assert positions(labels) == {"it": 6, "animal": 2, "street": 5}
    assert positions(["it", "anim", "##al", "street"]) is None


def test_across_layers_and_flow():
    stack = stochastic(3, 2, 5, 5)
    per_layer, rolled = across_layers(stack, 1)
    np.testing.assert_allclose(per_layer, stack.mean(axis=1)[:, 1, :])
    np.testing.assert_allclose(rolled.sum(-1), 1.0, atol=1e-5)
    flow = flow_for(stack, 1)
    assert flow.matrix.shape == (5, 5) and flow.rows is None and flow.note == ""


def test_same_token_rows_finds_the_first_repeated_ordinary_token():
    ids, special = [101, 7, 8, 7, 102], [True, False, False, False, True]
    with_positions, without = stochastic(5, 5), stochastic(5, 5)
    without[3] = without[1]
    twins = same_token_rows(ids, special, with_positions, without)
    assert (twins.first, twins.second, twins.token_id, twins.gap_without) == (1, 3, 7, 0.0)
    assert same_token_rows([101, 7, 8, 102], [True, False, False, True], with_positions[:4], without[:4]) is None
