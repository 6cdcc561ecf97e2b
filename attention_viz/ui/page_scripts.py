"""The page's own scripts, sent on every run as HTML that takes no room; each installs itself once
per window and follows the charts as runs replace them:

* ``chart_labels.js``: a role and a label on every chart, for screen readers — the chart's own
  title and subtitle, so it names what the saved picture names (model, sentence, layer, head);
* ``narrow_charts.js``: token labels sized (and turned) so every token is labelled in the width drawn,
  subtitles wrapped to the chart's width, and on a phone a thin colour bar beside the matrix;
* ``phone_sidebar.js``: on a phone, the sidebar closes once a choice is made in it.

Before them, the first run of a page also starts loading Streamlit's chart chunk (Plotly, the largest
script of the page), which the front end would otherwise fetch, compile and run only once the first
chart arrives: the browser does it while the server still loads the model.
"""

from __future__ import annotations

from pathlib import Path

import json

import streamlit as st

from .private_api import streamlit_chunk

SCRIPTS = "".join(f"<script>{(Path(__file__).with_name(name)).read_text(encoding='utf-8')}</script>"
                  for name in ("chart_labels.js", "narrow_charts.js", "phone_sidebar.js"))




def chart_chunk_script(chunk: str | None) -> str:
    """A script that imports the chart chunk at ``chunk`` (relative to the page) once per window: the
    same address the front end imports it from, so the chart later finds it loaded."""
    if chunk is None:
        return ""
    address = json.dumps(chunk)
    return (f"<script>(() => {{ if (window.__attentionVizCharts) return; window.__attentionVizCharts = true; "
            f"import(new URL({address}, document.baseURI).href).catch(() => {{}}); }})();</script>")


CHARTS_EARLY = chart_chunk_script(streamlit_chunk("PlotlyChart"))


def page_scripts() -> None:
    st.html(CHARTS_EARLY + SCRIPTS, unsafe_allow_javascript=True)
