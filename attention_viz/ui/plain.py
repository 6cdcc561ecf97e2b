"""User text on the page, as plain text.

Streamlit renders Markdown (with LaTeX, colour directives and autolinks) in headings, captions and
the bodies of ``st.error`` / ``st.warning`` / ``st.info``. A sentence, a model name, a token label or
an error message quoting them must show literally: ``[Click here](https://…)`` must not become a
link, ``![x](https://…)`` must not make the browser fetch an image, ``$…$`` must not become math.
"""

from __future__ import annotations

import re
import string

import streamlit as st

# Every ASCII punctuation character may be backslash-escaped in CommonMark; that disarms links,
# images, "$" math, ":red[…]" and ":emoji:". It does not disarm GFM's autolinks: they are found in
# the text after escapes are resolved, so anything that looks like a URL or an e-mail address is
# put in a code span instead, where nothing is interpreted.
_ESCAPED = {ord(c): "\\" + c for c in string.punctuation}
_LINKLIKE = re.compile(r"(?:https?://|ftp://|www\.|mailto:|xmpp:)\S*|\S+@\S+", re.IGNORECASE)


def literal(text: object) -> str:
    """``text`` written so that Streamlit's Markdown shows it character for character."""
    text = str(text)
    out, end = [], 0
    for match in _LINKLIKE.finditer(text):
        out += [text[end : match.start()].translate(_ESCAPED), _code(match.group())]
        end = match.end()
    return "".join(out) + text[end:].translate(_ESCAPED)


def _code(text: str) -> str:
    """A code span around ``text``: its fence is longer than any run of backticks inside."""
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def error(message: object) -> None:
    st.error(literal(message))


def warning(message: object) -> None:
    st.warning(literal(message))


def info(message: object) -> None:
    st.info(literal(message))


def caption(message: object) -> None:
    st.caption(literal(message))
