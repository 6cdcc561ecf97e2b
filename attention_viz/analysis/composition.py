"""What the "across layers" page shows, computed without Streamlit: one token's row in every layer,
the rollout after the last layer, and attention flow (or one token's flow, or why neither)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .flow import FlowTooLarge, attention_flow
from .rollout import rollout


@dataclass(frozen=True)
class FlowShown:
    matrix: np.ndarray | None  # [rows, keys], float32; None when even one row is too large
    rows: list[int] | None  # the query positions of ``matrix``'s rows; None = every position
    note: str  # what the page must say ("" when the whole flow is shown)


def across_layers(stack: np.ndarray, query: int, shares: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``stack`` [layers, heads, n, n] → (query's row in each layer, heads averaged [layers, n];
    rollout after the last layer [n, n]). ``shares``: what rollout multiplies when ``stack``'s rows
    are not distributions (value-weighted norms, rows divided by their sum); default ``stack``."""
    return stack.mean(axis=1)[:, query, :], rollout(stack if shares is None else shares)[-1]


def flow_for(stack: np.ndarray, query: int) -> FlowShown:
    """Attention flow of every position; when that is too much work, of ``query`` alone."""
    try:
        return FlowShown(np.asarray(attention_flow(stack), dtype=np.float32), None, "")
    except FlowTooLarge as too_large:
        try:
            row = np.asarray(attention_flow(stack, queries=[query]), dtype=np.float32).reshape(1, -1)
            return FlowShown(row, [query], f"{too_large} Showing the flow of one token only.")
        except FlowTooLarge as still_too_large:
            return FlowShown(None, None, f"Attention flow is not computed here: {still_too_large}")
