"""Token axes: one category per position ("3: the"), so repeated tokens never merge, with
tick labels thinned on long inputs so they never overlap."""

from __future__ import annotations

import html
from collections.abc import Sequence


MAX_TICKS = 64  # more labels than this overlap on a ~900 px axis
MAX_LABEL = 24  # characters of one tick label; a 2,000-character "word" must not eat the figure


def shorten(label: str, limit: int = MAX_LABEL) -> str:
    return label if len(label) <= limit else label[: limit - 1] + "…"


def plotly_text(text: str) -> str:
    """Plotly renders a few HTML tags (<b>, <br>, <a>) in any text; escaping makes a token such as
    "<b>" or "<script>" show literally (Plotly turns the entities back into characters)."""
    return html.escape(text, quote=False)


def hover_text(text: str) -> str:
    """User text inside a hovertemplate: escaped, and with ``%{`` broken (a zero-width space), so
    a token such as "%{z}" shows literally instead of being filled in."""
    return plotly_text(text).replace("%{", "%\u200b{")


def categories(labels: Sequence[str], start: int = 0) -> list[str]:
    """One axis value per position, ``"3: the"``: unique even when tokens repeat, and what hover
    shows, so among many "the" the user sees which one (long labels shortened)."""
    return [plotly_text(f"{i}: {shorten(label)}") for i, label in enumerate(labels, start)]


def ticked(n: int, max_ticks: int = MAX_TICKS) -> range:
    """The positions labelled on an axis of ``n`` tokens: every k-th beyond ``max_ticks``."""
    return range(0, n, max(1, -(-n // max_ticks)))  # ceiling division


def tick_size(n: int) -> int:
    return 12 if n <= 40 else 9


def tick_labels(labels: Sequence[str], max_ticks: int = MAX_TICKS) -> tuple[list[str], int]:
    """The text of the labelled ticks (as shown, before escaping) and their font size."""
    return [shorten(labels[i]) for i in ticked(len(labels), max_ticks)], tick_size(len(labels))


def token_axis(labels: Sequence[str], max_ticks: int = MAX_TICKS, start: int = 0,
               fitted: tuple[int, float] | None = None) -> dict:
    """Plotly axis settings: categorical over positions, ticks = the plain token text.

    Beyond ``max_ticks`` tokens only every k-th position is labelled (hover still names each);
    ``fitted`` (every k-th, font size) replaces that rule with one sized for the axis's length
    (text_width.fitted_ticks).
    """
    values = categories(labels, start)
    shown = ticked(len(values), max_ticks) if fitted is None else range(0, len(values), fitted[0])
    return dict(
        type="category",
        categoryorder="array",
        categoryarray=values,
        tickmode="array",
        tickvals=[values[i] for i in shown],
        ticktext=[plotly_text(shorten(labels[i])) for i in shown],
        tickfont=dict(size=tick_size(len(values)) if fitted is None else fitted[1]),
        showgrid=False,
    )
