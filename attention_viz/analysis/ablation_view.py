"""The head-ablation page's plain data: the heads a user can pick (spelled as the items of the
CLI's ``--ablate``), the tokens each output log-probability belongs to, the before/after maps of a
long text pooled to a size a browser takes, and the shipped per-head importance table (Michel et
al. 2019, "Are sixteen heads really better than one?")."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..core.names import Group
from ..core.result import AttentionResult
from .ablation import ATTENTIONS, Head, parse_heads
from .blockwise import tile_size

# The trained models' folder; the importance tables sit beside the models they measure.
SHIPPED = Path(__file__).resolve().parents[1] / "trained" / "models"
_WORDS = {group: word for word, group in ATTENTIONS.items()}


# Tiles a side of each before/after map, at most: past it a map is max-pooled, as the head view pools
# a long text (a 1,000-token pair with a hover label per cell was ~60 MB on the wire).
PAIR_TILES = 128


def pooled_map(matrix: np.ndarray, labels: tuple[Sequence[str], Sequence[str]], tiles: int = PAIR_TILES
               ) -> tuple[np.ndarray, tuple[list[str], list[str]]]:
    """``matrix`` [query, key] max-pooled to at most ``tiles`` a side (each tile keeps its largest
    weight, so a sharp cell never fades), with each tile labelled by the positions it covers and its
    first token; a matrix within the limit comes back as it is."""
    rows, cols = tile_size(matrix.shape[0], tiles), tile_size(matrix.shape[1], tiles)
    if rows == cols == 1:
        return matrix, (list(labels[0]), list(labels[1]))
    pooled = np.maximum.reduceat(np.maximum.reduceat(matrix, np.arange(0, matrix.shape[0], rows), axis=0),
                                 np.arange(0, matrix.shape[1], cols), axis=1)
    return pooled, (_spans(labels[0], rows), _spans(labels[1], cols))


def _spans(labels: Sequence[str], size: int) -> list[str]:
    """One label per tile of ``size`` positions: ``12–15 word`` (its positions, its first token)."""
    return [f"{start}–{min(start + size, len(labels)) - 1} {labels[start]}" for start in range(0, len(labels), size)]


def default_attention(result: AttentionResult) -> Group:
    """The attention a bare ``L.H`` names (as in the CLI): the encoder's, or a decoder-only model's."""
    return result.attentions()[0]


def head_options(result: AttentionResult) -> list[str]:
    """Every head of every attention of ``result``: ``L.H`` for the default attention,
    ``cross:L.H`` / ``decoder:L.H`` for the others, so the chosen items joined by commas are a
    valid ``--ablate`` value."""
    default = default_attention(result)
    options = []
    for group in result.attentions():
        prefix = "" if group == default else f"{_WORDS[group]}:"
        heads = result.pattern(group, 0).shape[0]
        options += [f"{prefix}{layer}.{head}" for layer in range(result.n_layers(*group)) for head in range(heads)]
    return options


def head_item(result: AttentionResult, group: Group, layer: int, head: int) -> str:
    """One head spelled as :func:`head_options` spells it (``3.1``, ``cross:0.2``)."""
    prefix = "" if group == default_attention(result) else f"{_WORDS[group]}:"
    return f"{prefix}{layer}.{head}"


def toggled(items: Sequence[str], item: str | None) -> list[str]:
    """``items`` with ``item`` added at the end, or removed when it is there (None: unchanged)."""
    if item is None:
        return list(items)
    return [i for i in items if i != item] if item in items else [*items, item]


def marked(items: Sequence[str], result: AttentionResult, group: Group) -> set[tuple[int, int]]:
    """(layer, head) of the chosen heads that belong to ``group`` (to mark them in its grid)."""
    return {(layer, head) for g, layer, head in chosen_heads(items, result) if g == group}


def chosen_heads(items: Sequence[str], result: AttentionResult) -> tuple[Head, ...]:
    """The picked items as heads (none picked: no head)."""
    return parse_heads(",".join(items), default_attention(result)) if items else ()


def following_labels(result: AttentionResult, count: int) -> list[str]:
    """The token each of ``count`` next-token log-probabilities is about: position t predicts the
    decoder's token t + 1; an encoder–decoder's last prediction is its end marker."""
    decoded = result.target_tokens if result.target_tokens is not None else result.tokens
    labels = list(decoded.labels[1:])
    return (labels + ["<eos>"] * count)[:count]


@dataclass(frozen=True)
class Importance:
    """A shipped importance table: one row per head, largest exact-match drop first."""

    rows: list[dict]
    baseline: dict[str, float]
    pairs: int
    ablation: str
    command: str


def shipped_importance(model: str, folder: Path = SHIPPED) -> Importance | None:
    """``<model>-head-importance.json`` from the shipped models' folder, or None when the model has
    none (it is measured by ``python -m attention_viz.cards.head_importance``)."""
    path = folder / f"{model}-head-importance.json"
    if not path.is_file():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    rows = [
        {
            "head": row["head"],
            "exact-match drop (points)": round(100 * row["exact_match_drop"], 2),
            "alignment drop (points)": round(100 * row["alignment_drop"], 2),
            "exact match without it": row["exact_match"],
            "alignment without it": row["alignment"],
        }
        for row in data["heads"]
    ]
    rows.sort(key=lambda r: (-r["exact-match drop (points)"], -r["alignment drop (points)"]))
    return Importance(rows, dict(data["baseline"]), int(data["held_out_pairs"]), data["ablation"], data["command"])
