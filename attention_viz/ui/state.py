"""The page state that lives in the URL, so a link reopens the exact view:
``?model=minilm&text=...&view=head&layer=3&head=1``.

Values from the URL seed the widgets (through ``st.session_state``) before they are drawn; after
every run the current choices are written back.
"""

from __future__ import annotations

import streamlit as st

from ..backends.registry import DEFAULT_MODEL

DEFAULT_TEXT = "The animal didn't cross the street because it was too tired."
URL_KEYS = ("model", "text", "target", "view", "layer", "head")


def seed_from_url() -> None:
    """Copy query parameters into session state once per session (the URL wins on first load)."""
    if st.session_state.get("_seeded"):
        return
    params = st.query_params
    st.session_state["model"] = params.get("model", DEFAULT_MODEL)
    st.session_state["text"] = params.get("text", DEFAULT_TEXT)
    if "target" in params:
        st.session_state["target"] = params["target"]
    for key in ("layer", "head"):
        if key in params:
            st.session_state[f"url_{key}"] = params[key]  # validated by the view that uses it
    if "view" in params:
        st.session_state["url_view"] = params["view"]
    st.session_state["_seeded"] = True


def url_int(key: str, default: int, upper: int) -> int:
    """An integer from the URL, clamped to [0, upper); ``default`` when absent or not a number."""
    raw = st.session_state.pop(f"url_{key}", None)
    try:
        return min(max(int(raw), 0), upper - 1) if raw is not None else default
    except ValueError:
        return default


def write_to_url(**values: object) -> None:
    """Replace the query string with the current choices (None values are left out)."""
    st.query_params.from_dict({k: str(v) for k, v in values.items() if v is not None and k in URL_KEYS})
