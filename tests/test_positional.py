"""Positional encodings: the closed form, the shift-as-rotation property, the seed's alternatives."""

import math

import torch

from attention_viz.core.positional import (
    binary_positions,
    integer_positions,
    normalized_positions,
    shift_rotation,
    sinusoidal,
)


def test_sinusoidal_matches_closed_form():
    pe = sinusoidal(50, 16)
    for pos in (0, 1, 7, 49):
        for i in range(8):
            angle = pos / 10000 ** (2 * i / 16)
            assert abs(pe[pos, 2 * i].item() - math.sin(angle)) < 1e-6
            assert abs(pe[pos, 2 * i + 1].item() - math.cos(angle)) < 1e-6


def test_shift_is_the_same_rotation_for_every_position():
    d, k = 32, 5
    pe = sinusoidal(200, d).double()
    rotation = shift_rotation(k, d).double()  # (d/2, 2, 2)
    pairs = pe.view(200, d // 2, 2)  # (pos, i, [sin, cos])
    shifted = torch.einsum("iab,pib->pia", rotation, pairs[:-k])
    assert (shifted - pairs[k:]).abs().max() < 1e-5


def test_sinusoidal_is_bounded_and_distinct():
    pe = sinusoidal(512, 64)
    assert pe.abs().max() <= 1.0
    assert len({tuple(row.tolist()) for row in pe}) == 512


def test_seed_alternatives_show_their_problems():
    # integer positions grow without bound
    assert integer_positions(100, 4)[-1, 0] == 99
    # [0, 1] positions: the step between neighbours depends on the sentence length
    assert normalized_positions(3, 2)[1, 0] == 0.5 and normalized_positions(5, 2)[1, 0] == 0.25
    # binary codes: position 5 = 101, and neighbours can differ in many dimensions at once
    codes = binary_positions(16, 4)
    assert codes[5].tolist() == [1.0, 0.0, 1.0, 0.0]
    assert (codes[8] != codes[7]).sum() == 4
