"""Figures leaving the app: one naming scheme for every download, the camera button's settings
(PNG at 3× or SVG), a subtitle saying what the figure shows, and standalone HTML files with
plotly.js inside, so they open offline."""

from __future__ import annotations

import re

import plotly.graph_objects as go

from ..core.provenance import Provenance
from .axes import plotly_text, shorten

PNG_SCALE = 3  # 980 px wide on screen → ~2,900 px: sharp in print
IMAGE_FORMATS = ("png", "svg")
CONFIG = {"displaylogo": False, "toImageButtonOptions": {"format": "png", "scale": PNG_SCALE}}
SUBTITLE_TEXT = 48  # characters of the sentence in a subtitle


def download_name(model: str, view: str, *details: str) -> str:
    """``attention-viz_minilm_head_L3H1`` (no extension; an empty part left out, e.g. the model of a
    figure of synthetic numbers): letters, digits, ``-`` and ``.`` only, so an ``hf:`` path or a
    sentence never makes an odd file name."""
    parts = ["attention-viz", *(p for p in (model, view, *details) if p)]
    return "_".join(re.sub(r"[^A-Za-z0-9.-]+", "-", p).strip("-.")[:60] or "x" for p in parts)


def camera_config(name: str, image_format: str = "png") -> dict:
    """Plotly's config for the toolbar's camera button: PNG at 3× or SVG, saved as ``name``."""
    fmt = image_format if image_format in IMAGE_FORMATS else "png"
    return {"displaylogo": False,
            "toImageButtonOptions": {"format": fmt, "scale": PNG_SCALE, "filename": name}}


def _quoted(text: str) -> str:
    return f"“{shorten(' '.join(text.split()), SUBTITLE_TEXT)}”"


def subtitle_words(drawn_from: Provenance, settings: str) -> str:
    """``minilm · “The animal didn't cross the st…” · threshold 0.05``, plain text: the model and
    the input of the result the figure was drawn from (a file or an image by its name, a translation
    by its source → its teacher-forced target), how that run was made, then the view's settings."""
    parts = [drawn_from.model]
    source = drawn_from.source.strip()
    if source:
        read = _quoted(source) if drawn_from.is_text else shorten(source, SUBTITLE_TEXT)
        parts.append(read if drawn_from.target is None else f"{read} → {_quoted(drawn_from.target)}")
    parts += [*drawn_from.settings, *([settings] if settings else [])]
    return " · ".join(parts)


def subtitle(drawn_from: Provenance, settings: str) -> str:
    """:func:`subtitle_words` for a Plotly figure (user text escaped)."""
    return plotly_text(subtitle_words(drawn_from, settings))


SUBTITLE_ROOM = 18  # pixels: one line of 11-point text


def with_subtitle(figure: go.Figure, line: str) -> go.Figure:
    """``figure`` with ``line`` as its title's subtitle (Plotly's ``title.subtitle``: the title
    itself stays what the builder wrote) and room made above the plot. Changed in place: copying a
    512-token heatmap costs as much as building it, and figures are built afresh on every run.
    A fixed height grows by the same room, so the plot area (an image's pixels) keeps its size."""
    top, height = figure.layout.margin.t, figure.layout.height
    # Title and subtitle pinned to the top edge: centred in the margin they would sit on an axis's
    # top tick labels (the all-heads grids put theirs there).
    # Set attribute by attribute: ``update_layout`` with the same values costs ~3× as much (it
    # re-walks the layout to notify listeners a page never has).
    title = figure.layout.title
    title.subtitle = dict(text=line, font=dict(size=11, color="#666"))
    title.yref, title.y, title.yanchor, title.pad.t = "container", 1, "top", 8
    figure.layout.margin.t = (100 if top is None else top) + SUBTITLE_ROOM
    if height is not None:
        figure.layout.height = height + SUBTITLE_ROOM
    return figure


def standalone_html(figure: go.Figure, title: str = "attention-viz") -> str:
    """A complete HTML page embedding plotly.js (no CDN, no network)."""
    html = figure.to_html(include_plotlyjs=True, full_html=True, config=CONFIG)
    return html.replace("<head>", f"<head><meta charset=\"utf-8\"><title>{_escape(title)}</title>", 1)


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
