"""The head detector's scores on a text longer than the capture limit (a decoder's), from the kept queries
and keys. Every score's targets are sparse — the previous token, earlier copies of the token, the key
after a copy, the sinks, the token itself, a fixed offset — so a row's share on them needs only those
cells, exp(s_rc − lse_r) with the row's kept normalizer (s_rc = q_r · k_c / √d_k, soft-capped where the
model does), never a T × T array; a head with a sink logit (GPT-OSS) gives its rows less than 1 on the
keys, and the share is of what they have, 1 − exp(sink − lse_r), as :mod:`.detector` divides by a row's
total. The targets and counted rows are those of :mod:`.detector`'s masks (a test compares them on a
short text); where a score counts more than :data:`ROWS` rows, that many are taken evenly spaced, the
share being a mean over rows."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..runtime import progress
from .detector import SCORES, ordinary_rows
from .detector_view import OFFSET
from .blockwise import head_logits
from .long_input import LongInput

ROWS = 4096  # counted rows a score reads at most: evenly spaced over the text


@dataclass(frozen=True)
class Targets:
    """One score's counted rows and the (row, key) cells it sums: ``cell_rows`` index into ``rows``."""

    rows: np.ndarray  # (R,) query positions counted
    cell_rows: np.ndarray  # (M,) which of ``rows`` each cell belongs to
    cell_keys: np.ndarray  # (M,) the cell's key position


def _evenly(rows: np.ndarray, most: int) -> np.ndarray:
    """At most ``most`` of ``rows`` (sorted positions), evenly spaced, the first and last included."""
    if len(rows) <= most:
        return rows
    return rows[np.unique(np.linspace(0, len(rows) - 1, most).round().astype(int))]


def _fixed(rows: np.ndarray, keys: np.ndarray) -> Targets:
    """One target key per counted row (rows and keys aligned)."""
    return Targets(rows, np.arange(len(rows)), keys)


def _copies(ids: np.ndarray, special: np.ndarray) -> dict[int, np.ndarray]:
    """token id → the positions of its non-special occurrences, in order."""
    where = np.flatnonzero(~special)
    order = np.argsort(ids[where], kind="stable")
    sorted_ids, positions = ids[where][order], where[order]
    starts = np.flatnonzero(np.r_[True, sorted_ids[1:] != sorted_ids[:-1]]) if len(sorted_ids) else np.array([], int)
    ends = np.r_[starts[1:], len(sorted_ids)]
    return {int(sorted_ids[s]): positions[s:e] for s, e in zip(starts, ends, strict=True)}


def _earlier(ids: np.ndarray, special: np.ndarray, shift: int, most: int) -> Targets:
    """Rows with a non-special copy of their token at k < q − shift: the targets are k + shift
    (duplicate token: shift 0; induction: shift 1, the key after each copy)."""
    copies = _copies(ids, special)
    first = np.array([copies[int(t)][0] if int(t) in copies else len(ids) for t in ids])
    positions = np.arange(len(ids))
    rows = _evenly(np.flatnonzero(ordinary_rows(special, True) & (first < positions - shift)), most)
    cell_rows, cell_keys = [], []
    for i, q in enumerate(rows):
        same = copies[int(ids[q])]
        keys = same[: np.searchsorted(same, q - shift)] + shift  # copies k < q − shift, moved on by shift
        cell_rows.append(np.full(len(keys), i))
        cell_keys.append(keys)
    return Targets(rows, np.concatenate(cell_rows or [np.array([], int)]), np.concatenate(cell_keys or [np.array([], int)]))


def targets(name: str, ids: np.ndarray, special: np.ndarray, offset: int = 0, most: int = ROWS) -> Targets:
    """The counted rows (at most ``most``, evenly spaced) and target cells of score ``name`` (one of
    :data:`.detector.SCORES`, or ``OFFSET`` with ``offset``) on a causal text."""
    ids, special = np.asarray(ids), np.asarray(special, dtype=bool)
    n, ordinary = len(ids), ordinary_rows(special, True)
    positions = np.arange(n)
    if name == "previous_token":
        rows = _evenly(np.flatnonzero(ordinary & (positions >= 1)), most)
        return _fixed(rows, rows - 1)
    if name == "self":
        rows = _evenly(np.flatnonzero(ordinary), most)
        return _fixed(rows, rows)
    if name == OFFSET:
        rows = _evenly(np.flatnonzero(ordinary & (positions + offset >= 0) & (positions + offset < n)), most)
        return _fixed(rows, rows + offset)
    if name == "sink":
        sinks = np.flatnonzero(special) if special.any() else np.array([0])
        rows = _evenly(np.flatnonzero(ordinary), most)
        return Targets(rows, np.repeat(np.arange(len(rows)), len(sinks)), np.tile(sinks, len(rows)))
    if name == "duplicate_token":
        return _earlier(ids, special, 0, most)
    if name == "induction":
        return _earlier(ids, special, 1, most)
    raise ValueError(f"unknown score {name!r}; choose from {(*SCORES, OFFSET)}")


def long_scores(long: LongInput, offset: int, most: int = ROWS) -> dict[str, tuple[np.ndarray, int]]:
    """Score name (:data:`.detector.SCORES` and ``OFFSET``) → (Σ over counted rows of each head's share on
    the targets, [layers, heads] float64; how many rows were counted), to be tallied with the probes'."""
    ids, special = np.asarray(long.tokens.ids), np.asarray(long.tokens.special, dtype=bool)
    chosen = {name: targets(name, ids, special, offset, most) for name in (*SCORES, OFFSET)}
    sums = {name: np.zeros((long.n_layers, long.n_heads)) for name in chosen}
    read = progress.steps("scoring the heads of the long text", long.n_layers)
    for layer in range(long.n_layers):
        lse = long.kept.normalizers(layer)  # (heads, T): every head's, from the fused kernel
        for head in range(long.n_heads):
            q, k = long.kept.head(layer, head)
            logits = head_logits(long.kept, layer, head)
            for name, t in chosen.items():
                cells = long.passes.cells(q, k, lse[head], t.rows[t.cell_rows], t.cell_keys, **logits.given_lse)
                shares = np.bincount(t.cell_rows, weights=cells, minlength=len(t.rows))
                if logits.sink is not None:  # of the row's weight on keys: Σ_c P[r, c] = 1 − exp(sink − lse_r)
                    shares /= -np.expm1(logits.sink - lse[head][t.rows])
                sums[name][layer, head] = np.clip(shares, 0.0, 1.0).sum()
        read.done()
    return {name: (sums[name], len(chosen[name].rows)) for name in chosen}
