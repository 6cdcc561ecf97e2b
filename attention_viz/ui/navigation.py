"""The sidebar's two ways in (Learn, Explore) and the landing intro.

One radio per section, each with a heading and a caption per view; together they hold one value,
``view`` (in the URL as ``view=head``, as before). Picking in one section clears the other.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import streamlit as st

from .state import remember, take

VIEW = "view"


def _radio_key(section: str) -> str:
    return f"nav_{section.lower()}"


def _picked(section: str) -> None:
    st.session_state[VIEW] = st.session_state[_radio_key(section)]


def view_picker(sections: Mapping[str, Mapping[str, tuple[str, str, Any]]], default: str) -> str:
    """Draw one radio per section (label, caption per view); return the chosen view's key."""
    every = [key for views in sections.values() for key in views]
    raw = take(VIEW)
    if raw is not None:
        st.session_state[VIEW] = raw if raw in every else default
    elif st.session_state.get(VIEW) not in every:
        st.session_state[VIEW] = default
    view = st.session_state[VIEW]
    labels = {key: label for views in sections.values() for key, (label, _, _) in views.items()}
    for section, views in sections.items():
        key = _radio_key(section)
        st.session_state[key] = view if view in views else None
        st.markdown(f"**{section}**")
        st.radio(section, list(views), key=key, format_func=lambda v: labels.get(v, str(v)),
                 captions=[caption for _, caption, _ in views.values()], label_visibility="collapsed",
                 on_change=_picked, args=(section,))
    remember(VIEW, view)
    return view


def landing() -> None:
    """Three lines for someone who has never seen the app."""
    st.markdown(
        "**What this is:** every attention head of a Transformer, on a sentence you type in the sidebar "
        "(on a phone, the **»** at the top left opens it); *Learn* there walks through how attention works, "
        "*Explore* inspects a model.  \n"
        "**How to read a heatmap:** a row is the token *looking* (the query), a column the token "
        "*looked at* (the key); with attention weights, each row sums to 1."
    )
