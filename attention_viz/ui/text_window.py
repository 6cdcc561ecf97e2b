"""A text longer than the model reads: which window of it the views show.

The windows are :func:`attention_viz.inputs.window.split`'s; this module only asks which one (a slider
under the sentence box, ``window`` in the link, drawn only for a text past the model's limit) and says
above the view which tokens it shows. The run is of the window's text, so results are cached per window.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from ..inputs.window import TextWindow, Tokenize, count_tokens, split, total_tokens
from . import cache
from .widgets import choice

MAX_WINDOWS = 48  # windows offered: past them a long upload costs a tokenization each
LABEL = "Window of the text"


@st.cache_data(max_entries=16, show_spinner="Cutting the text into windows of the model's length…")
def _windows(model: str, text: str, _tokenize: Tokenize) -> tuple[list[TextWindow], int] | None:
    """The windows of ``text`` for ``model`` (at most :data:`MAX_WINDOWS`) and the text's token count."""
    windows = split(text, _tokenize, most=MAX_WINDOWS)
    if windows is None:
        return None
    whole = windows[-1].end == len(text)
    return windows, total_tokens(windows) if whole else count_tokens(text, _tokenize)


def window_text(model: str, text: str, slot: Any) -> str:
    """The text the model runs on: ``text`` itself, or for a text longer than the model reads (and a
    tokenizer whose tokens are spans of it), the window picked in ``slot``."""
    try:
        backend = cache.backend(model)
        found = _windows(model, text, backend.tokenize)
    except Exception:  # noqa: BLE001 - the model run reports the same failure, in one line
        return text
    if found is None or len(found[0]) < 2:
        return text
    windows, total = found
    with slot:
        index = choice(LABEL, range(1, len(windows) + 1), "window", widget="select_slider",
                       format_func=lambda i: windows[i - 1].label(total),
                       help=f"The model reads {backend.max_tokens:,} tokens at a time (its special tokens "
                            "included); each window ends between words.")
    window = windows[index - 1]
    reach = "" if windows[-1].end == len(text) else (
        f" The first {len(windows)} windows are offered, up to token {total_tokens(windows):,}.")
    st.info(f"The text has {total:,} tokens, more than the model's {backend.max_tokens:,}: the views show "
            f"{window.label(total)} (window {index} of {len(windows)}); the sidebar's “{LABEL}” slider picks "
            f"another.{reach}")
    return window.of(text)
