"""The logit lens (nostalgebraist 2020) as plain data: what a decoder would predict next if its
residual stream stopped after each layer.

The stream entering every layer (the embeddings first) and the one leaving the last layer are each
put through the model's own final norm and unembedding, softmax over the vocabulary: per row (a
depth) and position, the most likely next tokens and, when an answer is named, its probability.
The last row is the model's own output. No torch here: :mod:`attention_viz.backends.logit_lens`
measures it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


def row_labels(layers: int) -> tuple[str, ...]:
    """"embeddings", "after layer 0", …, "after layer N−1 (output)"."""
    return ("embeddings", *(f"after layer {i}" for i in range(layers - 1)), f"after layer {layers - 1} (output)")


@dataclass(frozen=True)
class LogitLens:
    """Top next tokens at every depth and position of one text."""

    model: str
    tokens: tuple[str, ...]  # the input, by position
    rows: tuple[str, ...]  # depths: row_labels(layers)
    top_ids: np.ndarray  # (rows, positions, k) token ids, most likely first
    top_tokens: tuple[tuple[tuple[str, ...], ...], ...]  # the same as text
    top_probs: np.ndarray  # (rows, positions, k)
    answer: str | None = None
    answer_probs: np.ndarray | None = None  # (rows, positions): p(answer) at each depth and position

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "tokens": list(self.tokens), "rows": list(self.rows),
            "top_tokens": [[list(cell) for cell in row] for row in self.top_tokens],
            "top_probs": np.round(self.top_probs, 6).tolist(),
        }
        if self.answer is not None and self.answer_probs is not None:
            out["answer"] = self.answer
            out["answer_probs"] = np.round(self.answer_probs, 6).tolist()
        return out

    def first_row_predicting(self, position: int, token_id: int) -> int | None:
        """The shallowest row whose top token at ``position`` is ``token_id`` (None: no row)."""
        rows = np.flatnonzero(self.top_ids[:, position, 0] == token_id)
        return int(rows[0]) if rows.size else None
