"""Positional encodings: the paper's sinusoids, learned embeddings, and the naive alternatives one
tries before arriving at sinusoids (integer positions, positions normalized to
[0, 1], binary codes). Each returns a ``(positions, d_model)`` matrix that is added to the token
embeddings.

Why sinusoids (Vaswani et al. 2017, section 3.5): a position code should be bounded, identical for the same position in
sentences of different lengths, smooth, and defined for lengths never seen in training. Integer
positions are unbounded; [0, 1] positions change meaning with sentence length; binary codes jump.

Rotary position embedding (RoPE, used by Llama, Qwen2, Mistral, GPT-NeoX) is not added to the
embeddings: :class:`RotaryEmbedding` rotates the queries and keys inside every attention.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

import numpy as np
import torch
from torch import nn


def frequencies(d_model: int, base: float = 10000.0) -> torch.Tensor:
    """ω_i = 1 / base^(2i / d_model) for i = 0 .. d_model/2 - 1 (one per sine/cosine pair)."""
    return torch.exp(torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(base) / d_model))


def sinusoidal(n_positions: int, d_model: int, base: float = 10000.0, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """PE[pos, 2i] = sin(pos·ω_i), PE[pos, 2i+1] = cos(pos·ω_i)  (Vaswani et al. 2017, §3.5).

    Computed in float64 then cast to ``dtype``, so large positions keep their precision.
    """
    if d_model % 2:
        raise ValueError(f"sinusoidal encoding needs an even d_model, got {d_model}")
    angles = torch.arange(n_positions, dtype=torch.float64).unsqueeze(1) * frequencies(d_model, base)
    pe = torch.empty(n_positions, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles)
    return pe.to(dtype)


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


# ---------------------------------------------------------------- rotary position embedding
#
# RoPE (Su et al. 2021, "RoFormer"): instead of adding a code to the embeddings, every query and key
# is *rotated* by an angle proportional to its position, one 2-D rotation per pair of dimensions and
# per frequency θ_i. Since R(m)ᵀ R(n) = R(n − m), the dot product q_m · k_n depends on the content
# and on m − n only. Layout as GPT-NeoX and Llama ("rotate half"): pair i is dimensions (i, i + d/2)
# of the rotated part, not (2i, 2i + 1) as in the paper; checkpoints of both families expect it.
# Partial rotary (GPT-NeoX ``rotary_pct``): only the first ``d_rot`` dimensions of each head turn,
# the rest pass through unchanged.


def rotary_dims(d_k: int, fraction: float = 1.0) -> int:
    """How many dimensions of a ``d_k`` head rotate: int(d_k · fraction), as GPT-NeoX rounds it."""
    d_rot = int(d_k * fraction)
    if d_rot % 2 or not 0 < d_rot <= d_k:
        raise ValueError(f"rotary needs an even number of rotated dimensions in (0, {d_k}], got {d_rot}")
    return d_rot


@dataclass(frozen=True)
class RotaryScaling:
    """How a long-context checkpoint rescales its rotary frequencies θ_i (no rescaling: None).

    ``linear`` (position interpolation, Chen et al. 2023): every θ_i divided by ``factor``.
    ``llama3`` (Meta's Llama 3.1 reference, ``apply_scaling``): by wavelength λ_i = 2π/θ_i against
    the pretraining length L = ``original_max_len``: λ_i < L / high_freq_factor (fast pairs, which
    turn many times within L) keep θ_i; λ_i > L / low_freq_factor (slow pairs, not one turn within L)
    take θ_i / factor; in between, s = (L/λ_i − low_freq_factor) / (high_freq_factor − low_freq_factor)
    blends the two, (1 − s) θ_i / factor + s θ_i.
    """

    rope_type: Literal["linear", "llama3"]
    factor: float
    low_freq_factor: float = 1.0  # llama3 only
    high_freq_factor: float = 4.0  # llama3 only
    original_max_len: int = 8192  # llama3 only: L, the context length of pretraining

    def __post_init__(self) -> None:
        if self.rope_type not in ("linear", "llama3"):
            raise ValueError(f"rotary scaling must be 'linear' or 'llama3', got {self.rope_type!r}")
        if not self.factor > 0:
            raise ValueError(f"rotary scaling factor must be positive, got {self.factor}")
        if self.rope_type == "llama3" and not 0 < self.low_freq_factor < self.high_freq_factor:
            raise ValueError("llama3 rotary scaling needs 0 < low_freq_factor < high_freq_factor, got "
                             f"{self.low_freq_factor} and {self.high_freq_factor}")
        if self.original_max_len < 1:
            raise ValueError(f"original_max_len must be positive, got {self.original_max_len}")


def inverse_frequencies(
    d_rot: int, base: float = 10000.0, scaling: RotaryScaling | None = None, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """(d_rot/2,) θ_i = base^(−2i/d_rot), rescaled as ``scaling`` says, computed in ``dtype`` with
    the operations in the reference code's order (the checkpoints were trained with its rounding)."""
    theta = 1.0 / base ** (torch.arange(0, d_rot, 2, dtype=torch.int64).to(dtype) / d_rot)
    if scaling is None:
        return theta
    if scaling.rope_type == "linear":
        return theta / scaling.factor
    low, high, length = scaling.low_freq_factor, scaling.high_freq_factor, scaling.original_max_len
    wavelength = 2 * math.pi / theta
    slow = torch.where(wavelength > length / low, theta / scaling.factor, theta)
    smooth = (length / wavelength - low) / (high - low)
    blended = (1 - smooth) * slow / scaling.factor + smooth * slow
    between = (wavelength >= length / high) & (wavelength <= length / low)
    return torch.where(between, blended, slow)


def rotary_angles(
    positions: torch.Tensor,
    d_rot: int,
    base: float = 10000.0,
    dtype: torch.dtype = torch.float32,
    scaling: RotaryScaling | None = None,
) -> torch.Tensor:
    """(T, d_rot/2) angles m·θ_i with θ_i = base^(−2i/d_rot) (rescaled as ``scaling`` says).

    The model uses float32, θ_i and the product both rounded as the reference Llama and GPT-NeoX
    code rounds them: that is what the checkpoints were trained with (at 32k positions it is
    ~1e-3 rad off the exact angle, and the weights expect exactly that). The teaching functions
    below pass float64 to show the exact math.
    """
    theta = inverse_frequencies(d_rot, base, scaling, dtype)
    return positions.to(dtype).unsqueeze(-1) * theta.to(positions.device)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate pair i = (x_i, x_{i+d_rot/2}) of every position by its angle; dims ≥ d_rot pass.

    x (..., T, d_k), cos/sin (T, d_rot/2) in x's dtype. (x₁, x₂) ↦ (x₁ cos − x₂ sin, x₂ cos + x₁ sin).
    """
    half = cos.size(-1)
    x1, x2, rest = x[..., :half], x[..., half : 2 * half], x[..., 2 * half :]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin, rest), dim=-1)


@lru_cache(maxsize=4)
def rotary_cos_sin(
    length: int, d_rot: int, base: float, dtype: torch.dtype, device: torch.device,
    scaling: RotaryScaling | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of the angles of positions 0 … length − 1, (length, d_rot/2) in ``dtype``, made once
    and shared (never modified): every layer of a forward asks for the same ones, and so does each
    layer a long input runs later (32k positions: 7–15 ms a call here). Four entries: at 32k
    positions of a d_k = 128 head, 16 MB each. Made outside inference mode, which would make
    tensors that a later forward with gradients (training) could not save for its backward."""
    with torch.inference_mode(False):
        angles = rotary_angles(torch.arange(length, device=device), d_rot, base, scaling=scaling)
        return angles.cos().to(dtype), angles.sin().to(dtype)


class RotaryEmbedding(nn.Module):
    """Rotates queries and keys by position inside each attention (no parameters, no table of
    max_len kept: the angles of the T positions in use come from :func:`rotary_cos_sin`, so any
    length up to max_len works)."""

    def __init__(
        self, d_k: int, fraction: float = 1.0, base: float = 10000.0, scaling: RotaryScaling | None = None
    ) -> None:
        super().__init__()
        self.d_rot = rotary_dims(d_k, fraction)
        self.base = base
        self.scaling = scaling

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """q (B, h, T, d_k), k (B, h_kv, T, d_k) at positions 0..T−1 → both rotated."""
        cos, sin = rotary_cos_sin(q.size(-2), self.d_rot, self.base, q.dtype, q.device, self.scaling)  # (T, d_rot/2) each
        return apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)

    def extra_repr(self) -> str:
        scaled = "" if self.scaling is None else f", scaling={self.scaling}"
        return f"d_rot={self.d_rot}, base={self.base:g}{scaled}"


# -- what the positional page shows about rotary (tensors in the model's own functions, numpy out)


def rotate_at(x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """One vector x (d,) rotated as it would be at each of ``positions``: (len(positions), d)."""
    angles = rotary_angles(positions, x.numel(), base, torch.float64)
    return apply_rotary(x.to(torch.float64).expand(len(positions), -1), angles.cos(), angles.sin())


def rotary_pair_points(x: torch.Tensor, pairs: list[int], n_positions: int, base: float = 10000.0) -> np.ndarray:
    """(len(pairs), n_positions, 2): the point (x_i, x_{i+d/2}) of pair i of vector x (d,) at each
    position: a circle walked at angular speed θ_i."""
    rotated = rotate_at(x, torch.arange(n_positions), base)  # (n, d)
    half = x.numel() // 2
    return torch.stack([rotated[:, [i, i + half]] for i in pairs]).numpy()


def rotary_scores(q: torch.Tensor, k: torch.Tensor, n_positions: int, base: float = 10000.0) -> np.ndarray:
    """S[m, n] = R(m)q · R(n)k for one query and one key vector at every pair of positions.

    The matrix is constant along each diagonal (m − n fixed) up to rounding: rotary scores depend on
    the distance, never on where the pair sits.
    """
    positions = torch.arange(n_positions)
    return (rotate_at(q, positions, base) @ rotate_at(k, positions, base).T).numpy()


def rotary_scores_at(
    q: torch.Tensor, k: torch.Tensor, query_positions: torch.Tensor, key_positions: torch.Tensor,
    base: float = 10000.0,
) -> np.ndarray:
    """R(m)q · R(n)k for the pairs (m, n) = (query_positions[j], key_positions[j]): any positions,
    without the full matrix (the page compares the same offset at position 5 and at 10,000)."""
    return (rotate_at(q, query_positions, base) * rotate_at(k, key_positions, base)).sum(-1).numpy()


def added_position_scores(q: torch.Tensor, k: torch.Tensor, table: torch.Tensor) -> np.ndarray:
    """S[m, n] = (q + P_m) · (k + P_n): the same two vectors with an additive code (sinusoidal or
    learned rows P). The cross terms q·P_n + P_m·k depend on m and n themselves, not on m − n."""
    p = table.to(torch.float64)
    return ((q.to(torch.float64) + p) @ (k.to(torch.float64) + p).T).numpy()


def rotary_decay(max_distance: int, d: int, base: float = 10000.0) -> np.ndarray:
    """RoFormer's long-term decay (§3.4.3): the bound (1/(d/2)) Σ_j |S_j| on |q_m · k_n| for
    distances 0..max_distance, with S_j = Σ_{i<j} e^{i(m−n)θ_i}. It shrinks (with wiggles) as tokens
    get farther apart: distant pairs can score less."""
    distance = torch.arange(max_distance + 1, dtype=torch.float64).unsqueeze(1)
    angles = distance * frequencies(d, base)  # (distances, d/2)
    partial_sums = torch.polar(torch.ones_like(angles), angles).cumsum(dim=1)  # S_1 .. S_{d/2}
    return (partial_sums.abs().mean(dim=1)).numpy()


def rotary_wavelengths(d: int, base: float = 10000.0) -> np.ndarray:
    """2π/θ_i: how many positions pair i needs for one full turn (from 2π up to ~2π·base)."""
    return (2 * math.pi / frequencies(d, base)).numpy()
