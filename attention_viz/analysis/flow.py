"""Attention flow (Abnar & Zuidema 2020): the layers as a network of pipes whose capacities are
the attention weights; the flow from a top token to an input token is a max-flow."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .checks import as_stack, normalize_rows
from .rollout import layer_attention


class FlowTooLarge(ValueError):
    """Attention flow was asked for an input that would take too long; use rollout instead.

    Attributes: ``n_tokens``, ``n_layers``, ``n_queries``, ``max_tokens`` (the most tokens computed
    for this many layers and query rows), ``max_tokens_one_query`` and ``estimated_seconds``.
    """

    def __init__(
        self, n_tokens: int, n_layers: int, n_queries: int, max_tokens: int, single: int, seconds: float
    ):
        self.n_tokens, self.n_layers, self.n_queries = n_tokens, n_layers, n_queries
        self.max_tokens, self.max_tokens_one_query, self.estimated_seconds = max_tokens, single, seconds
        if n_queries == n_tokens:
            pairs = "token pair"
            limit = f"up to {max_tokens} tokens, or up to {single} for a single query row"
        else:
            rows = f"{n_queries} query row{'s' if n_queries != 1 else ''}"
            pairs, limit = f"(query, key) pair, for {rows}", f"up to {max_tokens} tokens for {rows}"
        super().__init__(
            f"attention flow solves one max-flow per {pairs} ({n_queries * n_tokens} here), each "
            f"through all {n_layers} layers: {n_layers} layers × {n_tokens} tokens would take "
            f"up to ~{max(1, round(seconds))} s. With {n_layers} layers it is computed {limit}; "
            "rollout has no such limit."
        )


# Cost model: max-flow time grows with (number of max-flows) × (edges of one max-flow's graph) =
# flow_work(). FLOW_SECONDS_PER_WORK is the slowest rate seen on this project's 2-core machines (one
# sharp random head per layer needs the most augmenting paths; averaged heads need fewer), and
# FLOW_MAX_WORK keeps the worst allowed input well inside the page's time budget even on a machine
# twice as slow. The token limits it implies per depth are what flow_max_tokens() returns.
FLOW_SECONDS_PER_WORK = 1.2e-6
FLOW_MAX_WORK = 1_250_000


def flow_work(n_tokens: int, n_layers: int, n_queries: int | None = None) -> int:
    """Work units of :func:`attention_flow`: max-flows × edges of one max-flow's graph."""
    q = n_tokens if n_queries is None else min(n_queries, n_tokens)
    if n_layers <= 2:  # closed form, vectorized: one unit per path
        return q * n_tokens * n_tokens
    return q * n_tokens * ((n_layers - 2) * n_tokens * n_tokens + 2 * n_tokens)


def flow_max_tokens(n_layers: int, n_queries: int | None = None, max_work: int = FLOW_MAX_WORK) -> int:
    """The most tokens :func:`attention_flow` accepts for this many layers (and query rows)."""
    n = 1
    while flow_work(n + 1, n_layers, n_queries) <= max_work and n < 100_000:
        n += 1
    return n


_EPS = 1e-12  # residual capacity treated as 0 (attention weights are ≥ ~1e-38 in float32 anyway)
_TOL = 1e-9  # stop when the flow is this close to an upper bound: no path could add more


def _flow_bounds(A: np.ndarray) -> np.ndarray:
    """Upper bounds on every top-token → input-token flow, ``[q, k]``, from two dynamic programs.

    From the sink up: the flow out of a node is at most Σ_children min(edge, child's bound); from
    the source down: the flow into a node is at most Σ_parents min(parent's bound, edge). Both are
    exact when paths share no node (2 layers), and often tight otherwise, which lets the max-flow
    stop as soon as it reaches them.
    """
    L = A.shape[0]
    down = A[0]  # (a, j): most that node a of layer 1 can pass to input j
    for layer in range(1, L):
        down = np.minimum(A[layer][:, :, None], down[None, :, :]).sum(axis=1)
    up = A[L - 1]  # (i, b): most that top token i can push into node b
    for layer in range(L - 2, -1, -1):
        up = np.minimum(up[:, :, None], A[layer][None, :, :]).sum(axis=1)
    return np.minimum(np.minimum(down, up), 1.0)


class _LayeredGraph:
    """The flow network for a layered stack, built once; each (source, sink) pair only resets caps.

    Top-layer tokens other than the source have no incoming edges and input tokens other than the
    sink have no outgoing ones, so neither can carry flow: the graph keeps the source, the sink and
    the ``L-1`` inner layers. Node 0 is the source, the last node the sink. Edge ``e`` and its
    reverse are ``e`` and ``e ^ 1``; adjacency lists are sorted by capacity, largest first, so the
    first augmenting paths carry the most flow.
    """

    def __init__(self, A: np.ndarray):
        L, n, _ = A.shape
        self.n_nodes = 2 + (L - 1) * n
        sink = self.n_nodes - 1
        to: list[int] = []
        cap: list[float] = []
        adj: list[list[int]] = [[] for _ in range(self.n_nodes)]

        def node(layer: int, a: int) -> int:  # layer 1 .. L-1 (outputs of that layer)
            return 1 + (L - 1 - layer) * n + a

        def add(u: int, v: int, c: float) -> int:
            e = len(to)
            adj[u].append(e)
            to.append(v)
            cap.append(c)
            adj[v].append(e + 1)
            to.append(u)
            cap.append(0.0)
            return e

        self.source_edges = [add(0, node(L - 1, b), 0.0) for b in range(n)]
        for layer in range(L - 1, 1, -1):  # edges layer → layer-1 carry A[layer-1] (0-based stack)
            weights = A[layer - 1].tolist()
            for a in range(n):
                row = weights[a]
                for b in range(n):
                    if row[b] > _EPS:
                        add(node(layer, a), node(layer - 1, b), row[b])
        self.sink_edges = [add(node(1, a), sink, 0.0) for a in range(n)]
        for lst in adj:
            lst.sort(key=lambda e: -cap[e])
        self.to, self.cap, self.adj = to, cap, adj
        self.adj_to = [[to[e] for e in lst] for lst in adj]
        self.top = A[L - 1].tolist()
        self.bottom = A[0].T.tolist()  # bottom[j][a] = A_1[a, j]

    def max_flow(self, i: int, j: int, bound: float) -> float:
        """Max flow from top token ``i`` to input token ``j`` (stops once it reaches ``bound``)."""
        cap = list(self.cap)
        top, bottom = self.top[i], self.bottom[j]
        for b, e in enumerate(self.source_edges):
            cap[e] = top[b]
        for a, e in enumerate(self.sink_edges):
            cap[e] = bottom[a]
        adj, adj_to = list(self.adj), list(self.adj_to)
        adj[0] = sorted(self.source_edges, key=lambda e: -cap[e])
        adj_to[0] = [self.to[e] for e in adj[0]]
        return _dinic(self.n_nodes, cap, adj, adj_to, bound)


def _dinic(
    n_nodes: int, cap: list[float], adj: list[list[int]], adj_to: list[list[int]], bound: float
) -> float:
    """Dinic's max-flow from node 0 to node ``n_nodes - 1``; stops early at ``bound``.

    ``adj[u]`` lists the edges out of ``u`` (reverse edges included), ``adj_to[u]`` their heads.
    Each phase: BFS levels in the residual graph, then one blocking flow (:func:`_blocking_flow`).
    """
    s, t = 0, n_nodes - 1
    flow = 0.0
    while flow < bound - _TOL:
        level = [-1] * n_nodes
        level[s] = 0
        frontier = [s]
        depth = 0
        while frontier and level[t] < 0:
            depth += 1
            nxt = []
            for u in frontier:
                for e, v in zip(adj[u], adj_to[u]):
                    if level[v] < 0 and cap[e] > _EPS:
                        level[v] = depth
                        nxt.append(v)
            frontier = nxt
        if level[t] < 0:
            break
        for v in range(n_nodes):  # nodes as far as the sink (or farther) lead nowhere useful
            if level[v] >= depth and v != t:
                level[v] = -1
        pushed = _blocking_flow(s, t, bound - flow, cap, adj, adj_to, level)
        if pushed <= 0.0:
            break
        flow += pushed
    return flow


def _blocking_flow(
    s: int, t: int, limit: float, cap: list[float], adj: list[list[int]], adj_to: list[list[int]], level: list[int]
) -> float:
    """One depth-first blocking flow along increasing levels, at most ``limit``.

    Sends flow down several branches per visit (a shared path prefix is walked once), keeps a
    current-edge pointer per node and marks dead ends (``level = -1``). The depth-first walk
    keeps its own stack of frames ``[node, amount asked, amount sent, edge index]`` instead of
    recursing, so any depth works and no interpreter setting is touched.
    """
    pointer = [0] * len(level)
    stack = [[s, limit, 0.0, 0]]
    returned: float | None = None  # what the frame just finished sent back to its parent
    while stack:
        frame = stack[-1]
        u, amount, sent, i = frame
        edges, heads = adj[u], adj_to[u]
        if returned is not None:  # back from a child reached through edge i
            got, returned = returned, None
            if got > 0.0:
                e = edges[i]
                cap[e] -= got
                cap[e ^ 1] += got
                sent += got
                if amount - sent <= _EPS:
                    pointer[u] = i
                    stack.pop()
                    returned = sent
                    continue
            i += 1
        next_level, m = level[u] + 1, len(edges)
        descended = False
        while i < m:
            v = heads[i]
            if level[v] == next_level:
                e = edges[i]
                c = cap[e]
                if c > _EPS:
                    want = min(amount - sent, c)
                    if v != t:
                        frame[2], frame[3] = sent, i
                        stack.append([v, want, 0.0, pointer[v]])
                        descended = True
                        break
                    cap[e] = c - want  # the sink takes everything offered
                    cap[e ^ 1] += want
                    sent += want
                    if amount - sent <= _EPS:
                        break
            i += 1
        if descended:
            continue
        pointer[u] = i
        if i >= m:
            level[u] = -1  # dead end for the rest of this phase
        stack.pop()
        returned = sent
    return returned or 0.0


def attention_flow(
    P: np.ndarray,
    *,
    queries: Sequence[int] | None = None,
    normalize: bool = True,
    max_work: int = FLOW_MAX_WORK,
) -> np.ndarray:
    """Attention flow (Abnar & Zuidema 2020) from every input token to the top layer's tokens.

    The layers form a network: a node per token at every layer boundary, edges from token ``a``
    after layer ``l`` to token ``b`` before it with capacity ``A_l[a, b]`` (:func:`layer_attention`,
    heads averaged, residual added). ``flow[q, k]`` is the maximum flow from top-layer token ``q``
    down to input token ``k``. Unlike rollout, which follows every path in proportion, flow asks
    how much *could* get through the narrowest cut, so it spreads credit more evenly.

    Returns ``[q, k]`` float32 (``[len(queries), k]`` when ``queries`` selects rows). With
    ``normalize`` (the default, as in the authors' code) each row is divided by its sum, so rows
    sum to 1 and compare with rollout; raw max-flow values are ≤ 1.

    One max-flow per (query, key) pair, each over all layers, grows like tokens⁴ × layers: inputs
    above ``max_work`` (:func:`flow_work`) raise :class:`FlowTooLarge` before any work is done.
    """
    shape = np.shape(P)
    if len(shape) != 4:
        raise ValueError(f"expected [layers, heads, query, key], got shape {shape}")
    L, _, n, _ = shape
    rows = list(range(n)) if queries is None else [int(q) for q in queries]
    for q in rows:
        if not 0 <= q < n:
            raise IndexError(f"query {q} out of range for {n} tokens")
    work = flow_work(n, L, len(rows))
    if work > max_work:  # refuse before touching the data
        max_n = flow_max_tokens(L, None if queries is None else len(rows), max_work)
        single = flow_max_tokens(L, 1, max_work)
        raise FlowTooLarge(n, L, len(rows), max_n, single, work * FLOW_SECONDS_PER_WORK)
    A = layer_attention(P)
    if L == 1:
        flow = A[0][rows]
    elif L == 2:  # every path is top → middle → input and no two share an edge: the bound is exact
        flow = np.minimum(A[1][rows][:, :, None], A[0][None, :, :]).sum(axis=1)
    else:
        bounds = _flow_bounds(A)
        graph = _LayeredGraph(A)
        flow = np.array([[graph.max_flow(i, j, bounds[i, j]) for j in range(n)] for i in rows])
        flow = flow.reshape(len(rows), n)
    if normalize:
        flow = normalize_rows(flow)
    return flow.astype(np.float32)
