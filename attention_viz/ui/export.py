"""Figures on the page and files to download.

Every figure goes through :func:`chart`: the camera button saves PNG at 3× or SVG (the sidebar's
choice) under one naming scheme, and the figure carries a subtitle with the model, the input and
the view's settings, so a saved picture says what it shows. Model and input are those of the result
the figure was drawn from, never the sidebar's: whoever hands a view its result (app.py), and a view
that runs another model or text, opens :func:`drawn_from` around the figures, and a figure drawn
outside one is an error. HTML downloads are built on request, for the figure on screen (see
:func:`figure_downloads`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import replace
from typing import Any

import plotly.graph_objects as go
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from ..figures.export import (IMAGE_FORMATS, camera_config, download_name, standalone_html, subtitle, subtitle_words,
                              with_subtitle)
from ..core.provenance import Provenance
from ..core.result import AttentionResult
from ..runtime.settings import DEFAULT_DOWNLOAD_MB, DOWNLOAD_MB_ENV, whole_number
from .state import SHOWN
from .widgets import choice

NOT_SETTINGS = {"model", "text", "target", "view", "image_format", "example",
                "weighting"}  # the title and colour bar already name the weighting
MAX_SETTINGS = 90  # characters of settings in a subtitle
SYNTHETIC = Provenance("")  # figures of synthetic numbers (the basics page): no model, no input, no subtitle
_DRAWN_FROM: ContextVar[Provenance | None] = ContextVar("attention_viz_drawn_from", default=None)


@contextmanager
def drawn_from(provenance: Provenance) -> Iterator[Provenance]:
    """Figures drawn inside this block come from the result of ``provenance``: their subtitles and
    file names say so. Blocks nest; the innermost wins."""
    token = _DRAWN_FROM.set(provenance)
    try:
        yield provenance
    finally:
        _DRAWN_FROM.reset(token)


@contextmanager
def with_setting(setting: str) -> Iterator[Provenance]:
    """Inside :func:`drawn_from`: figures of the same result with ``setting`` added to what made them
    (e.g. scores averaged over a probe set too, not the text alone)."""
    provenance = _provenance()
    with drawn_from(replace(provenance, settings=(*provenance.settings, setting))) as shown:
        yield shown


def _provenance() -> Provenance:
    provenance = _DRAWN_FROM.get()
    if provenance is None:  # a figure that would fall back to the sidebar could name the wrong model
        raise RuntimeError("a figure was drawn outside `with drawn_from(...)`: nothing says which result it shows")
    return provenance


def image_format_picker() -> str:
    return choice("Camera button saves", IMAGE_FORMATS, "image_format", widget="radio", horizontal=True,
                  format_func={"png": "PNG (3×)", "svg": "SVG"}.get,
                  help="The camera icon in each figure's toolbar saves the figure in this format.")


def _shown() -> dict[str, str]:
    return st.session_state.get(SHOWN, {})


def _settings() -> str:
    """The view's choices drawn so far, in words: ``layer 3 · head 1 · words``."""
    words = []
    for name, value in _shown().items():
        if name in NOT_SETTINGS or value in ("", None):
            continue
        label = name.replace("_", " ")
        if value == "1" and not name.endswith(("layer", "head", "query", "key", "window")):
            words.append(label)
        elif value != "0" or name.endswith(("layer", "head", "query", "key", "window")):
            words.append(f"{label} {value}")
    text = " · ".join(words)
    return text if len(text) <= MAX_SETTINGS else text[: MAX_SETTINGS - 1] + "…"


def file_name(key: str) -> str:
    """``attention-viz_<model>_<view>_<figure>[_L<layer>H<head>]`` (no extension)."""
    shown, view = _shown(), str(st.session_state.get("view", ""))
    figure = key[len(view) + 1 :] if key.startswith(f"{view}_") else key
    head = f"L{shown['layer']}H{shown['head']}" if "layer" in shown and "head" in shown else ""
    return download_name(_provenance().model, view, figure, head)


def saved_as(key: str) -> dict[str, str]:
    """What our own elements (ui/level_canvas.py) save, as :func:`chart` tells Plotly: the subtitle
    (plain text), the file name and the sidebar's image format."""
    provenance = _provenance()
    return {"subtitle": "" if provenance == SYNTHETIC else subtitle_words(provenance, _settings()),
            "file_name": file_name(key), "image_format": str(st.session_state.get("image_format", "png"))}


def _subtitled(figure: go.Figure) -> go.Figure:
    provenance = _provenance()
    if provenance != SYNTHETIC and figure.layout.title.text:  # Plotly draws a subtitle under a title only
        return with_subtitle(figure, subtitle(provenance, _settings()))
    return figure


def chart(where: DeltaGenerator, figure: go.Figure, key: str, *, config: dict | None = None,
          **kwargs: Any) -> Any:
    """``where.plotly_chart`` with the camera settings, the subtitle and the file name."""
    figure = _subtitled(figure)
    settings = camera_config(file_name(key), str(st.session_state.get("image_format", "png")))
    return where.plotly_chart(figure, key=key, config={**(config or {}), **settings}, **kwargs)


def _want_html(flag: str) -> None:
    st.session_state[flag] = True


def figure_downloads(figure: go.Figure | Callable[[], go.Figure], key: str) -> None:
    """The figure as one HTML file that opens offline, in two clicks: "Prepare" builds it on the
    next run, for the figure then on screen, and offers it. Built on every run instead, each file
    (plotly.js inside: ~5 MB) would cost every slider move ~0.1 s of server CPU and stay in the
    server's memory per session; a lazily built file (a callable) can be asked for after the run
    that registered it is gone ("Deferred file … not found")."""
    name, flag = file_name(key), f"_{key}_html_wanted"
    if st.session_state.pop(flag, False):
        figure = _subtitled(figure()) if callable(figure) else figure  # drawn by our own element: built now
        st.download_button("Download figure (HTML, works offline)", data=standalone_html(figure, name),
                           file_name=f"{name}.html", mime="text/html", key=f"{key}_html", on_click="ignore")
    else:
        st.button("Prepare the figure as HTML (works offline)", key=f"{key}_html_prepare", on_click=_want_html,
                  args=(flag,), help="Builds one HTML file of this figure, with plotly.js inside (about 5 MB).")


JSON_BYTES_PER_NUMBER = 10  # "0.123456, ": the JSON download rounds every number to six decimals


def download_sizes(result: AttentionResult) -> dict[str, int]:
    """About how many bytes each download of ``result`` would be: the .npz stores the arrays as they
    are, the .json writes every number out."""
    arrays = result.arrays.values()
    return {"npz": sum(array.nbytes for array in arrays),
            "json": JSON_BYTES_PER_NUMBER * sum(array.size for array in arrays)}


def too_large(form: str, size: int, limit: int) -> str | None:
    """The sentence that refuses a download of ``size`` bytes past ``limit``, or None when it fits."""
    if size <= limit:
        return None
    return (f"The .{form} of this result would be about {size / 2**20:,.0f} MB, more than the {limit / 2**20:,.0f} MB "
            f"this server builds for a download ({DOWNLOAD_MB_ENV}); "
            + ("the .npz holds the same arrays in less." if form == "json" else
               "the command line saves it: python -m attention_viz run --model MODEL --text-file FILE --out result.npz."))


def result_downloads(result: AttentionResult) -> None:
    """The result's arrays as .npz and .json, each built only when clicked, and each refused in a
    sentence when it would be larger than ``ATTENTION_VIZ_DOWNLOAD_MB``."""
    name = download_name(result.model, "tensors")
    limit = whole_number(DOWNLOAD_MB_ENV, DEFAULT_DOWNLOAD_MB) * 2**20
    sizes = download_sizes(result)
    left, right = st.columns(2)
    for where, form, data, mime in ((left, "npz", result.to_npz_bytes, "application/octet-stream"),
                                    (right, "json", result.to_json, "application/json")):
        refusal = too_large(form, sizes[form], limit)
        if refusal is not None:
            where.caption(refusal)
            continue
        where.download_button(f"Attention tensors (.{form})", data=data, file_name=f"{name}.{form}", mime=mime,
                              key=f"result_{form}", on_click="ignore")
