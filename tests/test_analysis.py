"""analysis.py: rollout and flow against hand-computed and brute-force answers, head statistics on
heads built to have one known role, and the edge cases (1 token, all special, masked rows)."""

import math
import sys
from collections import deque

import numpy as np
import pytest

from attention_viz.analysis import (
    FlowTooLarge,
    attention_flow,
    difference,
    drop_special,
    flow_max_tokens,
    focus_matrix,
    head_max,
    head_mean,
    head_stats,
    layer_attention,
    rollout,
    top_heads,
)

def random_stack(layers, heads, n, sharpness=3.0, seed=0):
    """Softmax of random logits: float32 [layers, heads, n, n], rows sum to 1."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(layers, heads, n, n)) * sharpness
    x = np.exp(x - x.max(-1, keepdims=True))
    return (x / x.sum(-1, keepdims=True)).astype(np.float32)


def one_hot_head(n, key_of):
    """[n, n] pattern where query q puts all its weight on key key_of(q)."""
    W = np.zeros((n, n), np.float32)
    for q in range(n):
        W[q, key_of(q)] = 1.0
    return W


def stack_of(*heads):
    return np.stack(heads)[None]  # (1 layer, heads, n, n)


# ---------------------------------------------------------------- head mean / max, drop, threshold


def test_head_max_at_least_head_mean_and_not_row_stochastic():
    P = random_stack(1, 4, 6)[0]
    mean, mx = head_mean(P), head_max(P)
    assert mean.shape == mx.shape == (6, 6)
    assert np.all(mx >= mean - 1e-7)
    np.testing.assert_allclose(mean.sum(-1), 1.0, atol=1e-6)
    assert np.all(mx.sum(-1) > 1.0 + 1e-3)  # the documented caveat: max is not a distribution


def test_head_mean_of_a_stack_is_per_layer():
    P = random_stack(3, 4, 5)
    np.testing.assert_allclose(head_mean(P)[2], P[2].mean(0), atol=1e-7)


def test_drop_special_renormalizes_rows():
    P = random_stack(2, 3, 6)
    special = [True, False, False, False, False, True]
    sub, kept, kept_keys = drop_special(P, special)
    assert kept_keys.tolist() == kept.tolist()
    assert kept.tolist() == [1, 2, 3, 4]
    assert sub.shape == (2, 3, 4, 4) and sub.dtype == np.float32
    np.testing.assert_allclose(sub.sum(-1), 1.0, atol=1e-6)
    # proportions among the kept keys do not change
    row = P[1, 2, 3, 1:5]
    np.testing.assert_allclose(sub[1, 2, 2], row / row.sum(), rtol=1e-5)


def test_drop_special_row_that_only_saw_specials_stays_zero():
    W = one_hot_head(4, lambda q: 0)  # everything on [CLS]
    sub, kept, _ = drop_special(W, [True, False, False, True])
    assert kept.tolist() == [1, 2]
    assert np.all(sub == 0) and not np.isnan(sub).any()


def test_drop_special_all_special_is_empty():
    sub, kept, _ = drop_special(random_stack(1, 2, 2), [True, True])
    assert sub.shape == (1, 2, 0, 0) and kept.size == 0


def test_drop_special_cross_attention_uses_each_sides_flags():
    P = random_stack(1, 1, 4)[0, 0][:3]  # 3 target queries × 4 source keys
    sub, rows, cols = drop_special(P, [True, False, False], [False, False, False, True])
    assert rows.tolist() == [1, 2] and cols.tolist() == [0, 1, 2]
    np.testing.assert_allclose(sub.sum(-1), 1.0, atol=1e-6)


# ---------------------------------------------------------------- rollout


def test_rollout_rows_sum_to_one_and_equal_the_matrix_product():
    P = random_stack(2, 3, 5)
    R = rollout(P)
    assert R.shape == (2, 5, 5) and R.dtype == np.float32
    np.testing.assert_allclose(R.sum(-1), 1.0, atol=1e-6)
    A = [0.5 * P[layer].astype(np.float64).mean(0) + 0.5 * np.eye(5) for layer in range(2)]
    A = [a / a.sum(-1, keepdims=True) for a in A]
    np.testing.assert_allclose(R[0], A[0], atol=1e-6)
    np.testing.assert_allclose(R[1], A[1] @ A[0], atol=1e-6)


def test_rollout_of_identity_attention_is_identity():
    P = np.broadcast_to(np.eye(4, dtype=np.float32), (3, 2, 4, 4))
    R = rollout(P)
    for layer in range(3):
        np.testing.assert_allclose(R[layer], np.eye(4), atol=1e-7)
    np.testing.assert_allclose(rollout(P, add_residual=False)[-1], np.eye(4), atol=1e-7)


def test_rollout_without_residual_is_the_plain_product():
    P = random_stack(3, 2, 4)
    W = P.astype(np.float64).mean(1)
    np.testing.assert_allclose(rollout(P, add_residual=False)[2], W[2] @ W[1] @ W[0], atol=1e-6)


def test_rollout_rejects_cross_attention_shapes():
    with pytest.raises(ValueError, match="self-attention"):
        rollout(np.full((1, 1, 2, 3), 1 / 3, np.float32))


# ---------------------------------------------------------------- attention flow


def reference_flow(A):
    """Plain Edmonds–Karp on the whole layered graph (every token at every layer boundary)."""
    L, n, _ = A.shape
    N = (L + 1) * n  # node l*n + a: token a after layer l (l = 0: the inputs)
    C = np.zeros((N, N))
    for layer in range(1, L + 1):
        C[layer * n : (layer + 1) * n, (layer - 1) * n : layer * n] = A[layer - 1]
    out = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            s, t, R, total = L * n + i, j, C.copy(), 0.0
            while True:
                parent = {s: s}
                queue = deque([s])
                while queue and t not in parent:
                    u = queue.popleft()
                    for v in np.flatnonzero(R[u] > 1e-15):
                        if v not in parent:
                            parent[v] = u
                            queue.append(v)
                if t not in parent:
                    break
                path, v = [], t
                while v != s:
                    path.append((parent[v], v))
                    v = parent[v]
                push = min(R[u, v] for u, v in path)
                for u, v in path:
                    R[u, v] -= push
                    R[v, u] += push
                total += push
            out[i, j] = total
    return out


def cyclic_two_layer_stack():
    """Layer 0: token q attends to token q+1 (cyclic); layer 1: uniform. One head each."""
    W0 = one_hot_head(3, lambda q: (q + 1) % 3)
    W1 = np.full((3, 3), 1 / 3, np.float32)
    return np.stack([W0[None], W1[None]])  # (2, 1, 3, 3)


# With the residual, A0 = [[.5,.5,0],[0,.5,.5],[.5,0,.5]] and A1 = 1/6 + 1/2·I. Every path is
# top i → middle a → input j, so flow(i, j) = Σ_a min(A1[i, a], A0[a, j]); e.g. (0, 2):
# min(2/3, 0) + min(1/6, 1/2) + min(1/6, 1/2) = 1/3.
HAND_FLOW = np.array([[2, 2, 1], [1, 2, 2], [2, 1, 2]]) / 3


def test_flow_two_layers_by_hand():
    P = cyclic_two_layer_stack()
    np.testing.assert_allclose(attention_flow(P, normalize=False), HAND_FLOW, atol=1e-6)
    np.testing.assert_allclose(attention_flow(P), HAND_FLOW / HAND_FLOW.sum(1, keepdims=True), atol=1e-6)


def test_flow_through_a_deep_stack_needs_no_recursion_limit():
    # 1,500 identity layers over the hand-computed pair: every augmenting path is ~1,500 nodes
    # long, deeper than Python's default recursion limit (1,000). Same answer, no setting touched.
    depth = 1_500
    assert depth > sys.getrecursionlimit()
    limit = sys.getrecursionlimit()
    identity = np.broadcast_to(np.eye(3, dtype=np.float32), (depth, 1, 3, 3))
    P = np.concatenate([cyclic_two_layer_stack(), identity])
    np.testing.assert_allclose(attention_flow(P, normalize=False), HAND_FLOW, atol=1e-6)
    assert sys.getrecursionlimit() == limit


def test_flow_through_an_identity_top_layer_is_unchanged():
    # an identity layer on top makes 3 layers (so the general max-flow runs) with the same answer
    P = np.concatenate([cyclic_two_layer_stack(), np.eye(3, dtype=np.float32)[None, None]])
    np.testing.assert_allclose(attention_flow(P, normalize=False), HAND_FLOW, atol=1e-6)


@pytest.mark.parametrize(
    "layers, heads, n, sharpness, seed",
    [(3, 1, 5, 8.0, 1), (4, 2, 6, 3.0, 2), (5, 1, 5, 12.0, 3), (3, 3, 7, 1.0, 4)],
)
def test_flow_matches_brute_force(layers, heads, n, sharpness, seed):
    P = random_stack(layers, heads, n, sharpness, seed)
    expected = reference_flow(layer_attention(P))
    np.testing.assert_allclose(attention_flow(P, normalize=False), expected, atol=1e-6)
    flow = attention_flow(P)
    np.testing.assert_allclose(flow.sum(-1), 1.0, atol=1e-6)
    assert flow.dtype == np.float32


def test_flow_is_bounded_and_respects_a_causal_mask():
    n = 6
    P = random_stack(4, 2, n, 4.0, 5) * np.tril(np.ones((n, n), np.float32))
    P /= P.sum(-1, keepdims=True)
    flow = attention_flow(P, normalize=False)
    assert np.all(flow <= 1 + 1e-6)
    assert np.all(np.triu(flow, 1) == 0)  # no path reaches a later input token
    np.testing.assert_allclose(flow, reference_flow(layer_attention(P)), atol=1e-6)


def test_flow_selected_query_rows_equal_the_full_rows():
    P = random_stack(3, 2, 6, 4.0, 6)
    full = attention_flow(P)
    np.testing.assert_allclose(attention_flow(P, queries=[4, 1]), full[[4, 1]], atol=1e-7)


def test_flow_refuses_large_inputs_before_any_work(monkeypatch):
    import attention_viz.analysis.flow as flow_module

    def no_work(*_):
        raise AssertionError("the refusal must come before the attention is even combined")

    monkeypatch.setattr(flow_module, "layer_attention", no_work)
    P = np.zeros((6, 12, 120, 120), np.float32)
    with pytest.raises(FlowTooLarge) as info:
        attention_flow(P)
    err = info.value
    assert err.max_tokens == flow_max_tokens(6) and 10 <= err.max_tokens < 120
    message = str(err)
    assert "120 tokens" in message and f"up to {err.max_tokens} tokens" in message and "rollout" in message
    assert isinstance(err, ValueError)


def test_flow_accepts_the_largest_allowed_input():
    n = flow_max_tokens(3)
    flow = attention_flow(random_stack(3, 2, n, 3.0, 7))
    assert flow.shape == (n, n) and np.isfinite(flow).all()
    with pytest.raises(FlowTooLarge):
        attention_flow(random_stack(3, 1, n + 1))


# ---------------------------------------------------------------- head statistics and roles

SPECIAL = [True, False, False, False, False, False, True]  # [CLS] w w w w w [SEP]
N = len(SPECIAL)


def stats_by_head(P, special=SPECIAL):
    return {row["head"]: row for row in head_stats(P, special)}


def test_constructed_heads_get_their_roles():
    uniform = np.full((N, N), 1 / N, np.float32)
    P = stack_of(
        one_hot_head(N, lambda q: max(q - 1, 0)),  # 0: previous token
        one_hot_head(N, lambda q: q),  # 1: itself
        one_hot_head(N, lambda q: min(q + 1, N - 1)),  # 2: next token
        one_hot_head(N, lambda q: 0),  # 3: [CLS]
        uniform,  # 4: everything
        one_hot_head(N, lambda q: min(q + 2, N - 1)),  # 5: two tokens ahead
    )
    stats = stats_by_head(P)
    assert stats[0]["role"] == "previous-token" and stats[0]["previous"] == pytest.approx(1.0)
    assert stats[1]["role"] == "self" and stats[1]["self"] == pytest.approx(1.0)
    assert stats[2]["role"] == "next-token" and stats[2]["next"] == pytest.approx(1.0)
    assert stats[3]["role"] == "special-token sink" and stats[3]["special"] == pytest.approx(1.0)
    assert stats[4]["role"] == "broad"
    assert stats[4]["entropy"] == pytest.approx(math.log2(N), abs=1e-5)  # bits
    assert stats[4]["entropy_norm"] == pytest.approx(1.0, abs=1e-5)
    assert stats[5]["role"] == "positional" and stats[5]["offset"] == 2
    assert [(row["layer"], row["head"]) for row in head_stats(P, SPECIAL)] == [(0, h) for h in range(6)]


def test_uniform_mean_distance_by_hand():
    n = 4  # Σ_q Σ_k |q−k| = 20 over 16 pairs → 1.25 = (n²−1)/(3n)
    stats = head_stats(np.full((1, 1, n, n), 1 / n, np.float32))[0]
    assert stats["distance"] == pytest.approx(1.25)
    assert stats["special"] == 0.0


def test_previous_token_distance_and_entropy():
    stats = head_stats(stack_of(one_hot_head(N, lambda q: max(q - 1, 0))), SPECIAL)[0]
    assert stats["distance"] == pytest.approx(1.0)  # ordinary rows 1..5 all look one back
    assert stats["entropy"] == pytest.approx(0.0)


def test_first_token_sink_without_special_tokens():
    # GPT-2 has no [CLS]; heads park their weight on token 0
    stats = head_stats(stack_of(one_hot_head(5, lambda q: 0)))[0]
    assert stats["role"] == "special-token sink" and stats["first"] == pytest.approx(1.0)


def test_causal_uniform_head_is_broad():
    n = 6
    W = np.tril(np.ones((n, n), np.float32))
    W /= W.sum(-1, keepdims=True)
    stats = head_stats(W[None, None])[0]
    assert stats["entropy_norm"] == pytest.approx(1.0, abs=1e-5)  # uniform over what it may see
    assert stats["role"] == "broad"


def test_mixed_head():
    # 0.4 on itself, 0.3 one back, 0.3 three ahead: no share reaches 0.5, entropy ~half the maximum
    n = 8
    W = 0.4 * one_hot_head(n, lambda q: q) + 0.3 * one_hot_head(n, lambda q: max(q - 1, 0))
    W += 0.3 * one_hot_head(n, lambda q: min(q + 3, n - 1))
    assert head_stats(W[None, None])[0]["role"] == "mixed"


def test_stats_edge_cases_never_nan():
    one = head_stats(np.ones((2, 3, 1, 1), np.float32), [False])
    assert len(one) == 6 and all(row["role"] == "none" for row in one)
    only_special = head_stats(random_stack(1, 2, 2), [True, True])
    assert all(row["role"] == "none" and row["entropy"] == 0.0 for row in only_special)
    for rows in (one, only_special):
        for row in rows:
            assert all(math.isfinite(v) for v in row.values() if isinstance(v, float))


# ---------------------------------------------------------------- focus, top heads, difference


def test_focus_matrix_and_top_heads():
    P = random_stack(3, 4, 5)
    focus = focus_matrix(P, 2, 4)
    assert focus.shape == (3, 4)
    assert focus[1, 3] == P[1, 3, 2, 4]
    top = top_heads(P, 2, 4, n=3)
    assert len(top) == 3
    weights = [w for _, _, w in top]
    assert weights == sorted(weights, reverse=True) and weights[0] == pytest.approx(focus.max())
    layer, head, weight = top[0]
    assert focus[layer, head] == pytest.approx(weight)
    with pytest.raises(IndexError):
        focus_matrix(P, 5, 0)


def test_difference_same_shape_and_refusal():
    a, b = random_stack(2, 2, 4, seed=1), random_stack(2, 2, 4, seed=2)
    np.testing.assert_allclose(difference(a, b), a - b)
    with pytest.raises(ValueError, match="same number of tokens"):
        difference(a, random_stack(2, 2, 5))


# ---------------------------------------------------------------- masked rows, bad input


def test_zero_rows_give_no_nan_anywhere():
    P = random_stack(3, 2, 5)
    P[:, :, 3, :] = 0.0  # a fully masked query
    special = [True, False, False, False, True]
    outputs = [
        head_mean(P),
        head_max(P),
        drop_special(P, special)[0],
        rollout(P),
        rollout(P, add_residual=False),
        attention_flow(P),
        attention_flow(P, normalize=False),
    ]
    for out in outputs:
        assert np.isfinite(out).all()
    np.testing.assert_allclose(rollout(P).sum(-1), 1.0, atol=1e-6)
    assert np.all(rollout(P, add_residual=False)[:, 3] == 0)
    for row in head_stats(P, special):
        assert all(math.isfinite(v) for v in row.values() if isinstance(v, float))


def test_single_token():
    P = np.ones((2, 2, 1, 1), np.float32)
    np.testing.assert_allclose(rollout(P), np.ones((2, 1, 1)))
    np.testing.assert_allclose(attention_flow(P), [[1.0]])
    np.testing.assert_allclose(attention_flow(np.ones((4, 1, 1, 1), np.float32)), [[1.0]])


def test_nan_input_is_refused():
    P = random_stack(1, 1, 3)
    P[0, 0, 1, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        rollout(P)
