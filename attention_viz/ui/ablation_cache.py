"""The caches behind the head-ablation and head-detector pages, per process and shared by every
session (models and results are never mutated).

Every forward those pages cause goes through :func:`run` or a ``forward_*`` cache, keyed by what
it was computed from (model, text, target, kinds, removed heads, mode). :class:`CachedBackend` hands the
functions of :mod:`attention_viz.head_effects` a backend whose forwards are these, so a
comparison with a new set of heads runs only the ablated forward: the plain one, the probe runs
of mean ablation and every earlier set are already here.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from contextlib import nullcontext

import numpy as np
import streamlit as st

from ..analysis.ablation import Ablation, Head
from ..analysis.detector_view import detector_scores
from ..backends.base import Outputs
from ..backends.head_effects import Comparison, compare, coreference_study, make_ablation
from ..core.names import Group
from ..core.result import AttentionResult
from . import cache
from ..runtime.byte_cache import cached
from .heavy import heavy

MAX_FORWARDS = 256  # small runs: the probe sets (24 each), the study's random draws
HEAVY_ABLATION_TOKENS = 256  # a comparison's forwards under a second at 256 tokens; past that, seconds


@cached()
def run(model: str, text: str, target: str | None, kinds: tuple[str, ...]) -> AttentionResult:
    """A plain run (any model, ``hf:`` included)."""
    return cache.backend(model).run(text, target=target, kinds=kinds)


def _forward(
    model: str,
    text: str,
    target: str | None,
    kinds: tuple[str, ...],
    heads: tuple[Head, ...] | None,
    mode: str,
    _means: Mapping[str, np.ndarray] | None,
) -> tuple[AttentionResult, Outputs]:
    """A forward with outputs, without ``heads`` (None: all heads kept). ``_means`` is not part of
    the key: on these pages a mean ablation always uses the model's own probe means."""
    ablation = None if heads is None else Ablation(heads, mode, _means)
    return cache.backend(model).forward(text, target, kinds, ablation=ablation)


# Runs that keep the patterns of the user's text (up to ~75 MB each at 512 tokens) share the result
# cache's budget of bytes; the study's runs keep outputs only and are small.
@cached()
def forward_with_patterns(
    model: str,
    text: str,
    target: str | None,
    kinds: tuple[str, ...],
    heads: tuple[Head, ...] | None,
    mode: str,
    _means: Mapping[str, np.ndarray] | None,
) -> tuple[AttentionResult, Outputs]:
    return _forward(model, text, target, kinds, heads, mode, _means)


@st.cache_resource(max_entries=MAX_FORWARDS, show_spinner=False)
def forward_outputs_only(
    model: str,
    text: str,
    target: str | None,
    kinds: tuple[str, ...],
    heads: tuple[Head, ...] | None,
    mode: str,
    _means: Mapping[str, np.ndarray] | None,
) -> tuple[AttentionResult, Outputs]:
    return _forward(model, text, target, kinds, heads, mode, _means)


class CachedBackend:
    """The parts of a backend that head_effects uses, with every forward cached."""

    def __init__(self, model: str) -> None:
        self.name = model
        self._backend = cache.backend(model)
        self.can_ablate = self._backend.can_ablate

    def forward(
        self,
        text: str,
        target: str | None = None,
        kinds: Collection[str] = ("pattern",),
        ablation: Ablation | None = None,
    ) -> tuple[AttentionResult, Outputs]:
        cached = forward_with_patterns if "pattern" in kinds else forward_outputs_only
        if ablation is None:
            return cached(self.name, text, target, tuple(kinds), None, "zero", None)
        return cached(self.name, text, target, tuple(kinds), ablation.heads, ablation.mode, ablation.means)

    def run(self, text: str, target: str | None = None, kinds: Collection[str] = ("pattern",)) -> AttentionResult:
        return run(self.name, text, target, tuple(kinds))

    def probe_texts(self, n: int = 24, seed: int = 0) -> list[str]:
        return self._backend.probe_texts(n, seed)


@st.cache_resource(max_entries=8, show_spinner="Running the probe set for the heads' mean outputs…")
def probe_means(model: str) -> Mapping[str, np.ndarray]:
    """Every head's mean context over the model's probe set (what mean ablation puts in its place)."""
    with heavy("the probe set run for mean ablation"):
        return make_ablation(CachedBackend(model), (), "mean").means or {}


def ablation(model: str, heads: Sequence[Head], mode: str) -> Ablation:
    return Ablation(tuple(heads), mode, probe_means(model) if mode == "mean" else None)


@cached(lambda: st.spinner("Running the model without those heads…"))
def comparison(model: str, text: str, target: str | None, heads: Sequence[Head], mode: str) -> Comparison:
    """``text`` with all heads and without ``heads``; only forwards not made before are run. Past
    ``HEAVY_ABLATION_TOKENS`` the forwards take a heavy slot (ServerBusy, not cached, when none is free)."""
    long = len(cache.backend(model).tokenize(text)[0]) > HEAVY_ABLATION_TOKENS
    with heavy("removing heads from a text this long") if long else nullcontext():
        return compare(CachedBackend(model), text, ablation(model, heads, mode), target)


@st.cache_resource(max_entries=16, show_spinner="Removing the top heads, then random heads…")
def study(model: str, text: str, query: int, key: int, count: int, mode: str) -> dict:
    """The coreference study (see :func:`attention_viz.head_effects.coreference_study`)."""
    with heavy("the coreference study"):
        return coreference_study(CachedBackend(model), text, query, key, k=count, mode=mode)


@st.cache_resource(max_entries=8, show_spinner="Running the probe set…")
def probe_runs(model: str) -> list[AttentionResult]:
    """The model's built-in probes, each run once (the detector averages over them)."""
    backend = CachedBackend(model)
    with heavy("the probe set run for the detector"):
        return [backend.run(text) for text in backend.probe_texts()]


@st.cache_resource(max_entries=32, show_spinner=False)
def scores(model: str, identity: tuple, group: Group, offset: int, _user: AttentionResult) -> dict[str, np.ndarray]:
    """The detector's scores over the probes and the user's run (``identity``: what it was computed from)."""
    return detector_scores(probe_runs(model), _user, group, offset)
