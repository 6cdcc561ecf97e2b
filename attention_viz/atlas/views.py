"""What the Head atlas page shows, as plain data: the heads' 2-D map (MDS on JS divergences, Clark
et al. 2019 fig. 6), the current sentence against the corpus, similar contexts. No torch: the page
hands in an AttentionResult and the backend's layer outputs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..core.result import AttentionResult
from .neighbors import Neighbors
from .stats import sentence_stats, token_kinds
from .store import Atlas


def head_map(js: np.ndarray, seed: int = 0) -> np.ndarray:
    """Metric MDS of the heads' mean JS divergences: ``[heads, 2]``, near = similar patterns."""
    from sklearn.manifold import MDS

    return MDS(n_components=2, metric="precomputed", init="random", random_state=seed, n_init=1,
               normalized_stress="auto").fit_transform(js)


def grid_of(atlas: Atlas, measure: str) -> np.ndarray:
    """``[layers, heads]`` of a statistic name or a relation name (its accuracy)."""
    summary = atlas.summary()
    if measure in summary["stats"]:
        return np.asarray(summary["stats"][measure])
    return np.asarray(summary["relations"][measure]["accuracy"])


def measures(atlas: Atlas) -> list[str]:
    summary = atlas.summary()
    return [*summary["stats"], *summary.get("relations", {})]


@dataclass(frozen=True)
class Placement:
    """One head's statistic on the current sentence against its per-sentence corpus values."""

    value: float
    corpus: np.ndarray
    percentile: float  # share of corpus sentences with a lower value, in %


def sentence_against_corpus(result: AttentionResult, atlas: Atlas, stat: str, layer: int, head: int) -> Placement:
    group = result.attentions()[0]
    P = result.stack("pattern", *group)
    value = float(sentence_stats(P, token_kinds(result.tokens.labels, result.tokens.special))[stat][layer, head])
    _, corpus = atlas.values(stat, layer, head)
    percentile = 100.0 * float((corpus < value).mean()) if corpus.size else float("nan")
    return Placement(value, corpus, percentile)


@dataclass(frozen=True)
class Context:
    line: int
    position: int
    similarity: float
    text: str
    token: str


def similar_contexts(folder: str | Path, layer: int, vector: np.ndarray, k: int = 8) -> list[Context]:
    """The ``k`` corpus tokens whose layer-``layer`` representation is nearest to ``vector``."""
    atlas = Atlas.open(folder)
    hits = Neighbors(folder, layer).search(vector, k)[0]
    rows = atlas.sentences([h.line for h in hits])
    return [Context(h.line, h.position, h.similarity, rows[h.line]["text"], rows[h.line]["labels"][h.position])
            for h in hits]


