"""The page's own CSS, sent on every run as style-only HTML (Streamlit puts it where it takes no room).

While a script runs, Streamlit fades the previous run's elements: from 0.5 s after the run starts,
over 1 s (``transition: opacity 1s ease-in 0.5s``). Every frame of that fade repaints the page, and a
browser without a GPU (headless, most virtual machines) paints in software: measured in Chromium
here, 0.3–0.47 CPU-s for each second a run lasts, taken from the model whenever the browser and the
server share the cores, as with ``make run`` on a laptop. The elements still dim after 0.5 s, in one
step instead of sixty (0.07–0.08 CPU-s a second).
"""

from __future__ import annotations

import streamlit as st

STYLE = "<style>.stElementContainer, details, summary { transition-duration: 0s !important; }</style>"


def dim_stale_elements_in_one_step() -> None:
    st.html(STYLE)
