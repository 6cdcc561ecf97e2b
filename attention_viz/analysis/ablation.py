"""Head ablation, the plain-data side: which heads to remove (and with what), and how far the
model's output moved when they were gone. The removal itself happens inside the forward
(:func:`attention_viz.core.hooks.ablate`); this module never touches torch.

A large attention weight is no proof that a head matters ("attention is not explanation"):
removing the head and measuring the output is. Zero ablation replaces the head's context (its
output before ``W_O``) with zeros; mean ablation replaces it with the head's mean context over a
probe set, which keeps the activation in the range the next layers were trained on (the usual
choice in circuit work, e.g. Wang et al. 2022). Per-head importance as in Michel et al. 2019
("Are sixteen heads really better than one?"): the drop of a metric when that head alone is removed.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..core.names import CROSS, DECODER_SELF, ENCODER_SELF, GROUPS, Group, hook_name, parse_hook_name
from ..core.result import AttentionResult

MODES = ("zero", "mean")
Head = tuple[Group, int, int]  # (attention, layer, head), 0-indexed
ATTENTIONS: dict[str, Group] = {"encoder": ENCODER_SELF, "decoder": DECODER_SELF, "cross": CROSS}
_ATTENTION_WORD = {group: word for word, group in ATTENTIONS.items()}


@dataclass(frozen=True)
class Ablation:
    """The heads one forward runs without.

    ``means`` (mode "mean"): context hook name → ``(heads, d_k)``, every head's mean context over a
    probe set (see :func:`mean_contexts`); only the removed heads' rows are used.
    """

    heads: tuple[Head, ...]
    mode: str = "zero"
    means: Mapping[str, np.ndarray] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"ablation must be one of {', '.join(MODES)}, got {self.mode!r}")
        object.__setattr__(self, "heads", tuple(sorted(set(self.heads), key=_head_order)))
        if self.mode == "mean":
            missing = [name for name in self.by_context() if self.means is None or name not in self.means]
            if missing:
                raise ValueError(f"mean ablation needs the mean context of {', '.join(missing)}")

    def by_context(self) -> dict[str, tuple[int, ...]]:
        """Context hook name → the removed heads of that attention."""
        out: dict[str, list[int]] = {}
        for group, layer, head in self.heads:
            out.setdefault(hook_name(group, layer, "context"), []).append(head)
        return {name: tuple(heads) for name, heads in out.items()}

    def replacement(self, name: str) -> np.ndarray | None:
        """``(removed heads, d_k)`` rows that replace the removed heads' context; None = zeros."""
        if self.mode == "zero":
            return None
        return np.asarray(self.means[name])[list(self.by_context()[name])]  # type: ignore[index]

    def describe(self) -> str:
        if not self.heads:
            return "no head removed"
        return f"{self.mode} ablation of " + ", ".join(format_head(h) for h in self.heads)

    def to_dict(self) -> dict:
        return {"mode": self.mode, "heads": [format_head(h) for h in self.heads]}


def _head_order(head: Head) -> tuple[int, int, int]:
    group, layer, index = head
    return GROUPS.index(group), layer, index


def format_head(head: Head) -> str:
    """(("encoder", "self_attn"), 2, 5) → ``encoder 2.5``."""
    group, layer, index = head
    return f"{_ATTENTION_WORD[group]} {layer}.{index}"


def parse_heads(spec: str, default: Group) -> tuple[Head, ...]:
    """``"2.5,3.1"`` (layer.head of the ``default`` attention) or ``"cross:1.2,decoder:0.3"``."""
    heads: list[Head] = []
    for item in (part.strip() for part in spec.split(",")):
        if not item:
            continue
        group = default
        if ":" in item:
            word, item = (s.strip() for s in item.split(":", 1))
            if word not in ATTENTIONS:
                raise ValueError(f"unknown attention {word!r} in {spec!r}; use {', '.join(ATTENTIONS)}")
            group = ATTENTIONS[word]
        layer, dot, head = item.partition(".")
        if not dot or not layer.isdigit() or not head.isdigit():
            raise ValueError(f"heads are layer.head pairs like 2.5 (0-indexed), got {item!r}")
        heads.append((group, int(layer), int(head)))
    if not heads:
        raise ValueError("no head given: write layer.head pairs like 2.5,3.1")
    return tuple(heads)


def mean_contexts(results: Iterable[AttentionResult]) -> dict[str, np.ndarray]:
    """Every head's mean context over all positions of all ``results`` (captured with kind "context"):
    context hook name → ``(heads, d_k)`` float32."""
    sums: dict[str, np.ndarray] = {}
    counts: dict[str, int] = {}
    for result in results:
        for name, array in result.arrays.items():
            if parse_hook_name(name)[2] != "context":
                continue
            sums[name] = sums.get(name, 0.0) + array.astype(np.float64).sum(axis=1)  # (heads, d_k)
            counts[name] = counts.get(name, 0) + array.shape[1]
    if not sums:
        raise ValueError("no context captured: run the probes with kinds=('context',)")
    return {name: (total / counts[name]).astype(np.float32) for name, total in sums.items()}


def all_heads(n_layers: int, n_heads: int, group: Group) -> list[Head]:
    return [(group, layer, head) for layer in range(n_layers) for head in range(n_heads)]


def random_head_sets(
    candidates: Sequence[Head], k: int, draws: int, seed: int = 0, exclude: Iterable[Head] = ()
) -> list[tuple[Head, ...]]:
    """``draws`` random sets of ``k`` heads from ``candidates`` minus ``exclude`` (the baseline for
    "do *these* heads matter more than any heads?")."""
    excluded = set(exclude)
    pool = [h for h in candidates if h not in excluded]
    if not 0 < k <= len(pool):
        raise ValueError(f"cannot draw {k} heads from {len(pool)}")
    rng = random.Random(seed)
    return [tuple(rng.sample(pool, k)) for _ in range(draws)]


# -- effects ------------------------------------------------------------------------------------


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    denominator = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(a @ b / denominator) if denominator > 0 else 0.0


def mean_pooled(hidden: np.ndarray) -> np.ndarray:
    """The sentence embedding of sentence-transformers' mean pooling: the average of every token's
    final hidden state ([CLS] and [SEP] included; one unpadded sentence). all-MiniLM-L6-v2 then
    L2-normalizes, which a cosine ignores."""
    return np.asarray(hidden, np.float64).mean(axis=0)


def embedding_cosine(before: np.ndarray, after: np.ndarray) -> float:
    """Cosine between the mean-pooled sentence embeddings of two runs (1 = unchanged direction)."""
    return cosine(mean_pooled(before), mean_pooled(after))


def token_movement(before: np.ndarray, after: np.ndarray) -> np.ndarray:
    """``(T,)`` how far each token's final representation moved: 1 − cosine(before, after)."""
    a, b = np.asarray(before, np.float64), np.asarray(after, np.float64)
    if a.shape != b.shape:
        raise ValueError(f"runs of different shapes {a.shape} and {b.shape} cannot be compared token by token")
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    cos = np.divide((a * b).sum(axis=1), norms, out=np.ones(len(a)), where=norms > 0)
    return 1.0 - cos


def loss_change(log_probs_before: np.ndarray, log_probs_after: np.ndarray) -> dict[str, float]:
    """Mean next-token loss (−log p, nats) before and after, and the difference (after − before)."""
    before = -float(np.mean(log_probs_before))
    after = -float(np.mean(log_probs_after))
    return {"loss_before": before, "loss_after": after, "change": after - before}
