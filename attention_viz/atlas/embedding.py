"""AttentionViz's joint query–key view (Yeh et al., VIS 2023): one head's query and key vectors over
the corpus sample, placed in one 2-D map so queries land near the keys they attend to.

Before the projection the keys are translated and both sets rescaled — neither changes any
attention pattern:
- translation: ``k ← k − k̄ + q̄``. softmax over keys ignores a term that is the same for every key,
  and q·(k + c) only adds q·c, the same for all keys of a query;
- norm scaling: ``q ← a·q, k ← k / a`` with a² = mean‖k‖ / mean‖q‖, so both sets have the same mean
  norm; q·k is unchanged.
Then PCA (instant), UMAP or t-SNE; the result is cached in the atlas directory. UMAP's first fit in
a process compiles for about a minute, so the page asks :class:`EmbeddingJobs` to compute in the
background and shows the job's status meanwhile.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import ModelError
from . import layout
from .store import read_sample, vectors

METHODS = ("pca", "umap", "tsne")
TSNE_TOKENS = 5000  # t-SNE is O(n log n) with a large constant: ~1 min for 10k points here


@dataclass(frozen=True)
class JointEmbedding:
    """2-D points: the first ``n`` rows are queries, the next ``n`` keys of the same tokens."""

    xy: np.ndarray  # (2n, 2)
    line: np.ndarray  # (n,) corpus line of each token
    position: np.ndarray  # (n,) its position in the sentence
    label: list[str]
    kind: np.ndarray  # (n,) token kind (stats.WORD / SPECIAL / PUNCTUATION)
    method: str

    @property
    def n(self) -> int:
        return len(self.line)


def align_queries_and_keys(q: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Key translation and norm scaling (see the module docstring); every q·k difference between
    keys, and so every attention pattern, is unchanged."""
    q = q.astype(np.float64)
    k = k.astype(np.float64) - k.mean(axis=0) + q.mean(axis=0)
    a = np.sqrt(np.linalg.norm(k, axis=1).mean() / max(np.linalg.norm(q, axis=1).mean(), 1e-12))
    return q * a, k / a


def project(points: np.ndarray, method: str, seed: int = 0) -> np.ndarray:
    if method == "pca":
        from sklearn.decomposition import PCA

        return PCA(n_components=2, random_state=seed).fit_transform(points)
    if method == "umap":
        import umap

        return umap.UMAP(n_components=2, random_state=seed, n_jobs=1).fit_transform(points)
    if method == "tsne":
        from sklearn.manifold import TSNE

        return TSNE(n_components=2, init="pca", random_state=seed, perplexity=30).fit_transform(points)
    raise ModelError(f"unknown projection {method!r}; choose from {', '.join(METHODS)}")


def cache_path(folder: Path, layer: int, head: int, method: str) -> Path:
    return Path(folder) / layout.EMBEDDINGS / f"layer{layer}_head{head}_{method}.npz"


def joint_embedding(folder: str | Path, layer: int, head: int, method: str = "pca") -> JointEmbedding:
    """The head's joint Q–K map, from the cache or computed (and cached) now."""
    if method not in METHODS:
        raise ModelError(f"unknown projection {method!r}; choose from {', '.join(METHODS)}")
    folder = Path(folder)
    sample = read_sample(folder, [f"q_{layer}", f"k_{layer}"])
    if method == "tsne" and sample.num_rows > TSNE_TOKENS:  # an even, fixed subset
        sample = sample.take(np.linspace(0, sample.num_rows - 1, TSNE_TOKENS).round().astype(int))
    path = cache_path(folder, layer, head, method)
    if path.is_file():
        xy = np.load(path)["xy"]
    else:
        q, k = (vectors(sample, f"{kind}_{layer}") for kind in ("q", "k"))
        manifest = layout.read_manifest(folder)
        heads = int(manifest["heads"])
        d_k = q.shape[1] // heads
        # a token's heads sit side by side; query head h reads KV head h // (heads / kv_heads) (grouped-query)
        kv_head = head // (heads // (k.shape[1] // d_k))
        q, k = align_queries_and_keys(q[:, head * d_k:(head + 1) * d_k], k[:, kv_head * d_k:(kv_head + 1) * d_k])
        xy = project(np.concatenate([q, k]), method).astype(np.float32)
        path.parent.mkdir(exist_ok=True)
        temporary = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp.npz")
        np.savez(temporary, xy=xy)
        os.replace(temporary, path)  # a reader never sees half a file
    return JointEmbedding(xy, sample.column("line").to_numpy(), sample.column("position").to_numpy(),
                          sample.column("label").to_pylist(), sample.column("kind").to_numpy(), method)


class EmbeddingJobs:
    """Slow projections computed off the page's thread, one at a time; the page polls ``status``."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="atlas-embedding")
        self._jobs: dict[tuple, Future] = {}
        self._lock = threading.Lock()

    def status(self, folder: str | Path, layer: int, head: int, method: str) -> tuple[str, JointEmbedding | str | None]:
        """("ready", embedding) | ("running", None) | ("queued", None) | ("failed", message) | ("absent", None)."""
        key = (str(folder), layer, head, method)
        if cache_path(Path(folder), layer, head, method).is_file():
            return "ready", joint_embedding(folder, layer, head, method)
        with self._lock:
            job = self._jobs.get(key)
        if job is None:
            return "absent", None
        if job.done():
            error = job.exception()
            if error is None:
                return "ready", job.result()
            return "failed", str(error).splitlines()[0] if str(error) else type(error).__name__
        return ("running" if job.running() else "queued"), None

    def submit(self, folder: str | Path, layer: int, head: int, method: str) -> None:
        key = (str(folder), layer, head, method)
        with self._lock:
            job = self._jobs.get(key)
            if job is None or (job.done() and job.exception() is not None):  # first ask, or a retry after a failure
                self._jobs[key] = self._pool.submit(joint_embedding, folder, layer, head, method)
