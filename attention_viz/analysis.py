"""What attention patterns say beyond one heatmap: pure numpy, no torch, no plotting.

Inputs are plain arrays as :class:`~attention_viz.result.AttentionResult` hands them out: one
layer's patterns ``[heads, query, key]`` or a stack ``[layers, heads, query, key]`` (float32; rows
sum to 1, or are all 0 where a query had every key masked), plus token flags as plain sequences
(``special[i]`` is True for [CLS], [SEP], <s> ...). Nothing here ever returns NaN: empty or
all-zero rows stay zero, and non-finite input is refused with a ValueError instead of spreading.

What is here, and why:

* :func:`head_mean`, :func:`head_max` — one picture per layer instead of one per head.
* :func:`drop_special` — hide what dominates the colour scale ([SEP] sinks) so the rest can be
  seen.
* :func:`layer_attention`, :func:`rollout`, :func:`attention_flow` — Abnar & Zuidema (2020),
  "Quantifying Attention Flow in Transformers": raw attention of a deep layer says little about
  the *input* tokens, because every layer mixes tokens again and the residual stream carries
  each token forward. Rollout multiplies the layers; flow treats them as a network of pipes.
* :func:`head_stats` — one row per head (entropy, distance, where the weight goes) and a role
  label, so a table can be sorted to find the previous-token heads, the [SEP] sinks, ...
* :func:`focus_matrix`, :func:`top_heads`, :func:`difference` — "which heads link these two
  tokens", and "what changed between two sentences".
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import numpy as np

__all__ = [
    "BROAD_ENTROPY",
    "FLOW_MAX_WORK",
    "FLOW_SECONDS_PER_WORK",
    "ROLES",
    "ROLE_SHARE",
    "FlowTooLarge",
    "attention_flow",
    "difference",
    "drop_special",
    "flow_max_tokens",
    "flow_work",
    "focus_matrix",
    "head_max",
    "head_mean",
    "head_stats",
    "layer_attention",
    "rollout",
    "top_heads",
]


# ---------------------------------------------------------------------------------------------
# checks


def _as_pattern(pattern: np.ndarray, min_ndim: int, name: str = "pattern") -> np.ndarray:
    """Float array of at least ``min_ndim`` dims with finite values (NaN in → ValueError, not NaN out)."""
    arr = np.asarray(pattern)
    if arr.ndim < min_ndim:
        raise ValueError(f"{name} needs at least {min_ndim} dimensions, got shape {arr.shape}")
    if not np.issubdtype(arr.dtype, np.floating):
        arr = arr.astype(np.float32)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values")
    return arr


def _as_stack(P: np.ndarray, square: bool = True) -> np.ndarray:
    """A ``[layers, heads, query, key]`` stack; self-attention (query == key) when ``square``."""
    arr = _as_pattern(P, 4, "P")
    if arr.ndim != 4:
        raise ValueError(f"expected [layers, heads, query, key], got shape {arr.shape}")
    if square and arr.shape[-1] != arr.shape[-2]:
        raise ValueError(
            f"needs self-attention (query = key tokens), got {arr.shape[-2]} queries × {arr.shape[-1]} keys"
        )
    return arr


def _flags(special: Sequence[bool] | None, n: int) -> np.ndarray:
    if special is None:
        return np.zeros(n, dtype=bool)
    flags = np.asarray(list(special), dtype=bool)
    if flags.shape != (n,):
        raise ValueError(f"special has {flags.size} entries for {n} tokens")
    return flags


def _normalize_rows(x: np.ndarray) -> np.ndarray:
    """Rows divided by their sum; rows summing to 0 stay 0 (no 0/0)."""
    total = x.sum(axis=-1, keepdims=True)
    return np.divide(x, total, out=np.zeros_like(x), where=total > 0)


# ---------------------------------------------------------------------------------------------
# views of one layer


def head_mean(pattern: np.ndarray) -> np.ndarray:
    """Average over heads: ``[heads, q, k] → [q, k]`` (or ``[layers, heads, q, k] → [layers, q, k]``).

    The mean of row-stochastic rows is row-stochastic, so this is itself an attention pattern: what
    the layer does "on average", which is what rollout and flow build on.
    """
    arr = _as_pattern(pattern, 3)
    return arr.mean(axis=-3)


def head_max(pattern: np.ndarray) -> np.ndarray:
    """Elementwise maximum over heads: ``[heads, q, k] → [q, k]`` (or per layer for a stack).

    Shows a link that *any* head makes, even if the other heads ignore it (the mean dilutes a
    single sharp head by 1/heads). It is **not** an attention pattern: rows do not sum to 1 (they
    sum to between 1 and the number of heads), so label its colour scale "max weight", not
    "probability".
    """
    arr = _as_pattern(pattern, 3)
    return arr.max(axis=-3)


def drop_special(
    pattern: np.ndarray, special: Sequence[bool], key_special: Sequence[bool] | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Remove special-token rows *and* columns, then renormalize each row to sum to 1.

    [CLS]/[SEP] often take most of the weight (a "no-op" sink, Clark et al. 2019), which squeezes
    everything else into the bottom of the colour scale. Renormalizing answers "among the real
    tokens, where does this one look?". A row whose remaining weights are all 0 stays 0.

    ``pattern`` is ``[..., q, k]``; ``special`` flags the queries and, for self-attention, the keys
    too; cross-attention passes the keys' own flags as ``key_special``. Returns the new pattern
    (same dtype) and the original positions of the kept queries and keys (to pick labels).
    """
    arr = _as_pattern(pattern, 2)
    rows = np.flatnonzero(~_flags(special, arr.shape[-2]))
    cols = np.flatnonzero(~_flags(special if key_special is None else key_special, arr.shape[-1]))
    sub = arr[..., rows[:, None], cols[None, :]]
    return _normalize_rows(sub).astype(arr.dtype, copy=False), rows, cols


# ---------------------------------------------------------------------------------------------
# rollout and flow (Abnar & Zuidema 2020)


def layer_attention(P: np.ndarray, add_residual: bool = True) -> np.ndarray:
    """Per layer: heads averaged, plus the residual connection, rows renormalized → ``[layers, q, k]``.

    A layer's output is ``x + attention(x)``, so each token keeps its own value alongside what it
    gathered; Abnar & Zuidema model that as ``A = 0.5·W + 0.5·I``. Rows sum to 1 (a fully masked
    row becomes the identity row: the token only carries itself). Float64, for the products that
    follow. With ``add_residual=False`` it is ``W`` alone and masked rows stay 0.
    """
    arr = _as_stack(P)
    W = arr.astype(np.float64).mean(axis=1)  # (L, n, n)
    if add_residual:
        W = 0.5 * W + 0.5 * np.eye(W.shape[-1])
    return _normalize_rows(W)


def rollout(P: np.ndarray, add_residual: bool = True) -> np.ndarray:
    """Attention rollout after every layer: ``R_l = A_l · R_{l-1}``, ``R_0 = A_0`` → ``[layers, q, k]``.

    ``R_l[q, k]`` estimates how much of token ``q``'s representation after layer ``l`` comes from
    input token ``k``, assuming attention mixes values linearly (it ignores the values and the
    MLPs). Rows sum to 1 (except rows that are masked everywhere when ``add_residual=False``).
    """
    A = layer_attention(P, add_residual)
    R = np.empty_like(A)
    acc = np.eye(A.shape[-1])
    for layer in range(A.shape[0]):
        acc = A[layer] @ acc  # (n, n)
        R[layer] = acc
    return R.astype(np.float32)


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


# Cost model, measured: max-flow time grows with (number of max-flows) × (edges of one max-flow's
# graph) = flow_work(). FLOW_SECONDS_PER_WORK is the slowest rate measured on this project's 2-core
# Xeon machines (one sharp random head per layer needs the most augmenting paths; 12 averaged
# heads run 2-3× faster). FLOW_MAX_WORK caps the worst allowed input at ~1.5 s by that rate
# (measured worst: 0.7 s for 6 layers × 23 tokens, 0.9 s for one query row of 67 tokens), so it
# stays under ~3 s on a machine twice as slow. Limits: 6 layers 23 tokens (67 for one query
# row), 12 layers 18 (49), 3 layers 32 (107).
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
    Each phase: BFS levels in the residual graph, then one depth-first blocking flow that sends
    flow down several branches per visit (a shared path prefix is walked once) and marks dead
    ends. Recursion depth is the BFS distance to the sink (< number of nodes).
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
        pointer = [0] * n_nodes

        def push(u: int, amount: float) -> float:
            edges, heads = adj[u], adj_to[u]
            nl = level[u] + 1
            i, m = pointer[u], len(edges)
            sent = 0.0
            while i < m:
                v = heads[i]
                if level[v] == nl:
                    e = edges[i]
                    c = cap[e]
                    if c > _EPS:
                        want = amount - sent
                        if want > c:
                            want = c
                        got = want if v == t else push(v, want)
                        if got > 0.0:
                            cap[e] = c - got
                            cap[e ^ 1] += got
                            sent += got
                            if amount - sent <= _EPS:
                                pointer[u] = i
                                return sent
                i += 1
            pointer[u] = i
            level[u] = -1  # dead end for the rest of this phase
            return sent

        pushed = push(s, bound - flow)
        if pushed <= 0.0:
            break
        flow += pushed
    return flow


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
        # the blocking-flow DFS recurses once per BFS level (≤ nodes; ~layers in practice). Only
        # ever raised, never restored: lowering it could break a concurrent call in another thread.
        if sys.getrecursionlimit() < graph.n_nodes + 500:
            sys.setrecursionlimit(graph.n_nodes + 500)
        flow = np.array([[graph.max_flow(i, j, bounds[i, j]) for j in range(n)] for i in rows])
        flow = flow.reshape(len(rows), n)
    if normalize:
        flow = _normalize_rows(flow)
    return flow.astype(np.float32)


# ---------------------------------------------------------------------------------------------
# per-head statistics and roles

# Role thresholds, applied in this order to the means over ordinary (non-special) query rows:
# 1. the largest of the shares on the previous token, the token itself, the next token and the
#    special tokens (the first token when there are none), if it is ≥ ROLE_SHARE: "previous-token",
#    "self", "next-token", "special-token sink" (the "more than half" criterion Clark et al. 2019
#    use for BERT's positional and [SEP] heads);
# 2. "positional" if one fixed relative offset other than −1/0/+1 gets ≥ ROLE_SHARE;
# 3. "broad" if the normalized entropy is ≥ BROAD_ENTROPY (uniform over the visible keys = 1);
# 4. otherwise "mixed".
ROLE_SHARE = 0.5
BROAD_ENTROPY = 0.8
ROLES = ("previous-token", "next-token", "self", "special-token sink", "positional", "broad", "mixed", "none")


def head_stats(P: np.ndarray, special: Sequence[bool] | None = None) -> list[dict]:
    """One row per (layer, head) with what the head does and a role label; sortable as a table.

    Statistics are means over the *ordinary* query rows (not special tokens; all-zero rows skipped),
    because special tokens' own rows behave differently and would blur the labels. Each row is
    divided by its sum first. Keys of every dict:

    - ``layer``, ``head``: 0-indexed.
    - ``entropy``: mean row entropy in **bits** (uniform over n keys = log2 n).
    - ``entropy_norm``: mean of entropy / log2(keys the row may see), in [0, 1]; in a causal stack
      (everything above the diagonal exactly 0) row q may see q+1 keys, otherwise n.
    - ``distance``: mean attention distance Σ_k w·|q−k|, in tokens.
    - ``special``, ``previous``, ``self``, ``next``: mean share of weight on special tokens, on
      k = q−1, k = q and k = q+1 (previous/next over the rows that have such a neighbour).
    - ``first``: mean share on the first token (GPT-2 has no [CLS] and parks weight on token 0).
    - ``offset``, ``offset_share``: the relative offset k−q with the largest mean share, and that
      share (for |offset| ≥ 2, rows where q+offset falls outside the sentence count as 0, so a
      single row cannot make a fixed-offset head).
    - ``role``: one of :data:`ROLES`, see :data:`ROLE_SHARE`; "none" when there is nothing to
      classify (fewer than 2 tokens, or no ordinary row with any weight).
    """
    arr = _as_stack(P)
    L, H, n, _ = arr.shape
    flags = _flags(special, n)
    pos = np.arange(n)
    causal = not np.any(np.triu(arr, 1))
    visible = (pos + 1) if causal else np.full(n, n)  # keys row q may see
    rel = pos[None, :] - pos[:, None]  # rel[q, k] = k − q
    offsets = np.arange(-(n - 1), n)  # index d + n − 1 holds offset d

    keys = ("entropy", "entropy_norm", "distance", "special", "first", "previous", "self", "next")

    table: list[dict] = []
    for layer in range(L):
        for head in range(H):
            W = arr[layer, head].astype(np.float64)
            total = W.sum(axis=1)
            rows = np.flatnonzero((total > 1e-6) & ~flags)
            stats = dict.fromkeys(keys, 0.0)
            stats.update(offset=0, offset_share=0.0)
            far = 0.0  # best share at a fixed offset other than −1, 0, +1
            if rows.size:
                w = W[rows] / total[rows, None]  # (r, n)
                logs = np.log2(w, out=np.zeros_like(w), where=w > 0)
                entropy = -(w * logs).sum(axis=1)
                vis = visible[rows]
                norm = entropy[vis > 1] / np.log2(vis[vis > 1])
                d = rel[rows].ravel() + n - 1
                summed = np.bincount(d, weights=w.ravel(), minlength=offsets.size)
                counted = np.bincount(d, minlength=offsets.size)
                near = summed / np.maximum(counted, 1)  # mean over rows that have that neighbour
                share = np.where(np.abs(offsets) <= 1, near, summed / rows.size)
                best = int(np.argmax(share))
                if n > 2:
                    far = float(share[np.abs(offsets) >= 2].max())
                stats.update(
                    entropy=float(entropy.mean()),
                    entropy_norm=float(np.clip(norm.mean(), 0.0, 1.0)) if norm.size else 0.0,
                    distance=float((w * np.abs(rel[rows])).sum(axis=1).mean()),
                    special=float(w[:, flags].sum(axis=1).mean()),
                    first=float(w[:, 0].mean()),
                    previous=float(near[n - 2]) if n > 1 else 0.0,
                    self=float(near[n - 1]),
                    next=float(near[n]) if n > 1 else 0.0,
                    offset=int(offsets[best]),
                    offset_share=float(share[best]),
                )
            role = _role(stats, far, flags.any()) if n >= 2 and rows.size else "none"
            table.append({"layer": layer, "head": head, **stats, "role": role})
    return table


def _role(stats: dict, far: float, has_special: bool) -> str:
    shares = {
        "previous-token": stats["previous"],
        "self": stats["self"],
        "next-token": stats["next"],
        # without special tokens (GPT-2) the first token plays the sink (Xiao et al. 2023)
        "special-token sink": stats["special"] if has_special else stats["first"],
    }
    role, best = max(shares.items(), key=lambda kv: kv[1])
    if best >= ROLE_SHARE:
        return role
    if far >= ROLE_SHARE:
        return "positional"
    if stats["entropy_norm"] >= BROAD_ENTROPY:
        return "broad"
    return "mixed"


# ---------------------------------------------------------------------------------------------
# token focus and comparison


def _check_index(index: int, n: int, what: str) -> int:
    index = int(index)
    if not 0 <= index < n:
        raise IndexError(f"{what} index {index} out of range for {n} tokens")
    return index


def focus_matrix(P: np.ndarray, query_index: int, key_index: int) -> np.ndarray:
    """``[layers, heads]``: the weight from one query token to one key token in every head.

    Answers "which heads link *these* two tokens" at a glance (e.g. a pronoun and its referent).
    Works for cross-attention too (query and key indices then refer to different sequences).
    """
    arr = _as_stack(P, square=False)
    q = _check_index(query_index, arr.shape[2], "query")
    k = _check_index(key_index, arr.shape[3], "key")
    return arr[:, :, q, k].copy()


def top_heads(P: np.ndarray, query_index: int, key_index: int, n: int = 5) -> list[tuple[int, int, float]]:
    """The ``n`` heads with the largest weight from query to key: ``(layer, head, weight)``, largest first.

    Ties keep (layer, head) order, so the list is stable between runs.
    """
    focus = focus_matrix(P, query_index, key_index)
    flat = focus.ravel()
    order = np.argsort(-flat, kind="stable")[: max(int(n), 0)]
    H = focus.shape[1]
    return [(int(i // H), int(i % H), float(flat[i])) for i in order]


def difference(P_a: np.ndarray, P_b: np.ndarray) -> np.ndarray:
    """``P_a − P_b`` for two runs with the same shape (e.g. "The cat sat" vs "The dog sat").

    Positive where sentence A attends more. Only position-by-position comparison is meaningful, so
    sentences must tokenize to the same number of tokens; aligning different tokenizations is out
    of scope and refused.
    """
    a = _as_pattern(P_a, 1, "P_a")
    b = _as_pattern(P_b, 1, "P_b")
    if a.shape != b.shape:
        raise ValueError(
            f"cannot compare patterns of shapes {a.shape} and {b.shape}: the two sentences must have "
            "the same number of tokens (and the same model)"
        )
    return (a.astype(np.float32) - b.astype(np.float32)).astype(np.float32)

