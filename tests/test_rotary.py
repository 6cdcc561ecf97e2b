"""The math of the modern decoder: rotary position embedding (full and partial), grouped- and
multi-query attention, the sliding-window causal mask, and a rotary GQA model's invariants."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from attention_viz.core.attention import (
    causal_mask,
    kv_groups,
    repeat_kv,
    scaled_dot_product_attention,
    sliding_window_mask,
)
from attention_viz.core.hooks import capture
from attention_viz.core.model import Transformer, TransformerConfig
from attention_viz.core.positional import (
    RotaryEmbedding,
    added_position_scores,
    apply_rotary,
    rotary_angles,
    rotary_decay,
    rotary_dims,
    rotary_scores,
    rotary_wavelengths,
    rotate_at,
    sinusoidal,
)

torch.manual_seed(0)


# ---------------------------------------------------------------- rotary


def test_rotation_keeps_norms_and_position_zero_is_the_identity():
    x = torch.randn(2, 3, 10, 16)
    q, k = RotaryEmbedding(16)(x, x)
    assert torch.allclose(q.norm(dim=-1), x.norm(dim=-1), atol=1e-5)  # rotations preserve length
    assert torch.equal(q[..., 0, :], x[..., 0, :])  # angle 0 at position 0
    assert not torch.allclose(q[..., 1:, :], x[..., 1:, :])


def test_pairs_are_dimensions_i_and_i_plus_half_rotated_by_m_theta_i():
    d, m, base = 8, 5, 100.0
    x = torch.randn(d, dtype=torch.float64)
    xs = x.tolist()
    rotated = rotate_at(x, torch.tensor([m]), base)[0]
    for i in range(d // 2):
        angle = m * base ** (-2 * i / d)
        c, s = math.cos(angle), math.sin(angle)
        expected = (xs[i] * c - xs[i + d // 2] * s, xs[i + d // 2] * c + xs[i] * s)
        assert rotated[i].item() == pytest.approx(expected[0], abs=1e-12)
        assert rotated[i + d // 2].item() == pytest.approx(expected[1], abs=1e-12)


def test_q_m_dot_k_n_depends_only_on_m_minus_n():
    q, k = torch.randn(32, dtype=torch.float64), torch.randn(32, dtype=torch.float64)
    scores = rotary_scores(q, k, 60)
    for offset in range(-59, 60):
        diagonal = np.diagonal(scores, offset=-offset)  # entries with m − n = offset
        assert np.ptp(diagonal) <= 1e-9 * max(1.0, np.abs(diagonal).max())
    # and it does depend on the distance
    assert np.ptp([scores[m, 0] for m in range(60)]) > 1.0


def test_an_added_code_depends_on_absolute_positions():
    q, k = torch.randn(32, dtype=torch.float64), torch.randn(32, dtype=torch.float64)
    scores = added_position_scores(q, k, sinusoidal(60, 32).double())
    spreads = [np.ptp(np.diagonal(scores, offset=-o)) for o in range(0, 50)]
    assert max(spreads) > 1.0  # the same distance scores differently at different places


def test_partial_rotary_leaves_the_other_dimensions_alone():
    rotary = RotaryEmbedding(16, fraction=0.25)
    assert rotary.d_rot == 4
    x = torch.randn(1, 2, 7, 16)
    q, _ = rotary(x, x)
    assert torch.equal(q[..., 4:], x[..., 4:])
    assert not torch.allclose(q[..., 1:, :4], x[..., 1:, :4])


def test_rotary_dims_refuses_an_odd_or_empty_rotation():
    assert rotary_dims(64, 0.25) == 16
    for d_k, fraction in ((10, 0.3), (8, 0.0), (8, 1.5)):
        with pytest.raises(ValueError):
            rotary_dims(d_k, fraction)


def test_float32_angles_are_the_reference_rounding_and_close_to_exact():
    positions = torch.arange(0, 32768, 997)
    angles32 = rotary_angles(positions, 64, 10000.0)
    angles64 = rotary_angles(positions, 64, 10000.0, torch.float64)
    assert angles32.dtype == torch.float32 and angles64.dtype == torch.float64
    assert (angles32.double() - angles64).abs().max() < 1e-2
    # the highest frequency turns one radian per position
    assert torch.equal(angles64[:, 0], positions.double())


def test_apply_rotary_equals_the_complex_multiplication_of_the_paper():
    d, n = 16, 12
    x = torch.randn(n, d, dtype=torch.float64)
    angles = rotary_angles(torch.arange(n), d, 10000.0, torch.float64)
    ours = apply_rotary(x, angles.cos(), angles.sin())
    as_complex = torch.complex(x[:, : d // 2], x[:, d // 2 :]) * torch.polar(torch.ones_like(angles), angles)
    assert torch.allclose(ours, torch.cat([as_complex.real, as_complex.imag], dim=-1), atol=1e-12)


def test_decay_bound_falls_with_distance():
    decay = rotary_decay(4096, 128)
    assert decay[0] == pytest.approx(np.mean(np.arange(1, 65)))  # all phases aligned: |S_j| = j
    assert decay[[1, 16, 256, 2048]].tolist() == sorted(decay[[1, 16, 256, 2048]].tolist(), reverse=True)
    assert decay[1000:].mean() < 0.2 * decay[0] and decay[1000:].max() < 0.5 * decay[0]


def test_wavelengths_run_from_2pi_to_about_2pi_base():
    lengths = rotary_wavelengths(64, 10000.0)
    assert lengths[0] == pytest.approx(2 * math.pi)
    assert np.all(np.diff(lengths) > 0) and lengths[-1] < 2 * math.pi * 10000.0


# ---------------------------------------------------------------- grouped-query attention


def test_gqa_equals_mha_with_each_kv_head_repeated_for_its_group():
    q = torch.randn(2, 8, 6, 4)
    k, v = torch.randn(2, 2, 6, 4), torch.randn(2, 2, 6, 4)
    mask = causal_mask(6)
    grouped = scaled_dot_product_attention(q, k, v, mask)
    for head in range(8):  # query head i reads K/V head i // 4
        single = scaled_dot_product_attention(q[:, head], k[:, head // 4], v[:, head // 4], mask)
        assert torch.allclose(grouped.pattern[:, head], single.pattern, atol=1e-7)
        assert torch.allclose(grouped.context[:, head], single.context, atol=1e-7)


def test_repeat_kv_orders_heads_by_group():
    kv = torch.arange(3.0).view(1, 3, 1, 1)
    assert repeat_kv(kv, 2).flatten().tolist() == [0, 0, 1, 1, 2, 2]
    assert repeat_kv(kv, 1) is kv
    assert kv_groups(8, 1) == 8 and kv_groups(8, 8) == 1
    with pytest.raises(ValueError):
        kv_groups(8, 3)


@pytest.mark.parametrize("kv_heads", [1, 2, 8])
def test_gqa_and_mqa_equal_torch_sdpa_enable_gqa(kv_heads):
    q = torch.randn(2, 8, 10, 16)
    k, v = torch.randn(2, kv_heads, 10, 16), torch.randn(2, kv_heads, 10, 16)
    ours = scaled_dot_product_attention(q, k, v, causal_mask(10))
    theirs = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    assert (ours.context - theirs).abs().max() <= 1e-6


# ---------------------------------------------------------------- sliding window


def test_sliding_window_mask_keeps_the_last_w_positions_including_itself():
    mask = sliding_window_mask(7, 3)
    for i in range(7):
        assert mask[i].nonzero().flatten().tolist() == list(range(max(0, i - 2), i + 1))
    assert torch.equal(sliding_window_mask(7, 7), causal_mask(7))
    assert torch.equal(sliding_window_mask(7, 100), causal_mask(7))
    with pytest.raises(ValueError):
        sliding_window_mask(5, 0)


def test_sliding_window_attention_equals_torch_sdpa_with_the_same_mask():
    q, k, v = torch.randn(1, 4, 12, 8), torch.randn(1, 2, 12, 8), torch.randn(1, 2, 12, 8)
    mask = sliding_window_mask(12, 4)
    ours = scaled_dot_product_attention(q, k, v, mask)
    theirs = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
    assert (ours.context - theirs).abs().max() <= 1e-6
    assert torch.all(ours.pattern[..., ~mask] == 0.0)


# ---------------------------------------------------------------- a Llama-style model's invariants

LLAMA_STYLE = dict(
    shape="decoder-only", vocab_size=50, d_model=32, h=4, n_kv_heads=2, d_ff=48, N=2, max_len=64,
    positional="rotary", norm="pre", norm_type="rms", activation="silu", gated_ffn=True, dropout=0.0,
    scale_embeddings=False, qkv_bias=False, out_bias=False, ffn_bias=False, generator_bias=False, sliding_window=5,
    full_attention_layers=(0,),
)  # fmt: skip


@pytest.fixture(scope="module")
def llama_style():
    torch.manual_seed(0)
    return Transformer(TransformerConfig(**LLAMA_STYLE)).eval()


def test_llama_style_patterns_are_causal_distributions(llama_style):
    ids = torch.randint(0, 50, (1, 20))
    with torch.inference_mode(), capture(kinds=None) as recorded:
        llama_style(ids)
    for layer in range(2):
        pattern = recorded[f"decoder.layers.{layer}.self_attn.pattern"][0]  # (h, T, T)
        assert torch.allclose(pattern.sum(-1), torch.ones(4, 20), atol=1e-6)
        assert torch.all(pattern.triu(1) == 0.0)  # causal upper triangle exactly 0
        assert recorded[f"decoder.layers.{layer}.self_attn.k"].shape == (1, 2, 20, 8)
    windowed = recorded["decoder.layers.1.self_attn.pattern"][0]
    assert torch.all(windowed.tril(-5) == 0.0)  # layer 1: only the last 5 positions
    assert windowed.tril(-5).sum() == 0 and recorded["decoder.layers.0.self_attn.pattern"][0].tril(-5).sum() > 0


def test_a_future_token_changes_nothing_before_it(llama_style):
    ids = torch.randint(0, 50, (1, 12))
    changed = ids.clone()
    changed[0, 8] = (ids[0, 8] + 1) % 50
    with torch.inference_mode(), capture() as first:
        before = llama_style(ids)
    with torch.inference_mode(), capture() as second:
        after = llama_style(changed)
    assert torch.equal(before[0, :8], after[0, :8])
    for layer in range(2):
        name = f"decoder.layers.{layer}.self_attn.pattern"
        assert torch.equal(first[name][..., :8, :], second[name][..., :8, :])
        assert not torch.equal(first[name][..., 8:, :], second[name][..., 8:, :])


def test_q_and_k_hooks_are_rotated_and_give_the_scores(llama_style):
    ids = torch.randint(0, 50, (1, 9))
    with torch.inference_mode(), capture(kinds=None) as recorded:
        llama_style(ids)
    q = recorded["decoder.layers.0.self_attn.q"][0]  # (4, 9, 8)
    k = repeat_kv(recorded["decoder.layers.0.self_attn.k"], 2)[0]
    scores = recorded["decoder.layers.0.self_attn.scores"][0]
    by_hand = (q @ k.transpose(-1, -2) / math.sqrt(8)).masked_fill(~causal_mask(9), float("-inf"))
    assert torch.allclose(scores, by_hand, atol=1e-5)


def test_rotary_config_validation():
    with pytest.raises(ValueError, match="multiple of n_kv_heads"):
        TransformerConfig(**{**LLAMA_STYLE, "n_kv_heads": 3})
    with pytest.raises(ValueError, match="even number of rotated"):
        TransformerConfig(**{**LLAMA_STYLE, "rotary_pct": 0.1})
    with pytest.raises(ValueError, match="parallel_residual"):
        TransformerConfig(**{**LLAMA_STYLE, "norm": "post", "parallel_residual": True})
    assert TransformerConfig(**{**LLAMA_STYLE, "head_dim": 12}).d_k == 12
