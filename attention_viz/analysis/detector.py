"""Head detector: how much of each head's attention goes where a known mechanism would put it,
averaged over many inputs (a probe set plus the user's text), not read off one sentence.

Every score is defined by a target mask M (query q → the keys the mechanism would attend to) and
the query rows it applies to; a row's score is the share of its attention on its targets,
Σ_k α_qk M_qk / Σ_k α_qk, so it lies in [0, 1]. A head's score is the mean over all counted rows
of all inputs. Special tokens' own rows ([CLS], [SEP], <bos>) are never counted, nor rows that
see a single key (the first row of a causal model, which has no choice).

* ``previous_token`` — k = q − 1.
* ``duplicate_token`` — earlier positions holding the same token as q (rows with such a copy).
* ``induction`` — the position *after* an earlier copy of q's token, k + 1 with t_k = t_q, k + 1 < q
  (Olsson et al. 2022: "[A][B] … [A] → [B]"); rows with such a copy.
* ``sink`` — the special tokens ([CLS]/[SEP]); the first token when there are none (GPT-2 style).
* ``self`` — k = q.
* ``offset_d`` (:func:`offset_mask`) — k = q + d, for a fixed relative offset d.
* a user pattern (:func:`pairs_mask`) — the query → key pairs the user marked, on the user's text.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import numpy as np

from ..core.names import Group
from ..runtime import progress
from ..core.result import AttentionResult
from .checks import as_stack

# (ids, special, causal) → (targets (T, T) bool, counted rows (T,) bool)
Mask = Callable[[np.ndarray, np.ndarray, bool], tuple[np.ndarray, np.ndarray]]
SCORES = ("previous_token", "duplicate_token", "induction", "sink", "self")


def ordinary_rows(special: np.ndarray, causal: bool) -> np.ndarray:
    """The rows a score may count: not a special token's, nor a causal model's first (it has no choice)."""
    rows = ~special
    if causal:
        rows[:1] = False  # row 0 sees only itself
    return rows


def previous_token_mask(ids: np.ndarray, special: np.ndarray, causal: bool) -> tuple[np.ndarray, np.ndarray]:
    n = len(ids)
    return np.eye(n, k=-1, dtype=bool), ordinary_rows(special, causal) & (np.arange(n) >= 1)


def self_mask(ids: np.ndarray, special: np.ndarray, causal: bool) -> tuple[np.ndarray, np.ndarray]:
    return np.eye(len(ids), dtype=bool), ordinary_rows(special, causal)


def duplicate_token_mask(ids: np.ndarray, special: np.ndarray, causal: bool) -> tuple[np.ndarray, np.ndarray]:
    n = len(ids)
    same = (ids[:, None] == ids[None, :]) & ~special[None, :]
    targets = same & np.tri(n, k=-1, dtype=bool)  # k < q
    return targets, ordinary_rows(special, causal) & targets.any(axis=1)


def induction_mask(ids: np.ndarray, special: np.ndarray, causal: bool) -> tuple[np.ndarray, np.ndarray]:
    n = len(ids)
    copies = duplicate_token_mask(ids, special, causal)[0]  # [q, k]: t_k = t_q, k < q
    targets = np.zeros((n, n), dtype=bool)
    targets[:, 1:] = copies[:, :-1]  # the key after each copy
    targets &= np.tri(n, k=-1, dtype=bool)  # k + 1 < q (k + 1 = q would be the row itself)
    return targets, ordinary_rows(special, causal) & targets.any(axis=1)


def sink_mask(ids: np.ndarray, special: np.ndarray, causal: bool) -> tuple[np.ndarray, np.ndarray]:
    n = len(ids)
    sinks = special.copy() if special.any() else np.arange(n) == 0
    return np.broadcast_to(sinks, (n, n)).copy(), ordinary_rows(special, causal)


def offset_mask(offset: int) -> Mask:
    """Targets k = q + ``offset``; rows where that key exists."""

    def mask(ids: np.ndarray, special: np.ndarray, causal: bool) -> tuple[np.ndarray, np.ndarray]:
        n = len(ids)
        targets = np.eye(n, k=offset, dtype=bool)
        return targets, ordinary_rows(special, causal) & targets.any(axis=1)

    return mask


def pairs_mask(pairs: Iterable[tuple[int, int]]) -> Mask:
    """The user's marked (query, key) pairs; rows = the marked queries (special ones included: the
    user chose them)."""
    marked = [(int(q), int(k)) for q, k in pairs]

    def mask(ids: np.ndarray, special: np.ndarray, causal: bool) -> tuple[np.ndarray, np.ndarray]:
        n = len(ids)
        targets = np.zeros((n, n), dtype=bool)
        for q, k in marked:
            if not (0 <= q < n and 0 <= k < n):
                raise IndexError(f"pair ({q}, {k}) is outside the {n} tokens")
            targets[q, k] = True
        return targets, targets.any(axis=1)

    return mask


MASKS: dict[str, Mask] = {
    "previous_token": previous_token_mask,
    "duplicate_token": duplicate_token_mask,
    "induction": induction_mask,
    "sink": sink_mask,
    "self": self_mask,
}


class Tally:
    """Running sums of row scores per (layer, head) for each score, over many inputs."""

    def __init__(self, masks: dict[str, Mask]) -> None:
        self.masks = masks
        self.sums: dict[str, np.ndarray] = {}
        self.counts: dict[str, int] = dict.fromkeys(masks, 0)

    def add(self, stack: np.ndarray, ids: Sequence[int], special: Sequence[bool]) -> None:
        """One input: its pattern stack ``[layers, heads, T, T]`` with its token ids and special flags."""
        P = as_stack(stack).astype(np.float64)
        ids_a, special_a = np.asarray(ids), np.asarray(special, dtype=bool)
        if len(ids_a) != P.shape[-1] or len(special_a) != P.shape[-1]:
            raise ValueError(f"{len(ids_a)} token ids for a pattern over {P.shape[-1]} tokens")
        causal = not np.triu(P, 1).any()
        totals = P.sum(axis=-1)  # (L, H, T)
        for name, mask in self.masks.items():
            targets, rows = mask(ids_a, special_a, causal)
            rows = rows & (totals > 0).all(axis=(0, 1))
            if not rows.any():
                continue
            on_target = (P[:, :, rows] * targets[rows]).sum(axis=-1) / totals[:, :, rows]  # (L, H, rows)
            self.sums[name] = self.sums.get(name, 0.0) + np.clip(on_target, 0.0, 1.0).sum(axis=-1)
            self.counts[name] += int(rows.sum())

    def add_sums(self, name: str, sums: np.ndarray, rows: int) -> None:
        """Row scores summed elsewhere (a long text's, from scattered cells): [layers, heads] over ``rows`` rows."""
        self.sums[name] = self.sums.get(name, 0.0) + sums
        self.counts[name] += rows

    def scores(self, shape: tuple[int, int]) -> dict[str, np.ndarray]:
        """Score name → ``[layers, heads]`` mean over counted rows, in [0, 1] (0 where no row counted)."""
        return {
            name: (self.sums[name] / self.counts[name]) if self.counts[name] else np.zeros(shape)
            for name in self.masks
        }


def head_scores(
    inputs: Iterable[tuple[np.ndarray, Sequence[int], Sequence[bool]]], masks: dict[str, Mask] | None = None,
    summed: dict[str, tuple[np.ndarray, int]] | None = None,
) -> dict[str, np.ndarray]:
    """Scores ``{name: [layers, heads]}`` over inputs ``(pattern stack, token ids, special flags)``, and
    ``summed``: score name → (row scores summed elsewhere, [layers, heads]; rows counted)."""
    tally = Tally(dict(MASKS if masks is None else masks))
    shape = None
    for stack, ids, special in inputs:
        shape = as_stack(stack).shape[:2]
        tally.add(stack, ids, special)
    for name, (sums, rows) in (summed or {}).items():
        shape = sums.shape
        tally.add_sums(name, sums, rows)
    if shape is None:
        raise ValueError("no input to score")
    return tally.scores(shape)


def detect(
    run: Callable[[str], AttentionResult],
    texts: Sequence[str],
    group: Group,
    masks: dict[str, Mask] | None = None,
    summed: dict[str, tuple[np.ndarray, int]] | None = None,
) -> dict[str, np.ndarray]:
    """Run every text (``run``: a backend's ``run``) and score the heads of attention ``group``, with
    ``summed`` (:func:`head_scores`) added in."""
    def inputs():
        ran = progress.steps("running the probes", len(texts))
        for text in texts:
            result = run(text)
            ran.done()
            tokens = result.tokens if group[0] == "encoder" or result.target_tokens is None else result.target_tokens
            yield result.stack("pattern", *group), tokens.ids, tokens.special

    return head_scores(inputs(), masks, summed)


def to_json_ready(scores: dict[str, np.ndarray]) -> dict[str, list[list[float]]]:
    """``{score_name: [[per head] per layer]}`` rounded to 6 decimals (the ``heads --json`` shape)."""
    return {name: np.round(values, 6).tolist() for name, values in scores.items()}


def top(scores: np.ndarray, n: int = 3) -> list[tuple[int, int, float]]:
    """The ``n`` heads with the highest score: (layer, head, score), highest first (ties: lower index)."""
    flat = scores.ravel()
    order = np.argsort(-flat, kind="stable")[:n]
    H = scores.shape[1]
    return [(int(i // H), int(i % H), float(flat[i])) for i in order]
