"""Pages about decoders need a model that has one: the user's, or else a demo model on an example.
Whenever a view runs another model than the sidebar's, the page says which and why, in one line."""

from __future__ import annotations

import streamlit as st

from ..backends.registry import availability
from ..core.result import AttentionResult
from ..analysis.selection import GROUP_NAMES, Group
from . import cache
from .plain import literal

DEMO_MODEL = "toy-translate"
DEMO_SOURCE = "the european economic area was signed on 2 may 1992 ."


def runs_another_model(model: str, why: str) -> None:
    """The one line above a view that runs ``model`` instead of the sidebar's: ``why`` says why
    (Markdown: user text in it already made literal)."""
    st.info(f"This view runs {literal(model)}: {why}")


def result_with(result: AttentionResult, group: Group) -> AttentionResult | None:
    """``result`` if it has ``group``; otherwise the demo model's run on the example (saying so)."""
    if group in result.attentions():
        return result
    missing = f"{literal(result.model)} has no {GROUP_NAMES[group]}"
    available, reason = availability(DEMO_MODEL)
    if not available:
        st.info(f"This view needs a {GROUP_NAMES[group]}; {missing}, and the demo model is not available: "
                f"{literal(reason)}")
        return None
    runs_another_model(DEMO_MODEL, f"{missing}, and this view needs one, so it shows {DEMO_MODEL}, our small "
                       f"translation Transformer, on an example. Pick {DEMO_MODEL} in the sidebar to use your own "
                       "sentence (lower-case English from its small vocabulary; unknown words show as <unk>).")
    return cache.run(DEMO_MODEL, DEMO_SOURCE, None)
