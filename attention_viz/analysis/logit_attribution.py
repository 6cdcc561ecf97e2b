"""Direct logit attribution as plain data: how much each component writes the answer straight into
the logits (Elhage et al. 2021; Wang et al. 2022, §3.1; Nanda's "direct logit attribution").

A pre-LN decoder's final residual stream at one position is a sum: the embeddings (tokens plus
learned or sinusoidal positions), every head's output (its context times its rows of W_O), every
attention's output bias, every MLP's output. The final norm is linear once its scale is frozen at
the clean run's value s (LayerNorm: centre, divide by s, times its weight, plus its bias; RMSNorm:
divide by s, times its weight), so the logit difference logit(answer) − logit(wrong) splits into
one number per component:

    contribution(c) = (centre(c) / s ⊙ weight) · (W_U[answer] − W_U[wrong])

``rest`` holds what belongs to no head, MLP or embedding: the attention output biases (through the
same frozen norm), the norm's bias and the unembedding's bias (b_U[answer] − b_U[wrong]). The parts
add up to ``total``, the model's own logit difference. An attention-only model (``induction``) has
MLP entries of 0.

No torch here: :mod:`attention_viz.backends.logit_attribution` measures the numbers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class LogitAttribution:
    """One text's logit difference at one position, split by component."""

    model: str
    tokens: tuple[str, ...]
    position: int
    metric: str  # what was measured, in words
    heads: np.ndarray  # (layers, heads)
    mlp: np.ndarray  # (layers,)
    embed: float
    rest: float
    total: float  # the model's logit difference at ``position``

    @property
    def parts_sum(self) -> float:
        return float(self.heads.sum() + self.mlp.sum() + self.embed + self.rest)

    def to_dict(self) -> dict[str, Any]:
        """The CLI's JSON: exactly ``tokens, metric, heads, mlp, embed, rest, total``."""
        return {
            "tokens": list(self.tokens),
            "metric": self.metric,
            "heads": [[round(float(v), 6) for v in row] for row in self.heads],
            "mlp": [round(float(v), 6) for v in self.mlp],
            "embed": round(float(self.embed), 6),
            "rest": round(float(self.rest), 6),
            "total": round(float(self.total), 6),
        }

    def largest(self, k: int = 5) -> list[tuple[str, float]]:
        """The ``k`` components of largest absolute contribution, named "layer L head H", "mlp L",
        "embed" or "rest"."""
        named = [(f"layer {layer} head {head}", float(v)) for (layer, head), v in np.ndenumerate(self.heads)]
        if self.mlp.any():
            named += [(f"mlp {layer}", float(v)) for layer, v in enumerate(self.mlp)]
        named += [("embed", float(self.embed)), ("rest", float(self.rest))]
        return sorted(named, key=lambda item: -abs(item[1]))[:k]
