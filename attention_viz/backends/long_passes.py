"""Which blockwise passes a long input's heads are read with: numpy's when its q/k were kept on the
host (the CPU), their torch twin on the device where the model made them (a GPU)."""

from __future__ import annotations

import numpy as np
import torch

from ..analysis.long_input import NUMPY_PASSES, Passes
from ..analysis.blockwise import Overview
from ..core import blockwise_torch
from ..core.longcontext import DecoderQueriesKeys


def _overview(q: np.ndarray | torch.Tensor, k: np.ndarray | torch.Tensor, **options: object) -> Overview:
    return Overview(*blockwise_torch.overview(q, k, **options))


TORCH_PASSES = Passes(_overview, blockwise_torch.pattern_block, blockwise_torch.pooled_region,
                      blockwise_torch.rows_mixed, blockwise_torch.cells)


def passes_for(kept: DecoderQueriesKeys) -> Passes:
    """The passes that read ``kept`` where it lies."""
    return TORCH_PASSES if kept.on_device else NUMPY_PASSES
