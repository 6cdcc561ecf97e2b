"""Head detector: exact on heads built to do one thing, in [0, 1] on anything, averaged over probes."""

import numpy as np
import pytest

from attention_viz.analysis.detector import (
    MASKS,
    SCORES,
    detect,
    head_scores,
    offset_mask,
    pairs_mask,
    to_json_ready,
    top,
)
from attention_viz.analysis.probes import english_probes, repeated_sequence, sequence_probes
from attention_viz.backends.registry import load_backend
from attention_viz.core.names import CROSS, ENCODER_SELF


def one_hot_rows(targets: list[int], n: int) -> np.ndarray:
    P = np.zeros((n, n))
    P[np.arange(n), targets] = 1.0
    return P


def stack(*heads: np.ndarray) -> np.ndarray:
    return np.stack(heads)[None].astype(np.float32)  # (1 layer, heads, T, T)


IDS = [7, 1, 2, 3, 4, 1, 2, 3, 4]  # position 0 plays <bos>; the segment 1 2 3 4 repeats
SPECIAL = [True] + [False] * 8


def test_heads_built_for_one_job_score_one():
    n = len(IDS)
    previous = one_hot_rows([0] + list(range(n - 1)), n)
    itself = np.eye(n)
    # induction: row q of the second copy attends to the token after the earlier copy of IDS[q]
    induction = np.tril(np.ones((n, n))) / np.arange(1, n + 1)[:, None]
    for q in range(5, n):
        induction[q] = 0
        induction[q, q - 3] = 1  # the copy of IDS[q] is at q − 4; the token after it at q − 3
    duplicate = np.tril(np.ones((n, n))) / np.arange(1, n + 1)[:, None]
    for q in range(5, n):
        duplicate[q] = 0
        duplicate[q, q - 4] = 1
    sink = one_hot_rows([0] * n, n)
    scores = head_scores([(stack(previous, itself, induction, duplicate, sink), IDS, SPECIAL)])
    assert scores["previous_token"][0, 0] == pytest.approx(1.0)
    assert scores["self"][0, 1] == pytest.approx(1.0)
    assert scores["induction"][0, 2] == pytest.approx(1.0)
    assert scores["duplicate_token"][0, 3] == pytest.approx(1.0)
    assert scores["sink"][0, 4] == pytest.approx(1.0)
    # and each scores (near) zero elsewhere
    assert scores["previous_token"][0, 1] == 0 and scores["self"][0, 0] == 0 and scores["sink"][0, 1] == 0
    assert scores["induction"][0, 3] == 0 and scores["duplicate_token"][0, 2] == 0


def test_rows_that_count():
    n = len(IDS)
    uniform = np.tril(np.ones((n, n))) / np.arange(1, n + 1)[:, None]
    scores = head_scores([(stack(uniform), IDS, SPECIAL)])
    # causal: row 0 is skipped (it sees one key); previous-token share of row q is 1/(q+1), q = 1..8
    assert scores["previous_token"][0, 0] == pytest.approx(np.mean([1 / (q + 1) for q in range(1, n)]))
    # induction counts only rows with an earlier copy: q = 5..8, target k+1 = q−3, share 1/(q+1)
    assert scores["induction"][0, 0] == pytest.approx(np.mean([1 / (q + 1) for q in range(5, n)]))


def test_scores_stay_in_unit_interval_on_random_patterns():
    rng = np.random.default_rng(0)
    for causal in (False, True):
        n = 12
        P = rng.dirichlet(np.ones(n), size=(3, 4, n))
        if causal:
            P = np.tril(P)
            P /= P.sum(-1, keepdims=True)
        ids = rng.integers(0, 5, n)
        scores = head_scores([(P.astype(np.float32), ids, [False] * n)], {**MASKS, "offset_2": offset_mask(2)})
        for values in scores.values():
            assert values.shape == (3, 4) and (values >= 0).all() and (values <= 1).all()


def test_offset_and_user_pairs():
    n = 6
    ahead = one_hot_rows([min(q + 2, n - 1) for q in range(n)], n)
    scores = head_scores([(stack(ahead), list(range(n)), [False] * n)], {"offset_2": offset_mask(2), "mine": pairs_mask([(0, 2), (3, 5), (3, 4)])})
    assert scores["offset_2"][0, 0] == pytest.approx(1.0)  # rows 0..3 have a key at +2
    assert scores["mine"][0, 0] == pytest.approx(1.0)  # rows 0 and 3: all their weight on marked keys
    with pytest.raises(IndexError):
        head_scores([(stack(ahead), list(range(n)), [False] * n)], {"mine": pairs_mask([(0, 9)])})


def test_cross_attention_and_mismatched_tokens_are_refused():
    with pytest.raises(ValueError, match="self-attention"):
        head_scores([(np.ones((1, 1, 3, 4), np.float32) / 4, [1, 2, 3], [False] * 3)])
    with pytest.raises(ValueError, match="token ids"):
        head_scores([(np.ones((1, 1, 3, 3), np.float32) / 3, [1, 2], [False] * 2)])
    with pytest.raises(ValueError):
        head_scores([])


def test_minilm_over_probes():
    backend = load_backend("minilm")
    probes = backend.probe_texts(8)
    scores = detect(backend.run, probes, ENCODER_SELF)
    assert set(SCORES) == set(scores)
    for values in scores.values():
        assert values.shape == (6, 12) and (values >= 0).all() and (values <= 1).all()
    assert top(scores["previous_token"], 1)[0][:2] == (0, 2)  # MiniLM's previous-token head
    assert scores["previous_token"][0, 2] > 0.9
    ready = to_json_ready(scores)
    assert len(ready["induction"]) == 6 and len(ready["induction"][0]) == 12
    with pytest.raises(KeyError):
        detect(backend.run, probes[:1], CROSS)


def test_probes_are_seeded_and_repeat():
    assert english_probes(6, seed=3) == english_probes(6, seed=3) != english_probes(6, seed=4)
    import random

    words = repeated_sequence("abcdef", 4, random.Random(0)).split()
    assert words[:4] == words[4:] and len(set(words[:4])) == 4
    for text in sequence_probes("abcdefghij", 5, seed=1, min_length=3, max_length=20):
        symbols = text.split()
        half = len(symbols) // 2
        assert symbols[:half] == symbols[half:] and 3 <= half <= 10
