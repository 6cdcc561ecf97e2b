"""The padding mask at work: a batch of sentences of different lengths through our Transformer's
encoder, right-padded, with the padded keys masked (padding must take no part in attention)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ..core.hooks import capture
from ..core.model import Transformer
from ..core.names import ENCODER_SELF, hook_name


@dataclass(frozen=True)
class PaddedBatch:
    ids: np.ndarray  # [B, T] with pad ids after each sentence
    real: np.ndarray  # [B, T] True for real tokens: the padding mask over keys
    patterns: np.ndarray  # [B, heads, T, T] encoder self-attention of ``layer``
    alone: list[np.ndarray]  # each sentence run on its own, unpadded: [heads, n_b, n_b]


def padded_batch(model: Transformer, sentences: Sequence[Sequence[int]], layer: int, pad_id: int) -> PaddedBatch:
    """Run the sentences as one right-padded batch, and each alone for comparison."""
    length = max(len(s) for s in sentences)
    ids = torch.full((len(sentences), length), pad_id, dtype=torch.long)
    real = torch.zeros((len(sentences), length), dtype=torch.bool)  # from the lengths: a real token may share the pad id
    for row, sentence in enumerate(sentences):
        ids[row, : len(sentence)] = torch.tensor(list(sentence))
        real[row, : len(sentence)] = True
    name = hook_name(ENCODER_SELF, layer, "pattern")
    device = next(model.parameters()).device  # the model's; what comes back is numpy
    with torch.inference_mode():
        with capture(names=[name]) as batch:
            model.encode(ids.to(device), real.to(device))
        alone = []
        for sentence in sentences:
            with capture(names=[name]) as single:
                model.encode(torch.tensor([list(sentence)], device=device))
            alone.append(single[name][0].cpu().numpy())
    return PaddedBatch(ids.numpy(), real.numpy(), batch[name].cpu().numpy(), alone)
