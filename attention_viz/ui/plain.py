"""User text on the page, as plain text.

Streamlit renders Markdown (with LaTeX, colour directives and autolinks) in headings, captions and
the bodies of ``st.error`` / ``st.warning`` / ``st.info``. A sentence, a model name, a token label or
an error message quoting them must show literally: ``[Click here](https://…)`` must not become a
link, ``![x](https://…)`` must not make the browser fetch an image, ``$…$`` must not become math.
"""

from __future__ import annotations

import string

import streamlit as st

# Every ASCII punctuation character may be backslash-escaped in CommonMark; escaping all of them
# also breaks autolinks ("https\:\/\/", "www\.") and the "$", ":red[…]" and ":emoji:" syntaxes.
_ESCAPED = {ord(c): "\\" + c for c in string.punctuation}


def literal(text: object) -> str:
    """``text`` escaped so that Streamlit's Markdown shows it character for character."""
    return str(text).translate(_ESCAPED)


def error(message: object) -> None:
    st.error(literal(message))


def warning(message: object) -> None:
    st.warning(literal(message))


def info(message: object) -> None:
    st.info(literal(message))


def caption(message: object) -> None:
    st.caption(literal(message))
