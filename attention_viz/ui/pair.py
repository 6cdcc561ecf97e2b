"""The clean/corrupt pair a page patches: two inputs and their two answers, from the model's preset
by default, each in the link (``clean``, ``corrupt``, ``answer``, ``wrong``)."""

from __future__ import annotations

import streamlit as st

from ..analysis.patching import PRESETS
from . import plain
from .widgets import text


def pair_inputs(view: str, model: str, fallback: str) -> tuple[str, str, str, str]:
    """clean, corrupt, answer, wrong as typed (keys ``{view}_clean`` …); ``fallback`` is the clean
    input of a model without a preset."""
    preset = PRESETS.get(model)
    left, right = st.columns(2)
    with left:
        clean = text("Clean input", f"{view}_clean", preset.clean if preset else fallback)
        answer = text("Answer (one token)", f"{view}_answer", preset.answer if preset else "", max_chars=80)
    with right:
        corrupt = text("Corrupt input (the same number of tokens)", f"{view}_corrupt", preset.corrupt if preset else "")
        wrong = text("Wrong answer (one token)", f"{view}_wrong", preset.wrong if preset else "", max_chars=80)
    if preset and (clean, corrupt) == (preset.clean, preset.corrupt):
        plain.caption(f"The preset pair tests {preset.what}.")
    return clean, corrupt, answer, wrong
