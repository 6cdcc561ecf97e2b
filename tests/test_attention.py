"""The pure attention functions against PyTorch's own kernels and the mask invariants."""

import math

import pytest
import torch
import torch.nn.functional as F

from attention_viz.core.attention import (
    additive_attention,
    additive_scores,
    causal_mask,
    padding_mask,
    query_key_products,
    raw_self_attention,
    scaled_dot_product_attention,
)

torch.manual_seed(0)


def qkv(batch=2, heads=3, tq=5, tk=7, d=8):
    return torch.randn(batch, heads, tq, d), torch.randn(batch, heads, tk, d), torch.randn(batch, heads, tk, d)


def test_equals_torch_sdpa_without_mask():
    q, k, v = qkv()
    ours = scaled_dot_product_attention(q, k, v)
    assert (ours.context - F.scaled_dot_product_attention(q, k, v)).abs().max() <= 1e-6


def test_equals_torch_sdpa_with_boolean_mask():
    q, k, v = qkv(tq=6, tk=6)
    mask = causal_mask(6) & padding_mask([6, 4]).unsqueeze(1)  # (2, 1, 6, 6)
    ours = scaled_dot_product_attention(q, k, v, mask)
    theirs = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert (ours.context - theirs).abs().max() <= 1e-6


def test_equals_torch_sdpa_is_causal():
    q, k, v = qkv(tq=9, tk=9)
    ours = scaled_dot_product_attention(q, k, v, causal_mask(9))
    assert (ours.context - F.scaled_dot_product_attention(q, k, v, is_causal=True)).abs().max() <= 1e-6


def test_scores_are_scaled_logits_and_unscaled_when_switched_off():
    q, k, v = qkv()
    scaled = scaled_dot_product_attention(q, k, v)
    raw = scaled_dot_product_attention(q, k, v, scale=False)
    torch.testing.assert_close(raw.scores, q @ k.transpose(-2, -1))
    torch.testing.assert_close(scaled.scores * math.sqrt(8), raw.scores)
    # without the scaling the softmax is sharper: its largest weight per row grows
    assert (raw.pattern.amax(-1) >= scaled.pattern.amax(-1) - 1e-7).all()


def test_rows_sum_to_one_and_masked_entries_are_exactly_zero():
    q, k, v = qkv(tq=6, tk=6)
    mask = causal_mask(6)
    out = scaled_dot_product_attention(q, k, v, mask)
    torch.testing.assert_close(out.pattern.sum(-1), torch.ones(2, 3, 6))
    assert (out.pattern[..., ~mask] == 0).all()
    assert torch.isneginf(out.scores[..., ~mask]).all()


def test_fully_masked_row_gives_zeros_not_nan():
    q, k, v = qkv(batch=1, heads=1, tq=3, tk=4)
    mask = torch.tensor([[True, True, False, False], [False] * 4, [True] * 4])
    out = scaled_dot_product_attention(q, k, v, mask)
    assert not torch.isnan(out.pattern).any() and not torch.isnan(out.context).any()
    assert (out.pattern[..., 1, :] == 0).all() and (out.context[..., 1, :] == 0).all()


def test_causal_mask_shape():
    assert causal_mask(3).tolist() == [[True, False, False], [True, True, False], [True, True, True]]


def test_padding_mask_marks_real_keys():
    mask = padding_mask([3, 1], max_len=4)
    assert mask.shape == (2, 1, 4)
    assert mask[:, 0].tolist() == [[True, True, True, False], [True, False, False, False]]


def test_additive_scores_match_the_formula_term_by_term():
    q, k = torch.randn(4, 5), torch.randn(6, 3)  # queries and keys of different sizes
    w_q, w_k, w_v = torch.randn(7, 5), torch.randn(7, 3), torch.randn(7)
    scores = additive_scores(q, k, w_q, w_k, w_v)
    for i in range(4):
        for j in range(6):
            expected = w_v @ torch.tanh(w_q @ q[i] + w_k @ k[j])
            assert scores[i, j].item() == pytest.approx(expected.item(), abs=1e-5)


def test_additive_attention_masks_and_normalizes():
    q, k, v = torch.randn(2, 4, 5), torch.randn(2, 6, 3), torch.randn(2, 6, 2)
    w_q, w_k, w_v = torch.randn(7, 5), torch.randn(7, 3), torch.randn(7)
    mask = padding_mask([6, 2])
    out = additive_attention(q, k, v, w_q, w_k, w_v, mask)
    torch.testing.assert_close(out.pattern.sum(-1), torch.ones(2, 4))
    assert (out.pattern[1, :, 2:] == 0).all()
    torch.testing.assert_close(out.context, out.pattern @ v)


def test_raw_self_attention_is_softmax_of_gram_matrix_times_x():
    x = torch.randn(6, 4)
    out = raw_self_attention(x)
    torch.testing.assert_close(out.pattern, torch.softmax(x @ x.T, dim=-1))
    torch.testing.assert_close(out.context, torch.softmax(x @ x.T, dim=-1) @ x)


@pytest.mark.parametrize(
    "q_shape, k_shape",
    [
        ((2, 3, 5, 8), (2, 3, 7, 8)),
        ((1, 4, 600, 16), (1, 4, 600, 16)),  # 5.8 MB of scores: written into a recycled block
        ((600, 16), (600, 16)),  # no batch dimension (the seed's raw self-attention)
        ((1, 4, 0, 16), (1, 4, 600, 16)),  # no query
        ((0, 4, 600, 16), (0, 4, 600, 16)),  # empty batch
        ((2, 3, 5, 8), (1, 3, 7, 8)),  # key broadcast over the batch
    ],
)
def test_the_scaled_product_without_gradients_equals_the_plain_one(q_shape, k_shape):
    q, k = torch.randn(q_shape), torch.randn(k_shape)
    plain = (q @ k.transpose(-2, -1)) / 4.0
    with torch.inference_mode():
        scores = query_key_products(q, k, 0.25)
    assert scores.shape == plain.shape and scores.is_contiguous()
    torch.testing.assert_close(scores, plain)


def square_attention(q, k, v, mask):
    """The whole (T, T) square, as a capture that keeps the scores computes it."""
    return scaled_dot_product_attention(q, k, v, mask, keep_scores=True)


@pytest.mark.parametrize(("length", "window", "kv_heads"), [(600, None, 4), (513, None, 2), (700, 100, 1), (257, 300, 4)])
def test_the_causal_blocks_give_the_whole_squares_numbers(length, window, kv_heads):
    """A capture that keeps no scores computes a causal self-attention a block of queries at a time,
    skipping the keys after each block: the same weights, zeros above the diagonal, the same context
    (windowed, grouped-query, lengths off the block size)."""
    from attention_viz.core import attention

    q, k, v = torch.randn(1, 4, length, 16), torch.randn(1, kv_heads, length, 16), torch.randn(1, kv_heads, length, 16)
    mask = causal_mask(length)[None, None]
    if window is not None:
        mask = mask & attention.sliding_window_mask(length, window)
    assert attention.sees_no_later_key(q, k, mask)
    whole = square_attention(q, k, v, mask)
    blocks = scaled_dot_product_attention(q, k, v, mask, keep_scores=False)
    assert blocks.scores is None
    assert (blocks.pattern - whole.pattern).abs().max() <= 1e-7
    assert torch.equal(blocks.pattern.triu(1), torch.zeros_like(blocks.pattern))
    assert (blocks.pattern.sum(-1) - 1).abs().max() <= 1e-5
    assert (blocks.context - whole.context).abs().max() <= 1e-5
    theirs = F.scaled_dot_product_attention(q, k.repeat_interleave(4 // kv_heads, 1),
                                            v.repeat_interleave(4 // kv_heads, 1), attn_mask=mask)  # fmt: skip
    assert (blocks.context - theirs).abs().max() <= 1e-5


def test_the_causal_blocks_read_bfloat16_in_float32():
    q, k, v = (torch.randn(1, 2, 400, 16, dtype=torch.bfloat16) for _ in range(3))
    mask = causal_mask(400)
    blocks = scaled_dot_product_attention(q, k, v, mask, keep_scores=False)
    whole = square_attention(q, k, v, mask)
    assert blocks.pattern.dtype == torch.float32 and blocks.context.dtype == torch.bfloat16
    assert (blocks.pattern - whole.pattern).abs().max() <= 1e-7
    assert (blocks.context.float() - whole.context.float()).abs().max() <= 1e-2


def test_masks_that_show_a_later_key_or_hide_a_whole_row_take_the_whole_square():
    from attention_viz.core.attention import sees_no_later_key

    q = k = torch.randn(2, 2, 300, 8)
    causal = causal_mask(300)
    assert sees_no_later_key(q, k, causal)
    assert not sees_no_later_key(q, k, torch.ones(300, 300, dtype=torch.bool))  # an encoder's
    padded = causal[None, None] & padding_mask([300, 200])[:, None]  # (2, 1, 300, 300): one per sequence
    assert not sees_no_later_key(q, k, padded)
    hidden_row = causal.clone()
    hidden_row[5, :] = False
    assert not sees_no_later_key(q, k, hidden_row)
    assert not sees_no_later_key(q[..., :100, :], k[..., :100, :], causal_mask(100))  # one block: no gain
    assert not sees_no_later_key(q.requires_grad_(), k, causal)
    elsewhere = torch.empty(1, 2, 300, 8, device="meta")  # another device (a GPU) keeps the whole square
    assert not sees_no_later_key(elsewhere, elsewhere, causal.to("meta"))


@pytest.mark.parametrize("kind", ["causal", "window", "padding", "none", "empty row"])
def test_the_fused_context_is_the_eager_one(kind):
    """Layers nobody looks at run PyTorch's fused kernel: the same context as our weights give, a row
    with no key to read 0s, grouped-query heads shared as the eager path shares them."""
    from attention_viz.core.attention import fused_attention, sliding_window_mask

    q, k, v = torch.randn(2, 4, 300, 16), torch.randn(2, 2, 300, 16), torch.randn(2, 2, 300, 16)
    mask = {"causal": causal_mask(300)[None, None], "window": causal_mask(300) & sliding_window_mask(300, 40),
            "padding": padding_mask([300, 120])[:, None], "none": None,
            "empty row": causal_mask(300).clone().index_fill_(0, torch.tensor([7]), False)}[kind]  # fmt: skip
    eager = scaled_dot_product_attention(q, k, v, mask)
    fused = fused_attention(q, k, v, mask)
    assert (fused - eager.context).abs().max() <= 1e-5
    if kind == "empty row":
        assert torch.equal(fused[..., 7, :], torch.zeros_like(fused[..., 7, :]))
