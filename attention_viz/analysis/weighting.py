"""The "weighting" a pattern view draws: the attention weights α_ij, or the value-weighted norms
‖α_ij f_h(x_j)‖ of Kobayashi et al. (2020), where a large weight on a near-zero vector counts for
little. Both are ``[heads, query, key]`` arrays of a result, under ``pattern`` and ``value_norm``.

Or a layer-level context-mixing map, ``[query, key]`` under ``alti`` or ``value_zeroing``: ALTI
(Ferrando et al. 2022) and value zeroing (Mohebbi et al. 2023) measure the whole layer, not a head,
so every head of a layer draws its layer's map (and the views say so); across layers they compose
by plain products (:func:`attention_viz.analysis.alti.rollout_maps`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..errors import ModelError
from ..core.names import Group, parse_hook_name
from ..core.result import AttentionResult
from .alti import rollout_maps
from .checks import normalize_rows
from .composition import across_layers
from .value_norms import value_norm_arrays

WEIGHTINGS = ("weights", "norms", "alti", "value_zeroing")  # as spelled in links (``weighting=norms``)
WEIGHTING_NAMES = {"weights": "attention weights", "norms": "value-weighted norms", "alti": "ALTI",
                   "value_zeroing": "value zeroing"}
QUANTITIES = {"weights": "attention weight", "norms": "value-weighted norm", "alti": "ALTI contribution",
              "value_zeroing": "value-zeroing score"}  # what one cell holds
# What each weighting shows, in a few lines under the choice: the formula, and what changes from the weights
EXPLANATIONS = {
    "weights": "Attention weights α_ij = softmax_j(q_i·k_j / √d_k): how much query i looks at key j. Each row sums to 1.",
    "norms": "Value-weighted norms ‖α_ij f(x_j)‖ with f(x_j) = (x_j W_V + b_V) W_O, what key j's value adds to query i "
             "through this head (Kobayashi et al. 2020). A large weight on a short vector counts for little, and the "
             "rows no longer sum to 1: their totals differ from row to row and from head to head.",
    "alti": "ALTI (Ferrando et al. 2022): each key's share of query i's output of the whole attention block (every head, "
            "the residual and the layer norm), from how close each key's part T_i(x_j) lies to that output. One map "
            "per layer, the same for every head; each row sums to 1, the residual counted as the token's own share.",
    "value_zeroing": "Value zeroing (Mohebbi et al. 2023): 1 − cos between query i's output of the layer and that output "
                     "recomputed with key j's values zeroed in every head, each row divided by its sum. One map per "
                     "layer, the same for every head; each row sums to 1.",
}
KINDS = {"weights": "pattern", "norms": "value_norm", "alti": "alti", "value_zeroing": "value_zeroing"}
LAYER_LEVEL = ("alti", "value_zeroing")  # one [query, key] map per layer, whatever the head
# Value zeroing re-runs every layer on T copies of its input, T² token rows, so the views stop at a
# length a page can wait for (the command line and the API do not; benchmarks.mixing times it)
ZEROING_TOKENS = 128


def value_norms_or_reason(
    result: AttentionResult, output_projection: Callable[[Group, int], np.ndarray | None]
) -> dict[str, np.ndarray] | str:
    """Every pattern's value-weighted norms (named ``...value_norm``), from the captured values and
    the backend's W_O; or, when they cannot be computed, a sentence saying why."""
    try:
        return value_norm_arrays(result, output_projection)
    except ValueError:  # no values captured, W_O unknown, or shapes that do not belong together
        return (f"{result.model} does not give the values and the output projection (W_O) of its heads, "
                "which value-weighted norms are made of: showing attention weights.")


def mixing_or_reason(
    result: AttentionResult, context_mixing: Callable[[AttentionResult, tuple[str, ...]], dict[str, np.ndarray]],
    measure: str,
) -> dict[str, np.ndarray] | str:
    """Every self-attention layer's ``measure`` map (ALTI or value zeroing) from the backend's
    ``context_mixing``, or the one sentence saying why there is none."""
    longest = max(len(result.tokens), 0 if result.target_tokens is None else len(result.target_tokens))
    if measure == "value_zeroing" and longest > ZEROING_TOKENS:
        return (f"value zeroing re-runs every layer once per token: the views compute it up to {ZEROING_TOKENS} "
                f"tokens (this input has {longest}); showing attention weights.")
    try:
        return context_mixing(result, (measure,))
    except ModelError as error:
        return f"{error}: showing attention weights."


@dataclass(frozen=True)
class Weighted:
    """A result and which of its arrays to draw."""

    result: AttentionResult  # holds the arrays of ``weighting`` beside what the run captured
    weighting: str  # "weights" or "norms": what is drawn (after any fallback)
    note: str = ""  # why value-weighted norms were asked for but weights are drawn

    @property
    def kind(self) -> str:
        return KINDS[self.weighting]

    @property
    def quantity(self) -> str:
        """What a cell holds: "attention weight" or "value-weighted norm" (colour bars, hovers)."""
        return QUANTITIES[self.weighting]

    @property
    def suffix(self) -> str:
        """Added to figure titles when anything but the weights is drawn (what every view drew before)."""
        return "" if self.weighting == "weights" else f" · {WEIGHTING_NAMES[self.weighting]}"

    @property
    def layer_level(self) -> bool:
        """A measure of whole layers: every head of a layer draws the same map."""
        return self.weighting in LAYER_LEVEL

    def stack(self, group: Group) -> np.ndarray:
        """``[layers, heads, query, key]`` of the drawn quantity."""
        return self.result.stack(self.kind, *group)

    def layer(self, group: Group, layer: int) -> np.ndarray:
        return self.result.array(group, layer, self.kind)

    def shares(self, group: Group) -> np.ndarray:
        """What rollout and flow compose: the weights, or each norm row divided by its sum (the share
        of the row's total norm each key has; rollout and flow need rows that sum to 1)."""
        stack = self.stack(group)
        return stack if self.weighting != "norms" else normalize_rows(stack).astype(np.float32)

    def on(self, group: Group) -> Weighted:
        """This weighting for the attention ``group``, or its attention weights with a note where a
        layer-level measure has no maps (ALTI and value zeroing measure self-attention layers, so
        cross-attention has none)."""
        if not self.layer_level or self.result.has(group, 0, self.kind):
            return self
        return Weighted(self.result, "weights", f"{WEIGHTING_NAMES[self.weighting]} measures self-attention layers: "
                                                "cross-attention shows its attention weights.")

    def across_layers(self, group: Group, query: int) -> tuple[np.ndarray, np.ndarray]:
        """(``query``'s row in every layer, heads averaged, ``[layers, key]``; the composition through
        every layer ``[query, key]``): attention rollout (½W + ½I) for weights and norms; for ALTI and
        value zeroing the plain product of the layers' maps, which already hold the residual."""
        if not self.layer_level:
            return across_layers(self.stack(group), query, self.shares(group) if self.weighting == "norms" else None)
        maps = self.stack(group)[:, 0]  # (layers, q, k): every head holds its layer's map
        return maps[:, query, :], rollout_maps(maps)[-1].astype(np.float32)


def weighted(result: AttentionResult, weighting: str, norms: dict[str, np.ndarray] | str | None = None) -> Weighted:
    """``result`` to draw under ``weighting``; ``norms`` are :func:`value_norms_or_reason`'s answer
    for ``"norms"``, :func:`mixing_or_reason`'s for ALTI and value zeroing (a reason falls back to
    the weights with that note). A layer's map is repeated over its heads, so every head view draws it."""
    if weighting == "weights":
        return Weighted(result, "weights")
    if not isinstance(norms, dict):
        verb = "are" if weighting == "norms" else "is"
        fallback = f"{WEIGHTING_NAMES[weighting]} {verb} not available: showing attention weights."
        return Weighted(result, "weights", norms or fallback)
    if weighting in LAYER_LEVEL:
        norms = {name: np.repeat(layer_map[None], _heads(result, name), axis=0) for name, layer_map in norms.items()}
    return Weighted(AttentionResult(result.model, result.tokens, {**result.arrays, **norms}, result.target_tokens,
                                    result.meta), weighting)


def _heads(result: AttentionResult, name: str) -> int:
    group, layer, _ = parse_hook_name(name)
    return result.array(group, layer, "pattern").shape[0]
