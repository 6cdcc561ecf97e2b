"""The page state that lives in the URL, so a link reopens the exact view:
``?model=minilm&text=...&view=head&layer=3&head=mean&group=cross``. A long sentence travels compressed,
as ``tz`` (:mod:`attention_viz.inputs.link_text`); links with a plain ``text`` open as they always did.

Every widget has an explicit key. Its URL name is the key without the view's prefix
(``head_layer`` → ``layer`` on the head view), so the main layer/head of every view read the same
``layer``/``head`` parameters. On a session's first run the query parameters are parked in session
state; each widget helper (:mod:`.widgets`) takes its own, validates it against the options it
offers, and records the value it shows. After the run exactly the recorded values are written back.
"""

from __future__ import annotations

import urllib.parse

import streamlit as st

from ..backends.registry import DEFAULT_MODEL
from ..errors import ModelError
from ..inputs import link_text

DEFAULT_TEXT = "The animal didn't cross the street because it was too tired."
MAX_TEXT = 20_000  # characters: what the sentence box holds, so the longest value a link carries
PENDING = "_url_pending"  # parameters from the link not yet taken by a widget
SHOWN = "_url_shown"  # URL name → value of every choice drawn in this run
CUT = "_url_cut"  # names of texts from the link that were longer than their box allows
TOO_LONG = "_url_too_long"  # URL name → length of each of the link's values longer than MAX_TEXT
UNREADABLE = "_url_unreadable"  # why the link's compressed sentence could not be read, if it could not


def seed_from_url() -> None:
    """Park the query parameters once per session (the URL wins on first load); start a run.

    A value longer than any box holds is left out whole (see :func:`too_long`): cut, it would run a
    text nobody chose, and a megabyte of it would be written back to the address bar."""
    st.session_state[SHOWN] = {}
    if st.session_state.get("_seeded"):
        return
    params = st.query_params.to_dict()
    st.session_state[TOO_LONG] = {name: len(value) for name, value in params.items() if len(value) > MAX_TEXT}
    params = {name: value for name, value in params.items() if name not in st.session_state[TOO_LONG]}
    st.session_state[UNREADABLE] = None
    if link_text.PARAM in params:
        try:
            params["text"] = link_text.decode(params.pop(link_text.PARAM), MAX_TEXT)
        except ModelError as error:  # the box then shows the default sentence, and the page says why
            st.session_state[UNREADABLE] = str(error)
            params.pop("text", None)
    st.session_state["model"] = params.pop("model", DEFAULT_MODEL)
    st.session_state[PENDING] = params
    st.session_state[CUT] = set()
    st.session_state["_seeded"] = True


def url_name(key: str) -> str:
    """``head_layer`` → ``layer`` while the head view is shown; sidebar keys keep their name."""
    prefix = f"{st.session_state.get('view', '')}_"
    return key[len(prefix) :] if key.startswith(prefix) and len(key) > len(prefix) else key


def take(key: str) -> str | None:
    """The link's raw value for the widget ``key`` (once: later runs keep the user's choice)."""
    pending: dict[str, str] = st.session_state.get(PENDING, {})
    for name in (url_name(key), key):
        if name in pending:
            return pending.pop(name)
    return None


def remember(key: str, value: str) -> None:
    st.session_state[SHOWN][url_name(key)] = value


def unremember(key: str) -> None:
    """Leave ``key`` out of the link: its value is the default the page opens on anyway."""
    st.session_state[SHOWN].pop(url_name(key), None)


def too_long() -> dict[str, int]:
    """URL name → length of each value the link carried past :data:`MAX_TEXT` (left out)."""
    return st.session_state.get(TOO_LONG, {})


def unreadable() -> str | None:
    """Why the link's compressed sentence could not be read (the default was shown instead), or None."""
    return st.session_state.get(UNREADABLE)


def forget_link_notices() -> None:
    """The notices about the link's values have done their job: the user gave the page a text."""
    st.session_state[TOO_LONG] = {}
    st.session_state[UNREADABLE] = None


def note_cut(key: str) -> None:
    st.session_state[CUT].add(key)


def was_cut(key: str) -> bool:
    return key in st.session_state.get(CUT, ())


def _params(model: str) -> dict[str, str]:
    """The model and every choice drawn in this run, the sentence as :func:`link_text.link_value` writes it."""
    params = {"model": model, **st.session_state[SHOWN]}
    return dict(link_text.link_value(value) if name == "text" else (name, value) for name, value in params.items())


def write_to_url(model: str) -> None:
    """Replace the query string with the model and every choice drawn in this run."""
    st.query_params.from_dict(_params(model))


def link(model: str) -> str:
    """The address that reopens this view: the page's own address with every choice drawn."""
    page = urllib.parse.urlsplit(st.context.url or "")
    query = urllib.parse.urlencode(_params(model))
    return urllib.parse.urlunsplit((page.scheme, page.netloc, page.path, query, "")) if page.netloc else f"?{query}"


def share(model: str, uploaded: str | None = None) -> None:
    """A compact "Copy link" button that opens the link in a code block, whose copy button puts it on
    the clipboard. Drawn after the view, so the link holds every choice the view drew. While a file
    (``uploaded``: its name) replaces the box's sentence, the link cannot carry it, and says so."""
    if uploaded is None:
        what = "it reopens exactly this view"
    else:
        what = (f"it reopens this view's choices on the sentence box's text, not on {uploaded} (a link cannot "
                "carry a file; upload it again there)")
    with st.popover("Copy link", icon=":material/link:", help="A link that reopens this view"):
        st.caption(f"The copy icon on the right puts it on the clipboard; {what}:")
        st.code(link(model), language=None, wrap_lines=True)
