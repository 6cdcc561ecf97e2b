"""How wide a label will be on the page, estimated without a browser, and the margins that hold a
heatmap's labels.

Plotly's ``automargin`` draws a figure, measures every tick label and the colour bar, and, when they
need more room than the margins give, moves the margins and draws the whole figure again: on a
512-token head view that second pass was a third of the browser's drawing time (CDP profile of an
Enter: plotly.js 0.52 → 0.38 s a heatmap with margins that already hold the labels). So figures start
with margins from these estimates and keep ``automargin`` as the safety net: where an estimate falls
short (an unusual script, another font) Plotly still makes the room, at the old cost.

The estimates err on the wide side: per-character widths in ems for the sans-serif fonts the app
draws with (Streamlit's "Source Sans"; Plotly's own "Open Sans" in notebooks is a little wider, which
the margin of error covers), checked against the widths Chromium measured for Latin, CJK, Arabic
and emoji labels.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Iterable

NARROW = frozenset("fijlrtI.,:;'!|()[]{} `\"-/\\")
WIDE = frozenset("mwMW@%")
# Room around a heatmap's tick labels, measured in Chromium with the app's theme: tick, padding and
# the axis title beside them (measured: y 52.8 px, x 52.2 px beyond the labels).
AXIS_TITLE_ROOM = 54
TICK_ROOM = 10  # the same without an axis title (the all-heads grid: "layer 5" needs 53 px, 43 of them text)
COLOUR_BAR_ROOM = 36  # the colour bar's right margin beyond its title's width (measured: 120–168 px)
COLOUR_BAR_MIN = 140  # its tick labels ("0.0448") when the title is short


def em_width(text: str) -> float:
    """The width of ``text`` in ems (font sizes), rounded up rather than down."""
    width = 0.0
    for char in text:
        if char in NARROW:
            width += 0.42
        elif char in WIDE:
            width += 1.0
        elif char.isascii():
            width += 0.62 if char.islower() else 0.72
        elif unicodedata.category(char) in ("Mn", "Me", "Cf"):  # combining marks, joiners: no width of their own
            continue
        elif ord(char) >= 0x1F000 or unicodedata.category(char) == "So":  # emoji and symbols
            width += 1.25
        else:  # CJK (one em each) and every other script
            width += 1.0
    return width


def pixels(text: str, size: float) -> float:
    return em_width(text) * size + 2  # + anti-aliasing at the ends


def widest(texts: Iterable[str], size: float) -> float:
    return max((pixels(t, size) for t in texts), default=0.0)


def rotated_height(width: float, size: float, degrees: float) -> float:
    """The vertical extent of a label ``width`` px wide and one line high, turned by ``degrees``."""
    turn = math.radians(abs(degrees))
    return width * math.sin(turn) + 1.3 * size * math.cos(turn)


def heatmap_margins(y_ticks: tuple[Iterable[str], float], x_ticks: tuple[Iterable[str], float], x_angle: float,
                    title_room: int, colour_bar_title: str | None) -> dict[str, int]:
    """Margins that hold a heatmap's left tick labels, its top (``x_angle``-turned) tick labels with
    their axis titles, ``title_room`` px above them for the figure's title, and the colour bar. Each
    axis's ticks come as (labels, font size)."""
    (y_labels, y_size), (x_labels, x_size) = y_ticks, x_ticks
    top = title_room + max(100, rotated_height(widest(x_labels, x_size), x_size, x_angle) + AXIS_TITLE_ROOM)
    right = colour_bar_margin(colour_bar_title) if colour_bar_title is not None else 20
    return dict(l=left_margin(y_labels, y_size), r=right, t=math.ceil(top), b=20)


def left_margin(labels: Iterable[str], size: float, axis_title: bool = True) -> int:
    """The left margin that holds a y axis's tick labels (and its title)."""
    return math.ceil(widest(labels, size) + (AXIS_TITLE_ROOM if axis_title else TICK_ROOM))


def colour_bar_margin(title: str) -> int:
    """The right margin that holds a colour bar titled ``title`` (12 px) beside the plot."""
    return math.ceil(max(COLOUR_BAR_MIN, pixels(title, 12) + COLOUR_BAR_ROOM))
