"""How far attribution patching's estimates agree with activation patching's measurements: the
Pearson correlation of the two restored-fraction grids over the sites both have (no torch)."""

from __future__ import annotations

import numpy as np

from .patching import Patching


def agreement(measured: Patching, estimated: Patching) -> float | None:
    """Pearson's r between the two results' restored fractions (same site, same grid); None where
    either is constant over the shared cells, so r is undefined."""
    if measured.site != estimated.site or measured.patched.shape != estimated.patched.shape:
        raise ValueError("the two results patch different sites")
    a, b = measured.restored.ravel(), estimated.restored.ravel()
    both = np.isfinite(a) & np.isfinite(b)
    a, b = a[both] - a[both].mean(), b[both] - b[both].mean()
    spread = float(np.sqrt((a * a).sum() * (b * b).sum()))
    return None if spread == 0.0 else float((a * b).sum() / spread)
