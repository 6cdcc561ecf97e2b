"""The page's own CSS, sent on every run as style-only HTML (Streamlit puts it where it takes no room).

While a script runs, Streamlit fades the previous run's elements: from 0.5 s after the run starts,
over 1 s (``transition: opacity 1s ease-in 0.5s``). Every frame of that fade repaints the page, and a
browser without a GPU (headless, most virtual machines) paints in software, taking CPU from the model
whenever the browser and the server share the cores, as with ``make run`` on a laptop. The elements
still dim after 0.5 s, in one step instead of sixty.
"""

from __future__ import annotations

import streamlit as st

from .private_api import (STREAMLIT_CAPTION_TESTID, STREAMLIT_ELEMENT_CLASS, STREAMLIT_INSTRUCTIONS_TESTID,
                          STREAMLIT_MAIN_TESTID)

# Captions in the text's own colour at 80 % opacity: Streamlit's faded grey reads at under 4.5:1 on
# white (WCAG AA for small text); this reads above it on the light and on the dark theme alike.
CAPTIONS = f"[data-testid='{STREAMLIT_CAPTION_TESTID}'] {{ color: inherit !important; opacity: 0.8; }}"
# Streamlit leaves 6rem above the page's title, and 1.25rem inside the title above its text; 2rem and, on
# a wider window (where no sidebar button sits beside the title), none inside keep the first heatmap on a
# laptop's first screen.
MAIN_TOP = (f"[data-testid='{STREAMLIT_MAIN_TESTID}'] {{ padding-top: 2rem; }} "
            f"@media (min-width: 640px) {{ [data-testid='{STREAMLIT_MAIN_TESTID}'] h1 {{ padding-top: 0; }} }}")
# A touch screen has no Ctrl+Enter: the box applies when the keyboard closes (a tap outside it).
NO_KEYS_ON_TOUCH = (f"@media (pointer: coarse) {{ [data-testid='{STREAMLIT_INSTRUCTIONS_TESTID}'] "
                    "{ display: none !important; } }")
STYLE = (f"<style>.{STREAMLIT_ELEMENT_CLASS}, details, summary {{ transition-duration: 0s !important; }} "
         f"{CAPTIONS} {MAIN_TOP} {NO_KEYS_ON_TOUCH}</style>")


def dim_stale_elements_in_one_step() -> None:
    st.html(STYLE)
