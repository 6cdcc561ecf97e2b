"""Coreference for any pair (analysis/pair_shift.py): aligning two sentences, the token to follow,
and the heads ranked by how far that token's row moved between them."""

import numpy as np
import pytest

from attention_viz.analysis.pair_shift import align, default_follow, followable, pair_shift

TIRED = ["[CLS]", "the", "animal", "crossed", "the", "street", "because", "it", "was", "tired", "[SEP]"]
WIDE = TIRED[:9] + ["wide", "[SEP]"]
SPECIAL = [label.startswith("[") for label in TIRED]


def stochastic(layers: int, heads: int, q: int, k: int, seed: int = 0) -> np.ndarray:
    x = np.random.default_rng(seed).random((layers, heads, q, k)).astype(np.float32) + 0.01
    return x / x.sum(-1, keepdims=True)


def test_a_minimal_pair_lines_up_by_position_and_follows_the_pronoun():
    keys = align(TIRED, WIDE)
    assert keys.by_position and keys.pairs == tuple((i, i) for i in range(len(TIRED)))
    assert keys.labels[9] == "tired/wide"
    assert (9, 9) not in followable(TIRED, WIDE, keys)  # different words cannot be followed
    assert default_follow(TIRED, WIDE, keys, SPECIAL) == (7, 7)


def test_sentences_of_different_lengths_compare_only_their_common_tokens():
    longer = ["[CLS]", "the", "big", "animal", "crossed", "the", "street", "because", "it", "was", "tired", "[SEP]"]
    keys = align(TIRED, longer)
    assert not keys.by_position
    assert "big" not in keys.labels and len(keys.pairs) == len(TIRED)
    assert all(TIRED[i] == longer[j] for i, j in keys.pairs)
    assert default_follow(TIRED, longer, keys, SPECIAL) == (7, 8)


def test_without_a_pronoun_the_first_shared_token_after_the_difference_is_followed():
    a = ["[CLS]", "cats", "chase", "mice", "daily", "[SEP]"]
    b = ["[CLS]", "dogs", "chase", "mice", "daily", "[SEP]"]
    assert default_follow(a, b, align(a, b), [True, False, False, False, False, True]) == (2, 2)
    x, y = ["[CLS]", "x", "[SEP]"], ["[CLS]", "y", "[SEP]"]
    assert default_follow(x, y, align(x, y), [True, False, True]) is None  # only special tokens in common


def test_identical_sentences_move_nowhere():
    stack = stochastic(2, 3, len(TIRED), len(TIRED))
    shift = pair_shift(stack, stack.copy(), (7, 7), align(TIRED, TIRED))
    assert [row["move"] for row in shift.rows] == [0.0] * 6
    assert all(row["gained_a"] == row["gained_b"] == "" for row in shift.rows)


def test_the_head_that_moves_all_its_weight_comes_first_with_the_gained_keys():
    a, b = stochastic(2, 3, len(TIRED), len(TIRED), 1), stochastic(2, 3, len(TIRED), len(TIRED), 1)
    a[1, 2, 7] = np.eye(len(TIRED), dtype=np.float32)[2]  # layer 1 head 2: "it" → "animal" in A
    b[1, 2, 7] = np.eye(len(TIRED), dtype=np.float32)[5]  # → "street" in B
    b[0, 1, 7] = 0.5 * b[0, 1, 7] + 0.5 * np.eye(len(TIRED), dtype=np.float32)[5]  # a smaller move elsewhere
    shift = pair_shift(a, b, (7, 7), align(TIRED, WIDE))
    first = shift.rows[0]
    assert (first["layer"], first["head"]) == (1, 2)
    assert first["move"] == pytest.approx(1.0)
    assert (first["gained_b"], first["gained_a"]) == ("street", "animal")
    second = shift.rows[1]
    assert (second["layer"], second["head"], second["gained_b"]) == (0, 1, "street") and 0 < second["move"] < 1
    assert [row["move"] for row in shift.rows] == sorted((row["move"] for row in shift.rows), reverse=True)
    moves = 0.5 * np.abs(shift.b - shift.a).sum(-1)
    assert moves[1, 2] == pytest.approx(1.0) and moves.max() == pytest.approx(first["move"])


def test_rows_over_the_common_keys_are_shares_that_sum_to_one():
    longer = TIRED[:2] + ["big"] + TIRED[2:]
    a, b = stochastic(2, 2, len(TIRED), len(TIRED), 2), stochastic(2, 2, len(longer), len(longer), 3)
    shift = pair_shift(a, b, (7, 8), align(TIRED, longer))
    assert shift.a.shape == shift.b.shape == (2, 2, len(TIRED))
    np.testing.assert_allclose(shift.a.sum(-1), 1.0, atol=1e-6)
    np.testing.assert_allclose(shift.b.sum(-1), 1.0, atol=1e-6)
    assert all(0.0 <= row["move"] <= 1.0 for row in shift.rows)
    # B's row on its common keys, renormalized: the weight on "big" does not count
    kept = [j for _, j in align(TIRED, longer).pairs]
    np.testing.assert_allclose(shift.b[1, 0], b[1, 0, 8, kept] / b[1, 0, 8, kept].sum(), rtol=1e-5)


def test_runs_of_different_models_or_a_bad_token_are_refused():
    a = stochastic(2, 2, 4, 4)
    with pytest.raises(ValueError, match="same model"):
        pair_shift(a, stochastic(3, 2, 4, 4), (1, 1), align(list("abcd"), list("abcd")))
    with pytest.raises(IndexError):
        pair_shift(a, a, (4, 1), align(list("abcd"), list("abcd")))
