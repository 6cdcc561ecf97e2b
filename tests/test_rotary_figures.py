"""The rotary figures of the positional page: built from the model's own rotary functions, they
show what they claim (stripes along diagonals, spread at rounding level for rotary only)."""

from __future__ import annotations

import numpy as np
import torch

from attention_viz.figures.rotary import (
    decay_figure,
    diagonal_spread,
    pair_rotation_figure,
    relative_scores_figure,
    relative_spread,
    spread_figure,
)
from attention_viz.core.positional import (
    added_position_scores,
    rotary_decay,
    rotary_pair_points,
    rotary_scores,
    rotary_wavelengths,
    sinusoidal,
)

N, D = 48, 32


def scores() -> dict[str, np.ndarray]:
    generator = torch.Generator().manual_seed(0)
    q, k = torch.randn(D, generator=generator, dtype=torch.float64), torch.randn(D, generator=generator, dtype=torch.float64)
    learned = torch.randn(N, D, generator=generator, dtype=torch.float64) * 0.5  # a stand-in learned table
    return {
        "rotary": rotary_scores(q, k, N),
        "sinusoidal (added)": added_position_scores(q, k, sinusoidal(N, D)),
        "learned (added)": added_position_scores(q, k, learned),
    }


def test_diagonal_spread_separates_rotary_from_added_codes():
    s = scores()
    assert relative_spread(s["rotary"]) < 1e-12
    assert relative_spread(s["sinusoidal (added)"]) > 0.05 and relative_spread(s["learned (added)"]) > 0.05
    toeplitz = np.array([[abs(m - n) for n in range(5)] for m in range(5)], dtype=float)
    assert np.all(diagonal_spread(toeplitz) == 0.0)


def test_pair_points_walk_circles_at_their_own_speed():
    x = torch.randn(D, dtype=torch.float64)
    points = rotary_pair_points(x, [0, D // 2 - 1], N)
    assert points.shape == (2, N, 2)
    radii = np.linalg.norm(points, axis=-1)
    assert np.allclose(radii, radii[:, :1])  # each pair keeps its length
    steps = np.linalg.norm(np.diff(points, axis=1), axis=-1).mean(axis=1)
    assert steps[0] > 10 * steps[1]  # the first pair turns fastest


def test_figures_build_with_the_data_they_were_given():
    s = scores()
    figure = relative_scores_figure(s)
    assert len(figure.data) == 3 and "spread along diagonals" in figure.layout.annotations[0].text
    assert np.array_equal(np.asarray(figure.data[0].z), s["rotary"])
    assert len(spread_figure(s).data) == 3
    x = torch.randn(D, dtype=torch.float64)
    pairs = [0, 4, 15]
    assert len(pair_rotation_figure(rotary_pair_points(x, pairs, N), pairs, rotary_wavelengths(D)[pairs]).data) == 3
    decay = rotary_decay(1000, D)
    pe = sinusoidal(1001, D).double().numpy()
    figure = decay_figure(decay, pe[0] @ pe.T)
    assert len(figure.data) == 2 and figure.data[0].y[0] == decay[1] / decay[0]
