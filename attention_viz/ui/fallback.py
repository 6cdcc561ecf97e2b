"""Pages about decoders need a model that has one: the user's, or else a demo model on an example."""

from __future__ import annotations

import streamlit as st

from ..backends.registry import availability
from ..result import AttentionResult
from ..selection import Group
from . import cache

DEMO_MODEL = "toy-translate"
DEMO_SOURCE = "the european economic area was signed on 2 may 1992 ."


def result_with(result: AttentionResult, group: Group, why: str) -> AttentionResult | None:
    """``result`` if it has ``group``; otherwise the demo model's run on the example (saying so)."""
    if group in result.attentions():
        return result
    available, reason = availability(DEMO_MODEL)
    if not available:
        st.info(f"{result.model} has no decoder, and the demo model is not available: {reason}")
        return None
    st.info(f"{result.model} {why} so this page uses {DEMO_MODEL}, our small translation Transformer, on an "
            f"example. Pick {DEMO_MODEL} in the sidebar to use your own sentence (lower-case English from its "
            "small vocabulary; unknown words show as <unk>).")
    return cache.run(DEMO_MODEL, DEMO_SOURCE, None)
