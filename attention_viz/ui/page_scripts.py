"""The page's own scripts, sent on every run as HTML that takes no room; each installs itself once
per window and follows the charts as runs replace them:

* ``chart_labels.js``: a role and a label on every chart, for screen readers — the chart's own
  title and subtitle, so it names what the saved picture names (model, sentence, layer, head);
* ``narrow_charts.js``: token labels sized (and turned) so every token is labelled in the width drawn,
  subtitles wrapped to the chart's width, and on a phone a thin colour bar beside the matrix;
* ``phone_sidebar.js``: on a phone, the sidebar closes once a choice is made in it.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

SCRIPTS = "".join(f"<script>{(Path(__file__).with_name(name)).read_text(encoding='utf-8')}</script>"
                  for name in ("chart_labels.js", "narrow_charts.js", "phone_sidebar.js"))


def page_scripts() -> None:
    st.html(SCRIPTS, unsafe_allow_javascript=True)
