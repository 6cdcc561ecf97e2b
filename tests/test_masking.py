"""The padding-mask demonstration: padded keys get exactly 0 and padding changes nothing else."""

import numpy as np
import torch

from attention_viz.backends.padding import padded_batch
from attention_viz.core.model import Transformer, TransformerConfig


def test_padded_batch_masks_padding_and_matches_single_runs():
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(shape="encoder-decoder", vocab_size=30, d_model=16, h=2, d_ff=32, N=2,
                                          dropout=0.0)).eval()
    batch = padded_batch(model, [[5, 6, 7, 8, 9, 10], [11, 12, 13]], layer=1, pad_id=0)
    assert batch.real.tolist() == [[True] * 6, [True] * 3 + [False] * 3]
    assert batch.patterns.shape == (2, 2, 6, 6)
    assert (batch.patterns[1][..., 3:] == 0).all() and (batch.patterns[0] > 0).all()
    np.testing.assert_allclose(batch.patterns[1][:, :3, :3], batch.alone[1], atol=1e-6)
    np.testing.assert_allclose(batch.patterns[0], batch.alone[0], atol=1e-6)
