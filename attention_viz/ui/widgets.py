"""Widgets whose choice round-trips through the URL.

Each helper sets the widget's session-state value *before* drawing it: from the link on first
load (validated against what the widget offers: an unknown option falls back to the default, a
number is clamped into range), else the user's last choice if it is still valid (a sentence with
fewer tokens, a model with fewer layers), also after a visit to another view, else the default. The widget is then drawn with its key
only, so its value is always one of its options, and the shown value is recorded for the URL.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import streamlit as st

from .state import note_cut, remember, take, was_cut

T = TypeVar("T")
TRUE, FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")
# widget key → the value it last showed. Streamlit drops a widget's state after a run that does not draw
# it (another view): coming back, the widget shows this value again instead of its default.
KEPT = "_widgets_kept"


def _kept(key: str, default: Any) -> Any:
    return st.session_state.get(KEPT, {}).get(key, default)


def _keep(key: str, value: Any) -> None:
    if KEPT not in st.session_state:
        st.session_state[KEPT] = {}
    st.session_state[KEPT][key] = value


def forget(key: str) -> None:
    """Drop a widget's value for good (its state and the kept one): it starts from its default."""
    st.session_state.pop(key, None)
    st.session_state.get(KEPT, {}).pop(key, None)


def follow_the_model(model: str, keys: Sequence[str], defaults: Callable[[str], Sequence[str | None]]) -> None:
    """After a model switch, each box of ``keys`` that still holds the last model's default (``defaults(model)``,
    one per key) starts from the new model's: what belonged to one model must not be run on another;
    what the user typed stays."""
    marker = f"_{keys[0]}_model"
    last = st.session_state.get(marker)
    st.session_state[marker] = model
    if last is None or last == model:
        return
    for key, old in zip(keys, defaults(last)):
        if old is not None and st.session_state.get(key, _kept(key, None)) == old:
            forget(key)


def _clamped_int(raw: object, lo: int, hi: int) -> int | None:
    try:
        return min(max(int(str(raw)), lo), hi)
    except ValueError:
        return None


def _nearest_option(raw: str, options: Sequence[Any]) -> Any | None:
    """For integer options (heads, token positions), a number from the link clamped into range."""
    numbers = [o for o in options if isinstance(o, int) and not isinstance(o, bool)]
    value = _clamped_int(raw, min(numbers), max(numbers)) if numbers else None
    return value if value in options else None


def choice(
    label: str,
    options: Sequence[T],
    key: str,
    default: T | None = None,
    *,
    widget: str = "selectbox",
    name: Callable[[T], str] = str,
    format_func: Callable[[T], str] | None = None,
    **kwargs: Any,
) -> T:
    """One of ``options`` (a selectbox, radio or select_slider); ``name`` spells it in the URL."""
    options = list(options)
    fallback = options[0] if default is None or default not in options else default
    raw = take(key)
    if raw is not None:
        named = [o for o in options if name(o) == raw]
        st.session_state[key] = named[0] if named else _nearest_option(raw, options) if options else None
        if st.session_state[key] is None:
            st.session_state[key] = fallback
    elif st.session_state.get(key) not in options:  # new session, back from another view, or options changed
        kept = _kept(key, fallback)
        st.session_state[key] = kept if kept in options else fallback
    draw = {"selectbox": st.selectbox, "radio": st.radio, "select_slider": st.select_slider}[widget]
    chosen = draw(label, options, key=key, format_func=format_func or name, **kwargs)
    remember(key, name(chosen))
    _keep(key, chosen)
    return chosen


def integer(label: str, lo: int, hi: int, key: str, default: int, *, step: int = 1, **kwargs: Any) -> int:
    """An integer slider; values from the link or an old range are clamped into [lo, hi]."""
    raw = take(key)
    current = raw if raw is not None else st.session_state.get(key, _kept(key, default))
    value = _clamped_int(current, lo, hi)
    st.session_state[key] = min(max(default, lo), hi) if value is None else value
    chosen = int(st.slider(label, lo, hi, step=step, key=key, **kwargs))
    remember(key, str(chosen))
    _keep(key, chosen)
    return chosen


def number(label: str, lo: float, hi: float, key: str, default: float, *, step: float, **kwargs: Any) -> float:
    """A float slider; values from the link are clamped into [lo, hi] and put on the step grid."""
    raw = take(key)
    current = raw if raw is not None else st.session_state.get(key, _kept(key, default))
    try:
        value = min(max(float(str(current)), lo), hi)
        value = round(lo + round((value - lo) / step) * step, 10)
    except ValueError:
        value = default
    st.session_state[key] = value if value == value else default  # NaN from a link
    chosen = float(st.slider(label, lo, hi, step=step, key=key, **kwargs))
    remember(key, f"{chosen:g}")
    _keep(key, chosen)
    return chosen


def flag(label: str, key: str, default: bool = False, *, toggle: bool = False, **kwargs: Any) -> bool:
    """A checkbox (or toggle): ``1``/``0`` in the URL."""
    raw = take(key)
    if raw is not None:
        lowered = raw.strip().lower()
        st.session_state[key] = True if lowered in TRUE else False if lowered in FALSE else default
    elif not isinstance(st.session_state.get(key), bool):
        kept = _kept(key, default)
        st.session_state[key] = kept if isinstance(kept, bool) else default
    chosen = (st.toggle if toggle else st.checkbox)(label, key=key, **kwargs)
    remember(key, "1" if chosen else "0")
    _keep(key, bool(chosen))
    return bool(chosen)


def several(label: str, options: Sequence[int], key: str, default: Sequence[int], **kwargs: Any) -> list[int]:
    """A multiselect of integers, comma-separated in the URL; values not offered are dropped."""
    raw = take(key)
    current = raw.split(",") if raw is not None else st.session_state.get(key, _kept(key, default))
    kept = [n for n in (_clamped_int(v, -(2**31), 2**31) for v in current) if n in options]
    if not kept and raw is None:  # e.g. a smaller d_model left none of the old choices
        kept = [v for v in default if v in options]
    st.session_state[key] = list(dict.fromkeys(kept))
    # Enter takes the first number starting with what was typed ("1" is 1, not 1, 10, 11 …)
    chosen = st.multiselect(label, list(options), key=key, filter_mode="prefix", select_all=False, **kwargs)
    remember(key, ",".join(map(str, chosen)))
    _keep(key, list(chosen))
    return chosen


def text(label: str, key: str, default: str = "", *, max_chars: int = 2_000, area: bool = False,
         **kwargs: Any) -> str:
    """A text box (``area``: several lines, Ctrl+Enter applies); a longer text from a link is cut
    to the box's limit, and the user is told."""
    raw = take(key)
    if raw is not None:
        if len(raw) > max_chars:
            note_cut(key)
        st.session_state[key] = raw[:max_chars]
    elif not isinstance(st.session_state.get(key), str):
        kept = _kept(key, default)
        st.session_state[key] = kept if isinstance(kept, str) else default
    chosen = (st.text_area if area else st.text_input)(label, key=key, max_chars=max_chars, **kwargs)
    if was_cut(key):
        st.caption(f"The text from the link was longer than {max_chars:,} characters: it was cut there.")
    remember(key, chosen)
    _keep(key, chosen)
    return chosen
