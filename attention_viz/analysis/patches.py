"""Vision Transformer attention as maps over the image (Dosovitskiy et al. 2021, "An Image is Worth
16x16 Words"): the image is cut into a grid of patches, read in row-major order after one [CLS]
token, and the classifier reads only the [CLS] token's final state. So the question "where did the
model look?" is the [CLS] row of a head's pattern, over the patch keys, laid back on the grid.

A single layer's [CLS] row says little about the *pixels*, since every layer mixes the patches
again; attention rollout over layers (Abnar & Zuidema 2020, analysis.rollout) multiplies them out.
Both maps keep their raw weights: they sum to 1 minus what [CLS] kept on itself, which
``PatchAttention.cls_self`` keeps. Plain numpy, no torch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .checks import as_pattern, as_stack
from .rollout import rollout

CLS = 0  # the [CLS] token comes first; patch (r, c) is token 1 + r·cols + c


def patch_labels(rows: int, cols: int) -> list[str]:
    """Token labels of a ViT input: ``[CLS]``, then ``patch (r, c)`` row by row."""
    return ["[CLS]", *(f"patch ({r}, {c})" for r in range(rows) for c in range(cols))]


def _check_tokens(keys: int, grid: tuple[int, int]) -> None:
    rows, cols = grid
    if keys != 1 + rows * cols:
        raise ValueError(f"{keys} tokens do not make [CLS] + a {rows}×{cols} patch grid")


def cls_maps(pattern: np.ndarray, grid: tuple[int, int]) -> np.ndarray:
    """``[heads, query, key]`` of one layer → ``(heads, rows, cols)``: each head's [CLS] row over the
    patches, placed where each patch sits in the image."""
    pattern = as_pattern(pattern, 3)
    if pattern.ndim != 3 or pattern.shape[1] != pattern.shape[2]:
        raise ValueError(f"expected a [heads, tokens, tokens] self-attention pattern, got {pattern.shape}")
    _check_tokens(pattern.shape[-1], grid)
    return pattern[:, CLS, 1:].reshape(pattern.shape[0], *grid)


def rollout_cls_maps(stack: np.ndarray, grid: tuple[int, int]) -> np.ndarray:
    """``[layers, heads, query, key]`` → ``(layers, rows, cols)``: after each layer, how much of the
    [CLS] representation the rollout traces back to each input patch (heads averaged, residual
    added, as in Abnar & Zuidema)."""
    stack = as_stack(stack)
    _check_tokens(stack.shape[-1], grid)
    rolled = rollout(stack)  # (L, T, T), rows sum to 1
    return rolled[:, CLS, 1:].reshape(rolled.shape[0], *grid)


@dataclass(frozen=True)
class PatchAttention:
    """One ViT run on one image, as maps over it (what the image page draws)."""

    image: np.ndarray  # (S, S, 3) uint8: exactly the pixels the model read
    cls: np.ndarray  # (layers, heads, rows, cols): each head's [CLS] row over the patches
    cls_self: np.ndarray  # (layers, heads): what [CLS] kept on itself
    rollout: np.ndarray  # (layers, rows, cols): rollout's [CLS] row after each layer

    @property
    def grid(self) -> tuple[int, int]:
        return self.cls.shape[2], self.cls.shape[3]


def patch_attention(image: np.ndarray, stack: np.ndarray, grid: tuple[int, int]) -> PatchAttention:
    """Every map of one run: ``stack`` = the encoder's ``[layers, heads, tokens, tokens]`` patterns."""
    stack = as_stack(stack)
    rows, cols = grid
    if image.shape[0] % rows or image.shape[1] % cols:
        raise ValueError(f"a {image.shape[1]}×{image.shape[0]} image does not split into a {rows}×{cols} grid")
    return PatchAttention(
        image=image,
        cls=np.stack([cls_maps(layer, grid) for layer in stack]),
        cls_self=stack[:, :, CLS, CLS],
        rollout=rollout_cls_maps(stack, grid),
    )
