"""Edges between a decoder's components and the circuit they form (plain data; the runs are
:mod:`attention_viz.backends.circuit`).

The graph is that of edge attribution patching (Syed, Rager & Conmy 2023): every component writes
into the residual stream and every later component reads the sum of what was written before it.
*Nodes* write: the embeddings ``embed``, each head ``L.H`` (its output through its slice of W_O), each
feed-forward block ``mlp L``. *Receivers* read, each its own copy of the stream: a head's query, key
and value inputs separately (``L.H.q``, ``L.H.k``, ``L.H.v``), each feed-forward block and the
unembedding (``logits``). An edge joins a node to a receiver that comes after it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..errors import ModelError
from .patching import restored_fraction

QKV = ("q", "k", "v")
METHODS = {"eap": "edge attribution patching: (a_clean − a_corrupt) · ∂metric/∂(receiver's input), at the "
                  "corrupt run (Syed et al. 2023)",
           "eap-ig": "the same gradient averaged over inputs between the corrupt and the clean one "
                     "(integrated gradients, Hanna et al. 2024)"}
DEFAULT_TOP = 20
IG_STEPS = 5  # interpolation steps of eap-ig (Hanna et al. 2024 use 5)
MAX_IG_STEPS = 100  # each step is one more forward and backward through the whole graph


def check_steps(steps: int) -> int:
    """eap-ig's interpolation steps if 1 to :data:`MAX_IG_STEPS`; a ModelError in one sentence otherwise."""
    if isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= MAX_IG_STEPS:
        raise ModelError(f"eap-ig takes 1 to {MAX_IG_STEPS} interpolation steps (--steps), got {steps!r}")
    return steps


@dataclass(frozen=True)
class Graph:
    """The nodes, receivers and allowed edges of a pre-LN decoder with ``layers`` × ``heads``
    attention heads (``kv_heads`` key/value heads) and, when ``mlp``, a feed-forward block per layer."""

    layers: int
    heads: int
    kv_heads: int
    mlp: bool

    @property
    def nodes(self) -> list[str]:
        """The writers, in the order they write: embed, then per layer its heads and its mlp."""
        out = ["embed"]
        for layer in range(self.layers):
            out += [f"{layer}.{head}" for head in range(self.heads)]
            out += [f"mlp {layer}"] if self.mlp else []
        return out

    @property
    def head_nodes(self) -> list[str]:
        return [f"{layer}.{head}" for layer in range(self.layers) for head in range(self.heads)]

    def attention_receivers(self, layer: int) -> list[str]:
        """One layer's q, k, v inputs: all queries, then the keys, then the values (the order the runs
        fill them in). With grouped-query attention a key/value receiver is a key/value head."""
        return ([f"{layer}.{h}.q" for h in range(self.heads)] + [f"{layer}.{h}.k" for h in range(self.kv_heads)]
                + [f"{layer}.{h}.v" for h in range(self.kv_heads)])

    @property
    def receivers(self) -> list[str]:
        out = []
        for layer in range(self.layers):
            out += self.attention_receivers(layer) + ([f"mlp {layer}"] if self.mlp else [])
        return out + ["logits"]

    def writers_before(self, receiver: str) -> int:
        """How many nodes (a prefix of ``nodes``) write before ``receiver`` reads."""
        if receiver == "logits":
            return len(self.nodes)
        per_layer = self.heads + (1 if self.mlp else 0)
        if receiver.startswith("mlp "):
            return 1 + int(receiver[4:]) * per_layer + self.heads  # this layer's heads come first
        return 1 + int(receiver.split(".")[0]) * per_layer

    def allowed(self) -> np.ndarray:
        """(nodes, receivers) bool: whether the edge exists."""
        out = np.zeros((len(self.nodes), len(self.receivers)), dtype=bool)
        for column, receiver in enumerate(self.receivers):
            out[: self.writers_before(receiver), column] = True
        return out


def node_of(receiver: str) -> str:
    """``1.3.k`` → ``1.3``: the node a receiver belongs to (a head's input → the head)."""
    return receiver.rsplit(".", 1)[0] if receiver.endswith(tuple(f".{kind}" for kind in QKV)) else receiver


def input_kind(receiver: str) -> str:
    """``1.3.k`` → ``k``; "" for a receiver that is a whole component (an mlp, the logits)."""
    return "" if node_of(receiver) == receiver else receiver.rsplit(".", 1)[-1]


def top_edges(scores: np.ndarray, allowed: np.ndarray, k: int) -> np.ndarray:
    """(nodes, receivers) bool: the ``k`` allowed edges of largest |score| (ties broken by order)."""
    flat = np.where(allowed, np.abs(scores), -np.inf).ravel()
    k = max(0, min(int(k), int(allowed.sum())))
    chosen = np.zeros(flat.size, dtype=bool)
    chosen[np.argsort(-flat, kind="stable")[:k]] = True
    return chosen.reshape(scores.shape)


def curve_sizes(edges: int, points: int = 12) -> list[int]:
    """Circuit sizes from none to every edge, spaced evenly on a log scale (distinct, ascending)."""
    return sorted({0, edges, *np.unique(np.geomspace(1, max(edges, 1), points).round().astype(int)).tolist()})


@dataclass(frozen=True)
class Circuit:
    """Every edge's score, and how much of the clean − corrupt gap the top ``top`` edges keep."""

    model: str
    method: str
    metric: str
    tokens: tuple[str, ...]
    graph: Graph
    scores: np.ndarray  # (nodes, receivers); NaN where no edge exists
    clean: float
    corrupt: float
    top: int
    circuit_metric: float  # the metric when only the top edges carry the clean run
    curve: dict[int, float] = field(default_factory=dict)  # edges kept → fraction kept, where measured
    steps: int | None = None  # eap-ig's interpolation steps (None for eap)

    @property
    def metric_kept(self) -> float:
        """(metric_circuit − metric_corrupt) / (metric_clean − metric_corrupt)."""
        return float(restored_fraction(np.array(self.circuit_metric), self.clean, self.corrupt))

    def chosen(self, k: int | None = None) -> np.ndarray:
        return top_edges(np.nan_to_num(self.scores), self.graph.allowed(), self.top if k is None else k)

    def edges(self, k: int | None = None) -> list[dict]:
        """The top edges, largest |score| first: {"from", "to", "score"}."""
        chosen = self.chosen(k)
        nodes, receivers = self.graph.nodes, self.graph.receivers
        rows = [(nodes[u], receivers[v], float(self.scores[u, v])) for u, v in zip(*np.nonzero(chosen))]
        return [{"from": u, "to": v, "score": s} for u, v, s in sorted(rows, key=lambda r: -abs(r[2]))]

    def circuit_nodes(self, k: int | None = None) -> list[str]:
        """The nodes the top edges touch (a receiver counts as its head), in the graph's order, logits last."""
        touched = {e["from"] for e in self.edges(k)} | {node_of(e["to"]) for e in self.edges(k)}
        return [n for n in [*self.graph.nodes, "logits"] if n in touched]

    def first_head(self) -> str:
        """The circuit's first head in the graph's order (the view opens on it); ``0.0`` when it has none."""
        return next((n for n in self.circuit_nodes() if head_of(n) is not None), self.graph.head_nodes[0])

    def to_dict(self) -> dict:
        return {
            "model": self.model, "method": self.method, "steps": self.steps, "metric": self.metric,
            "tokens": list(self.tokens),
            "clean": float(self.clean), "corrupt": float(self.corrupt),
            "nodes": self.circuit_nodes(),
            "edges": [{**e, "score": round(e["score"], 6)} for e in self.edges()],
            "faithfulness": {"edges": int(self.top), "metric_kept": _plain(self.metric_kept)},
        }


def _plain(value: float) -> float | None:
    return None if math.isnan(value) else round(float(value), 6)


# -- where the view draws each component ----------------------------------------------------------

QKV_OFFSETS = {"q": (-0.22, -0.2), "k": (0.0, -0.26), "v": (0.22, -0.2)}  # where each input enters its head
MLP_RISE = 0.45  # a block sits between its layer's heads and the next layer's


def position(graph: Graph, node: str) -> tuple[float, float]:
    """(x, y) of a node: heads by index along their layer's row, a layer's mlp to the right and a
    little above, the embeddings below layer 0 and the logits above the last layer."""
    middle = (graph.heads - 1) / 2
    if node == "embed":
        return middle, -1.0
    if node == "logits":
        return middle, float(graph.layers)
    if node.startswith("mlp "):
        return float(graph.heads), int(node[4:]) + MLP_RISE
    layer, head = (int(part) for part in node.split("."))
    return float(head), float(layer)


def entry_point(graph: Graph, receiver: str) -> tuple[float, float]:
    """Where an edge into ``receiver`` ends: a head's q, k and v inputs at three points under it."""
    x, y = position(graph, node_of(receiver))
    dx, dy = QKV_OFFSETS.get(input_kind(receiver), (0.0, -0.2))
    return x + dx, y + dy


def head_of(node: str) -> tuple[int, int] | None:
    """``1.3`` → (1, 3); None for embed, an mlp or the logits."""
    parts = node.split(".")
    return (int(parts[0]), int(parts[1])) if len(parts) == 2 and all(p.isdigit() for p in parts) else None
