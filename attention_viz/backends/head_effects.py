"""Run a model with and without some heads and measure what changed: the functions behind the
ablation page and the ``run --ablate`` command. Each returns plain data (numpy, dicts); the forwards
go through the backend interface (``Backend.forward``), the measures are :mod:`analysis.ablation`.

What "changed" means depends on the model kind:

* encoder (``minilm``): cosine between the mean-pooled sentence embeddings, and how far each
  token's final representation moved (1 − cosine);
* encoder–decoder (``toy-translate``): the greedy translation before/after, and the
  log-probability of each word of the original translation, teacher-forced, before/after;
* decoder (``induction``): the next-token loss before/after.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..analysis.ablation import (
    Ablation,
    Head,
    embedding_cosine,
    format_head,
    loss_change,
    mean_contexts,
    random_head_sets,
    token_movement,
)
from ..analysis.focus import top_heads
from .base import Backend, Outputs
from ..core.names import ENCODER_SELF
from ..core.result import AttentionResult


def make_ablation(backend: Backend, heads: Sequence[Head], mode: str = "zero", probes: Sequence[str] | None = None) -> Ablation:
    """An :class:`Ablation` of ``heads``; mode "mean" first runs the probe set (default: the
    backend's built-in probes) to get every head's mean context."""
    if mode != "mean":
        return Ablation(tuple(heads), mode)
    texts = list(probes) if probes is not None else backend.probe_texts()
    means = mean_contexts(backend.run(text, kinds=("context",)) for text in texts)
    return Ablation(tuple(heads), "mean", means)


@dataclass
class Comparison:
    """One text, run as is and without the ablated heads."""

    ablation: Ablation
    before: AttentionResult
    after: AttentionResult
    outputs_before: Outputs
    outputs_after: Outputs
    # encoder–decoder: the original translation teacher-forced through the ablated model
    forced_after: Outputs | None = None

    def summary(self) -> dict:
        """The numbers a page or the CLI prints (JSON-ready)."""
        out: dict = {"ablation": self.ablation.to_dict()}
        if self.outputs_before.log_probs is None:  # encoder
            movement = token_movement(self.outputs_before.hidden, self.outputs_after.hidden)
            out["embedding_cosine"] = embedding_cosine(self.outputs_before.hidden, self.outputs_after.hidden)
            out["token_movement"] = dict(zip(self.before.tokens.labels, movement.round(6).tolist()))
            out["token_movement_list"] = movement.round(6).tolist()
            return out
        if "translation" in self.before.meta:  # encoder–decoder, greedy
            forced = self.forced_after if self.forced_after is not None else self.outputs_after
            out["translation_before"] = self.before.meta["translation"]
            out["translation_after"] = self.after.meta["translation"]
            out["words"] = list(self.before.meta["predicted"])
            out["log_prob_before"] = self.outputs_before.log_probs.round(6).tolist()
            out["log_prob_after"] = forced.log_probs.round(6).tolist()
            out.update(loss_change(self.outputs_before.log_probs, forced.log_probs))
            return out
        out.update(loss_change(self.outputs_before.log_probs, self.outputs_after.log_probs))
        out["log_prob_before"] = self.outputs_before.log_probs.round(6).tolist()
        out["log_prob_after"] = self.outputs_after.log_probs.round(6).tolist()
        return out


def compare(
    backend: Backend, text: str, ablation: Ablation, target: str | None = None, kinds: Sequence[str] = ("pattern",)
) -> Comparison:
    """``text`` through ``backend`` as is and with ``ablation``. An encoder–decoder model without a
    target translates greedily both times, and the first translation is also teacher-forced through
    the ablated model, so each of its words has a log-probability before and after."""
    if not backend.can_ablate:
        raise backend.ablation_refusal()
    before, outputs_before = backend.forward(text, target, kinds)
    after, outputs_after = backend.forward(text, target, kinds, ablation=ablation)
    forced = None
    if target is None and "translation" in before.meta:
        words = [w for w in before.meta["predicted"] if w != "<eos>"]
        if words:
            _, forced = backend.forward(text, " ".join(words), (), ablation=ablation)
            _, plain = backend.forward(text, " ".join(words), ())
            outputs_before = Outputs(outputs_before.hidden, plain.log_probs)
    return Comparison(ablation, before, after, outputs_before, outputs_after, forced)


def coreference_study(
    backend: Backend,
    text: str,
    query: int,
    key: int,
    k: int = 3,
    draws: int = 20,
    mode: str = "zero",
    seed: int = 0,
) -> dict:
    """Does removing the ``k`` heads where token ``query`` ("it") attends most to ``key`` ("animal")
    move the query's final representation more than removing ``k`` random other heads?

    Movement = 1 − cosine of the query token's final hidden state before/after. Returns the top
    heads, their movement, the movements of ``draws`` random sets (same k, top heads excluded),
    and the share of random sets that moved it at least as much.
    """
    before, outputs = backend.forward(text)
    stack = before.stack("pattern", *ENCODER_SELF)  # (layers, heads, T, T)
    top = [(ENCODER_SELF, layer, head) for layer, head, _ in top_heads(stack, query, key, n=k)]
    candidates = [(ENCODER_SELF, layer, head) for layer in range(stack.shape[0]) for head in range(stack.shape[1])]
    probes = backend.probe_texts() if mode == "mean" else None
    means = make_ablation(backend, candidates, "mean", probes).means if mode == "mean" else None

    def movement(heads: Sequence[Head]) -> float:
        _, after = backend.forward(text, kinds=(), ablation=Ablation(tuple(heads), mode, means))
        return float(token_movement(outputs.hidden, after.hidden)[query])

    top_movement = movement(top)
    random_movements = [movement(heads) for heads in random_head_sets(candidates, k, draws, seed, exclude=top)]
    return {
        "query": before.tokens.labels[query],
        "key": before.tokens.labels[key],
        "mode": mode,
        "top_heads": [format_head(h) for h in top],
        "top_weights": [round(float(stack[layer, head, query, key]), 6) for _, layer, head in top],
        "top_movement": top_movement,
        "random_movements": random_movements,
        "random_mean": float(np.mean(random_movements)),
        "random_at_least_as_large": float(np.mean([m >= top_movement for m in random_movements])),
    }
