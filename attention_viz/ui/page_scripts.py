"""A role and a label on every chart, for screen readers (the script: chart_labels.js). The label is
the chart's own title and subtitle, so it names what the saved picture names: the model, the
sentence, the layer and the head."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

SCRIPT = f"<script>{(Path(__file__).with_name('chart_labels.js')).read_text(encoding='utf-8')}</script>"


def label_charts() -> None:
    """Sent on every run (it takes no room); the script installs itself once per page."""
    st.html(SCRIPT, unsafe_allow_javascript=True)
