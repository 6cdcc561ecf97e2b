"""The position codes the positional-encoding page draws, as numpy: the math stays in
:mod:`attention_viz.positional` (torch), the page gets plain arrays and never touches a tensor."""

from __future__ import annotations

import numpy as np

from . import positional


def sinusoidal_table(n_positions: int, d_model: int) -> np.ndarray:
    """``(n_positions, d_model)``: PE[pos, 2i] = sin(pos·ωᵢ), PE[pos, 2i+1] = cos(pos·ωᵢ)."""
    return positional.sinusoidal(n_positions, d_model).numpy()


def pair_rotation(k: int, d_model: int, pair: int) -> np.ndarray:
    """The 2×2 rotation that moves frequency pair ``pair`` of any position k positions on."""
    return positional.shift_rotation(k, d_model)[pair].numpy()


def simple_codes(n_positions: int, d_model: int) -> dict[str, np.ndarray]:
    """The codes that sinusoids improve on: ``integer`` (1, 2, 3 …), ``normalized`` (first 0, last
    1) and ``binary`` (the bits of the position), each ``(n_positions, d_model)``."""
    return {
        "integer": positional.integer_positions(n_positions, d_model).numpy(),
        "normalized": positional.normalized_positions(n_positions, d_model).numpy(),
        "binary": positional.binary_positions(n_positions, d_model).numpy(),
    }
