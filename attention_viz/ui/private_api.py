"""The places where the app leans on another library's private parts, each behind one name here,
with the versions they were checked against. tests/test_private_api.py fails as soon as a pinned
version changes, so whoever upgrades Plotly or Streamlit checks each of these again."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import streamlit

if TYPE_CHECKING:
    import plotly.graph_objects as go

CHECKED_AGAINST = {"plotly": "7.1.0", "streamlit": "1.67.0"}

# Streamlit's wrapper around every element: a CSS class of its front end, not an API.
STREAMLIT_ELEMENT_CLASS = "stElementContainer"
# The box around st.caption's text: a test id of its front end, not an API.
STREAMLIT_CAPTION_TESTID = "stCaptionContainer"
# The main column's box (its top padding is what st.set_page_config cannot set): a test id, not an API.
STREAMLIT_MAIN_TESTID = "stMainBlockContainer"
# The "Press Ctrl+Enter to apply" line under a text box, and the sidebar's collapse button: test ids.
STREAMLIT_INSTRUCTIONS_TESTID = "InputInstructions"
STREAMLIT_SIDEBAR_COLLAPSE_TESTID = "stSidebarCollapseButton"
# Where Streamlit's front end keeps its chunks, each loaded the first time the page shows its element
# (``PlotlyChart.<hash>.js`` at the first chart): a build detail, not an API.
STREAMLIT_CHUNKS = Path(streamlit.__file__).parent / "static" / "static" / "js"


def streamlit_chunk(element: str) -> str | None:
    """The path, relative to the page, of the front-end chunk that draws ``element`` ("PlotlyChart");
    None when this build has no such chunk."""
    found = sorted(STREAMLIT_CHUNKS.glob(f"{element}.*.js"))
    return f"static/js/{found[0].name}" if len(found) == 1 else None


def figure_without_validation(spec: dict) -> go.Figure:
    """A figure from a spec that Plotly validated when the figure was first built: validating every
    property again costs more than drawing. ``_validate`` is Plotly's private switch for that."""
    import plotly.graph_objects as go  # here, not on import: the page's first scripts go out before Plotly loads

    return go.Figure(spec, _validate=False)
