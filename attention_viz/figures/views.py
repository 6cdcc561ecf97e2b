"""The exportable views by name, for the command line: result in, one figure out."""

from __future__ import annotations

from collections.abc import Callable

import plotly.graph_objects as go

from ..analysis import rollout
from ..core.result import AttentionResult
from ..analysis.selection import Choice, Group, displayed
from .grid import heads_grid
from .heatmap import attention_heatmap


def _head(result: AttentionResult, group: Group, layer: int, head: int | str) -> go.Figure:
    shown = displayed(result, Choice(group, layer, head))
    return attention_heatmap(shown.matrix, shown.query_labels, shown.key_labels,
                             title=f"{result.model}: layer {layer}, head {head}")


def _grid(result: AttentionResult, group: Group, layer: int, head: int | str) -> go.Figure:
    return heads_grid(result.stack("pattern", *group), title=f"{result.model}: every head")


def _rollout(result: AttentionResult, group: Group, layer: int, head: int | str) -> go.Figure:
    labels = list(result.tokens.labels if group[0] == "encoder" or result.target_tokens is None
                  else result.target_tokens.labels)
    rolled = rollout(result.stack("pattern", *group))
    return attention_heatmap(rolled[layer], labels, labels, title=f"{result.model}: rollout after layer {layer}")


VIEWS: dict[str, Callable[[AttentionResult, Group, int, int | str], go.Figure]] = {
    "head": _head,
    "grid": _grid,
    "rollout": _rollout,
}


def export_figure(result: AttentionResult, view: str, layer: int = 0, head: int | str = 0,
                  group: Group | None = None) -> go.Figure:
    """The figure of ``view``; layer and head are checked against the result."""
    if view not in VIEWS:
        raise ValueError(f"unknown view {view!r}; choose from {', '.join(VIEWS)}")
    group = group or result.attentions()[0]
    if view == "rollout" and group[1] == "cross_attn":
        raise ValueError("rollout needs a self-attention")
    n_layers = result.n_layers(*group)
    n_heads = result.pattern(group, 0).shape[0]
    if not 0 <= layer < n_layers:
        raise ValueError(f"--layer must be in 0..{n_layers - 1}")
    if head not in ("mean", "max") and not 0 <= int(head) < n_heads:
        raise ValueError(f"--head must be in 0..{n_heads - 1}, mean or max")
    return VIEWS[view](result, group, layer, head)
