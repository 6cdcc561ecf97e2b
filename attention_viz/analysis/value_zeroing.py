"""Value zeroing (Mohebbi, Zuidema, Chrupała & Alishahi 2023, "Quantifying Context Mixing in
Transformers", EACL): how much token i's output of layer l changes when token j's value vectors are
zeroed in every head of that layer.

The paper's definition: with x̃_i the layer's output for token i and x̃_i^{¬j} the same output recomputed
with v_j^h = 0 for every head h (the layer's input unchanged; attention weights, output projection,
residual, layer norms and feed-forward all recomputed),

    C_ij = 1 − cos(x̃_i^{¬j}, x̃_i),

and each row is divided by its sum so that the scores of a query are shares of its total.
Zeroing a value removes what j sends through attention while keeping j's key, so the attention
weights are those of the real run; the residual still carries x_i, so C_ii says how much i draws
on its own value. The whole-model view multiplies the layers' maps with no identity added (rollout
as :func:`attention_viz.analysis.alti.rollout_maps`; the authors' released scoring code does the same).

The forwards with values zeroed run in the backends (torch); what is left here is numpy: the
cosine distances of a block of zeroed runs and the rows' normalization.
"""

from __future__ import annotations

import numpy as np

from .checks import normalize_rows

ROUNDING = 1e-12  # 1 − cos below this is float32 rounding, not an effect


def cosine_distances(output: np.ndarray, zeroed: np.ndarray) -> np.ndarray:
    """``(T, J)`` float64: 1 − cos(x̃_i^{¬j}, x̃_i) for every query i and zeroed key j of a block.

    ``output``: ``(T, d_model)`` the layer's real output; ``zeroed``: ``(J, T, d_model)``, run j of the
    block with key j's values zeroed (a run of the layer per zeroed key, batched).
    """
    x = np.asarray(output, np.float64)
    z = np.asarray(zeroed, np.float64)
    dot = np.einsum("jid,id->ij", z, x)
    norms = np.linalg.norm(z, axis=-1).T * np.linalg.norm(x, axis=-1)[:, None]  # (T, J)
    cosine = np.divide(dot, norms, out=np.ones_like(dot), where=norms > 0)
    return 1.0 - cosine


def value_zeroing_map(distances: np.ndarray, allowed: np.ndarray | None = None) -> np.ndarray:
    """``[query, key]`` float64: the paper's C, rows dividing by their sums.

    ``distances``: ``(T, T)`` 1 − cos per (query, zeroed key). ``allowed``: ``(T, T)`` boolean, where a
    query can read a key at all (a causal or windowed mask); elsewhere zeroing changes nothing and
    rounding alone would leave ~1e-8, so those cells are set to 0. Scores below ``ROUNDING`` (float32
    outputs that differ in their last bits: a relative change ~1e-6 gives 1 − cos ~ 5e-13) are 0 too, so
    a row that nothing changes stays 0 instead of becoming uniform noise.
    """
    scores = np.asarray(distances, np.float64)
    scores = np.where(scores < ROUNDING, 0.0, scores)
    if allowed is not None:
        scores = np.where(allowed, scores, 0.0)
    return normalize_rows(scores)
