"""The page's theme as the browser reports it: the figures are plain and take it as an argument."""

from __future__ import annotations

import streamlit as st


def dark() -> bool:
    """Whether the page is in Streamlit's dark theme (unknown, as on a session's very first run: light)."""
    return st.context.theme.type == "dark"
