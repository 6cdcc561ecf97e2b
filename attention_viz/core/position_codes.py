"""The position codes the positional-encoding page draws, as numpy: the math stays in
:mod:`attention_viz.core.positional` (torch), the page gets plain arrays and never touches a tensor.
Sinusoidal and the simpler codes first, then rotary: one random query and key, rotated by position."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

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


# -- rotary (RoPE): one random query and key, rotated by position; the page shows what follows from it

ROTARY_BASE = 10000.0  # θ_i = base^(−2i/d), as in RoFormer and Llama


def query_key(d: int, draw: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A query and a key vector of ``d`` dimensions, random but fixed by ``draw`` (float64: the page
    shows exact math, so what differs is the encoding, not the rounding)."""
    generator = torch.Generator().manual_seed(draw)
    return (torch.randn(d, generator=generator, dtype=torch.float64),
            torch.randn(d, generator=generator, dtype=torch.float64))


def rotary_points(d: int, pairs: Sequence[int], n_positions: int, draw: int) -> np.ndarray:
    """``(len(pairs), n_positions, 2)``: the point (q_i, q_{i+d/2}) of the query's pair i at each
    position, a circle walked at θ_i radians per position."""
    q, _ = query_key(d, draw)
    return positional.rotary_pair_points(q, list(pairs), n_positions, ROTARY_BASE)


def wavelengths(d: int) -> np.ndarray:
    """``(d/2,)``: positions per full turn of each rotary pair, 2π/θ_i."""
    return positional.rotary_wavelengths(d, ROTARY_BASE)


def encoding_scores(d: int, n_positions: int, draw: int, learned: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Name → ``(n_positions, n_positions)`` S[m, n], the score of one query at position m and one key
    at position n under each encoding: rotary, sinusoidal added to the vectors, and (given a model's
    learned table) learned rows added, with a query and key of the table's width (same ``draw``)."""
    q, k = query_key(d, draw)
    scores = {
        "rotary": positional.rotary_scores(q, k, n_positions, ROTARY_BASE),
        "sinusoidal (added)": positional.added_position_scores(q, k, positional.sinusoidal(n_positions, d, dtype=torch.float64)),
    }
    if learned is not None:
        table = torch.as_tensor(learned[:n_positions])
        q_learned, k_learned = query_key(table.shape[1], draw)
        scores["learned (added)"] = positional.added_position_scores(q_learned, k_learned, table)
    return scores


@dataclass(frozen=True)
class SameOffset:
    """One offset m − n at several places in a sequence: rotary scores equal, added codes' do not."""

    offset: int
    key_positions: tuple[int, ...]
    rotary: np.ndarray  # (len(key_positions),) R(m)q · R(n)k
    sinusoidal: np.ndarray  # (q + PE_m) · (k + PE_n)

    @property
    def rotary_spread(self) -> float:
        return float(np.ptp(self.rotary))

    @property
    def sinusoidal_spread(self) -> float:
        return float(np.ptp(self.sinusoidal))

    def rows(self) -> list[dict]:
        return [{"query position m": n + self.offset, "key position n": n, "m − n": self.offset,
                 "rotary q·k": float(r), "sinusoidal (q+PE)·(k+PE)": float(s)}
                for n, r, s in zip(self.key_positions, self.rotary, self.sinusoidal)]


def same_offset(d: int, offset: int, draw: int, key_positions: Sequence[int] = (0, 5, 100, 1000, 10000)) -> SameOffset:
    """The same query and key at distance ``offset``, the key at each of ``key_positions``."""
    q, k = query_key(d, draw)
    n = torch.tensor(list(key_positions))
    m = n + offset
    pe = positional.sinusoidal(int(m.max()) + 1, d, dtype=torch.float64)
    rotary = positional.rotary_scores_at(q, k, m, n, ROTARY_BASE)
    sinusoidal = ((q + pe[m]) * (k + pe[n])).sum(-1).numpy()
    return SameOffset(offset, tuple(int(p) for p in key_positions), rotary, sinusoidal)


def decay_curves(max_distance: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    """For distances 0 … max_distance: RoFormer's bound on |q_m·k_n| under rotary, and the sinusoids'
    PE(0)·PE(k) (both fall, with wiggles, as tokens get farther apart)."""
    pe = positional.sinusoidal(max_distance + 1, d, dtype=torch.float64)
    return positional.rotary_decay(max_distance, d, ROTARY_BASE), (pe[0] @ pe.T).numpy()
