"""Positional encodings: the paper's sinusoids, learned embeddings, and the naive alternatives the
seed walks through before arriving at sinusoids (integer positions, positions normalized to
[0, 1], binary codes). Each returns a ``(positions, d_model)`` matrix that is added to the token
embeddings.

Why sinusoids (seed 004): a position code should be bounded, identical for the same position in
sentences of different lengths, smooth, and defined for lengths never seen in training. Integer
positions are unbounded; [0, 1] positions change meaning with sentence length; binary codes jump.
"""

from __future__ import annotations

import math

import torch
from torch import nn


def frequencies(d_model: int, base: float = 10000.0) -> torch.Tensor:
    """ω_i = 1 / base^(2i / d_model) for i = 0 .. d_model/2 - 1 (one per sine/cosine pair)."""
    return torch.exp(torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(base) / d_model))


def sinusoidal(n_positions: int, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """PE[pos, 2i] = sin(pos·ω_i), PE[pos, 2i+1] = cos(pos·ω_i)  (Vaswani et al. 2017, §3.5).

    Computed in float64 then cast, so large positions keep their precision.
    """
    if d_model % 2:
        raise ValueError(f"sinusoidal encoding needs an even d_model, got {d_model}")
    angles = torch.arange(n_positions, dtype=torch.float64).unsqueeze(1) * frequencies(d_model, base)
    pe = torch.empty(n_positions, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles)
    return pe.float()


def shift_rotation(k: int, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """The (d_model/2, 2, 2) rotations R_i(k) with [PE(pos+k)_2i, PE(pos+k)_2i+1] = R_i(k) · [PE(pos)_2i,
    PE(pos)_2i+1] for *every* pos: a fixed offset is a linear map, which is why attention can learn
    relative positions from these codes."""
    angle = k * frequencies(d_model, base)
    cos, sin = torch.cos(angle), torch.sin(angle)
    return torch.stack([torch.stack([cos, sin], -1), torch.stack([-sin, cos], -1)], -2).float()


def integer_positions(n_positions: int, d_model: int) -> torch.Tensor:
    """Position t written as the number t in every dimension: unbounded as sentences grow."""
    return torch.arange(n_positions, dtype=torch.float32).unsqueeze(1).expand(n_positions, d_model).clone()


def normalized_positions(n_positions: int, d_model: int) -> torch.Tensor:
    """Position t as t / (n - 1) in [0, 1]: the step between neighbours depends on the length."""
    steps = torch.linspace(0.0, 1.0, n_positions) if n_positions > 1 else torch.zeros(1)
    return steps.unsqueeze(1).expand(n_positions, d_model).clone()


def binary_positions(n_positions: int, d_model: int) -> torch.Tensor:
    """Position t as its binary digits (lowest bit in dimension 0): bounded but discontinuous."""
    bits = torch.arange(d_model)
    return ((torch.arange(n_positions).unsqueeze(1) >> bits) & 1).float()


class SinusoidalEncoding(nn.Module):
    """Fixed sinusoidal table, stored as a buffer (it is not trained)."""

    def __init__(self, max_len: int, d_model: int) -> None:
        super().__init__()
        self.register_buffer("pe", sinusoidal(max_len, d_model), persistent=False)

    def forward(self, positions: torch.Tensor) -> torch.Tensor:
        return self.pe[positions]


class LearnedEncoding(nn.Module):
    """One trained vector per position, as in BERT and GPT-2."""

    def __init__(self, max_len: int, d_model: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(max_len, d_model))
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, positions: torch.Tensor) -> torch.Tensor:
        return self.weight[positions]
