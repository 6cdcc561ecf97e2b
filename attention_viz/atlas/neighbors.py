"""Similar contexts (exBERT): for a token's representation at one layer, the nearest tokens of the
corpus sample by cosine similarity — a faiss inner-product index over unit vectors, one per layer,
built with the atlas and stored beside it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import layout
from .store import read_sample, vectors

# Below this many queries faiss's own loop beats BLAS; its default (20) is tuned for larger batches.
BLAS_THRESHOLD = 20


def _faiss():
    import faiss

    faiss.cvar.distance_compute_blas_threshold = BLAS_THRESHOLD
    return faiss


def unit(x: np.ndarray) -> np.ndarray:
    x = np.ascontiguousarray(x, dtype=np.float32)
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def index_path(folder: Path, layer: int) -> Path:
    return Path(folder) / layout.NEIGHBORS / f"layer_{layer}.faiss"


def build_indexes(folder: Path, layers: int) -> None:
    """One inner-product index per layer over the sample's unit layer outputs (in sample order)."""
    faiss = _faiss()
    (Path(folder) / layout.NEIGHBORS).mkdir(exist_ok=True)
    for layer in range(layers):
        x = unit(vectors(read_sample(folder, [f"h_{layer}"]), f"h_{layer}"))
        # fp16 codes: half the memory of flat float32, inner products within ~1e-3 of exact
        index = faiss.IndexScalarQuantizer(x.shape[1], faiss.ScalarQuantizer.QT_fp16, faiss.METRIC_INNER_PRODUCT)
        index.add(x)
        faiss.write_index(index, str(index_path(folder, layer)))


@dataclass(frozen=True)
class Neighbor:
    line: int
    position: int
    similarity: float


class Neighbors:
    """The index of one layer and which (line, position) each of its rows is."""

    def __init__(self, folder: str | Path, layer: int) -> None:
        faiss = _faiss()
        path = index_path(Path(folder), layer)
        if not path.is_file():
            from ..errors import ModelError

            raise ModelError(f"{folder} has no similar-context index for layer {layer}")
        self.index = faiss.read_index(str(path))
        order = read_sample(folder, [])
        self.lines = order.column("line").to_numpy()
        self.positions = order.column("position").to_numpy()

    def search(self, queries: np.ndarray, k: int = 10) -> list[list[Neighbor]]:
        """For each query vector (a token's layer output), the ``k`` most similar sample tokens."""
        similarity, rows = self.index.search(unit(np.atleast_2d(queries)), k)
        return [[Neighbor(int(self.lines[r]), int(self.positions[r]), float(s)) for r, s in zip(row, sims) if r >= 0]
                for row, sims in zip(rows, similarity)]
