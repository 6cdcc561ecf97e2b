"""Models, results and figures, cached per process and shared by every session.

Results, the arrays derived from them and figure specs share one budget of bytes,
``ATTENTION_VIZ_CACHE_MB`` (runtime/byte_cache.py), the least recently used going first: a count of
entries would let a few long texts of a large model fill the server's memory. Results are shared,
never copied (a copy per rerun would be up to ~75 MB of patterns at 512 tokens on every slider move):
they are never mutated. Figure specs are kept pickled, so each caller gets its own copy.
"""

from __future__ import annotations

import hashlib
import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import plotly.graph_objects as go
import streamlit as st
from streamlit import config

from ..runtime.access import beyond_loopback
from ..runtime.byte_cache import cached
from ..analysis.coreference import positions
from ..analysis.focus import top_heads
from ..analysis.weighting import mixing_or_reason, value_norms_or_reason
from ..backends.base import Backend
from ..backends.registry import load_backend
from ..core.names import ENCODER_SELF
from ..core.result import AttentionResult
from .heavy import heavy
from .private_api import figure_without_validation

HEAVY_ZEROING_TOKENS = 32  # value zeroing under a second at 32 tokens; past that, seconds (T² rows)


def backend(name: str) -> Backend:
    """Models live in the registry's bounded cache (ATTENTION_VIZ_MAX_MODELS), not in st.cache_resource,
    which would keep evicted models alive. AppTest runs pages headless: it serves no network."""
    exposed = not config.get_option("global.appTest") and beyond_loopback(config.get_option("server.address"))
    with st.spinner("Loading the model…"):  # shows only if the load takes over half a second
        return load_backend(name, exposed=exposed)


@cached(lambda: st.spinner("Running the model…"))
def run(name: str, text: str, target: str | None = None, kinds: tuple[str, ...] = ("pattern",)) -> AttentionResult:
    """Most views need the patterns only; the explanation pages ask for q, k, scores too. The values
    come with the patterns wherever the model has them ([heads, tokens, d_k]: small beside the
    patterns), so the value-weighted norms never need a second forward."""
    model = backend(name)
    values = ("v",) if "pattern" in kinds and "v" in model.kinds else ()
    with model.recycled_memory():  # this cache keeps its results: their blocks come from runtime/memory.py
        result = model.run(text, target=target, kinds=tuple(dict.fromkeys(tuple(kinds) + values)))
    model.keep_memory_ready()  # this cache keeps the result's memory: the next text's is mapped meanwhile
    return result


@cached()
def value_norms(_result: AttentionResult, identity: tuple) -> dict[str, np.ndarray] | str:
    """The value-weighted norms of a result of :func:`run` (or why there are none), once per run:
    from its captured values and the model's W_O, never by running the model again. ``identity``
    (:func:`identity`) names the result; the arrays are not hashed. As large as the patterns."""
    return value_norms_or_reason(_result, backend(_result.model).output_projection)


@cached(lambda: st.spinner("Measuring context mixing…"))
def mixing(_result: AttentionResult, identity: tuple, measure: str) -> dict[str, np.ndarray] | str:
    """ALTI or value zeroing of a result of :func:`run` (or why there is none), once per run and
    measure: one [query, key] map per layer, so far smaller than the patterns. Value zeroing re-runs
    each layer on T copies of its input (one forward of a T-sentence batch), ALTI is numpy. Past
    ``HEAVY_ZEROING_TOKENS`` value zeroing takes a heavy slot (ServerBusy, not cached, when none is free)."""
    if measure == "value_zeroing" and len(_result.tokens) > HEAVY_ZEROING_TOKENS:
        with heavy("value zeroing of this input"):
            return mixing_or_reason(_result, backend(_result.model).context_mixing, measure)
    return mixing_or_reason(_result, backend(_result.model).context_mixing, measure)


def identity(result: AttentionResult) -> tuple:
    """What a result was computed from (model and token ids), hashable: the key under which a page
    caches what it derives from the result, without hashing the arrays."""
    target = result.target_tokens
    return result.model, tuple(result.tokens.ids), None if target is None else tuple(target.ids)


def landing_head(result: AttentionResult) -> tuple[int, int]:
    """The head where "it" attends most to "animal" (the default sentence has both): the first view
    opens on a head that shows something. (0, 0) without an encoder or those two words whole."""
    at = positions(result.tokens.labels)
    if ENCODER_SELF not in result.attentions() or at is None:
        return 0, 0
    # the it → animal weight of every head: one cell a head, not a stack of every pattern (75 MB
    # copied on every Enter at 512 tokens)
    cells = np.stack([result.pattern(ENCODER_SELF, layer)[:, at["it"], at["animal"]]
                      for layer in range(result.n_layers(*ENCODER_SELF))])
    layer, head, _ = top_heads(cells[:, :, None, None], 0, 0, n=1)[0]
    return layer, head


@cached(pickled=True)
def _figure_spec(builder: str, source: str, args: tuple, kwargs: dict) -> dict:
    """``source`` (:func:`builder_source`) is part of the key only: a figure built by edited code is
    never answered from the cache of the old code."""
    module, name = builder.rsplit(".", 1)
    return getattr(importlib.import_module(module), name)(*args, **kwargs).to_dict()


_digests: dict[tuple, str] = {}


def builder_source(builder: Callable[..., Any]) -> str:
    """A digest of the source files a figure builder's output depends on: its own module and every
    loaded module of its package (the helpers it calls, the shared style). Bytecode alone would miss
    an edited constant (``height=300`` → ``400``) or an edited helper."""
    module = builder.__module__
    package = module.rpartition(".")[0] or module
    files = sorted({getattr(loaded, "__file__", None) or "" for name, loaded in list(sys.modules.items())
                    if name == module or name.startswith(package + ".")} - {""})
    stamp = tuple((path, Path(path).stat().st_mtime_ns) for path in files)
    if stamp not in _digests:  # read the files once per change, not on every figure
        digest = hashlib.sha1()
        for path in files:
            digest.update(Path(path).read_bytes())
        _digests[stamp] = digest.hexdigest()
    return _digests[stamp]


def figure(builder: Callable[..., go.Figure], *args: Any, **kwargs: Any) -> go.Figure:
    """``builder(*args, **kwargs)``, built once per input: a page draws a dozen figures and a slider
    changes one or two of them, and building a Plotly figure (validating every property, copying the
    template) costs far more than drawing it. The spec is kept as plain data (each caller gets its own
    copy, so the subtitle added on the page never reaches another session) and wrapped without a
    second validation: it was validated when it was built."""
    spec = _figure_spec(f"{builder.__module__}.{builder.__qualname__}", builder_source(builder), args, kwargs)
    return figure_without_validation(spec)
