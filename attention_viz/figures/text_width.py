"""How wide a label will be on the page, estimated without a browser, and the margins that hold a
figure's tick labels, axis titles, legend and colour bar.

Plotly's ``automargin`` draws a figure, measures every tick label, legend and colour bar, and, when
they need more room than the margins give, moves the margins and draws the whole figure again: on a
512-token head view that second pass was a third of the browser's drawing time (CDP profile of an
Enter: plotly.js 0.52 → 0.38 s a heatmap with margins that already hold the labels). So figures start
with margins from these estimates and keep ``automargin`` as the safety net: where an estimate falls
short (an unusual script, another font) Plotly still makes the room, at the old cost.

The estimates err on the wide side: per-character widths in ems for the sans-serif fonts the app
draws with (Streamlit's "Source Sans"; Plotly's own "Open Sans" in notebooks is a little wider, which
the margin of error covers), checked against the widths Chromium measured for Latin, CJK, Arabic
and emoji labels.

Every room below includes automargin's own pad, min(12, the smallest margin): our margins are all
12 px or more, so it is 12.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Iterable, Sequence

NARROW = frozenset("fijlrtI.,:;'!|()[]{} `\"-/\\·")
WIDE = frozenset("mwMW@%")
FIGURES = frozenset("0123456789+−")  # tabular figures and signs: 0.50 em in Source Sans, 0.57 in Open Sans
# Room around a heatmap's tick labels, measured in Chromium with the app's theme: tick, padding and
# the axis title beside them (measured: y 52.8 px, x 52.2 px beyond the labels; an x axis below the
# plot the same, 51.4).
AXIS_TITLE_ROOM = 54
TICK_ROOM = 21  # the same without an axis title, beside a y axis (measured: "layer 0", 34 px, took 53 with a pad of 10)
X_TICK_ROOM = 22  # above or below an x axis's labels without a title (measured: 37 px for one line of 12 px)
COLOUR_BAR_ROOM = 36  # the colour bar's right margin beyond its title's width (measured: 120–168 px)
COLOUR_BAR_MIN = 140  # its tick labels ("0.0448") when the title is short
COLOUR_BAR_PADS = 20  # a colour bar's xpad on both sides of it (Plotly's default 10)
PAD = 12  # automargin's pad
TURNED_END_ROOM = 20  # past the plot's far end: x labels turned away from it reach past their tick by half a line
TITLE_SIZE = 14  # axis and colour-bar titles in the app's theme; tick labels and legends are 12
# A legend's rows (measured in Chromium: 29, 48 and 67 px for 1–3 rows of 12 px entries) and each
# entry's symbol and gaps beside its text (Plotly: 40 px, and 5 between entries).
LEGEND_ROW = 19
LEGEND_PADS = 10
LEGEND_SYMBOL = 40
LEGEND_GAP = 5
# A label's box is this many font sizes high as Chromium draws the app's font; its neighbours' boxes
# must stay this far apart across the text's direction.
LINE_BOX = 1.34
# The page's width for figures beside the sidebar on a 1,280 px window (the smaller size new users have;
# a little less than measured, for figures inside an expander) and the gap between columns.
PAGE_WIDTH = 780
COLUMN_GAP = 16
# The narrowest plot a figure is drawn in, about: half the page beside the sidebar on a 1,280 px window
# is a 402 px figure (measured), 260–330 px between its margins. What wraps or shares the plot's width
# (a legend's row, labels between categories) is sized for this; Streamlit sets the width, not we.
NARROW_PLOT = 300


def em_width(text: str) -> float:
    """The width of ``text`` in ems (font sizes), rounded up rather than down."""
    width = 0.0
    for char in text:
        if char in NARROW:
            width += 0.42
        elif char in WIDE:
            width += 1.0
        elif char in FIGURES:
            width += 0.6
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


def number_labels(low: float, high: float) -> list[str]:
    """The tick labels Plotly can print on a linear axis over [low, high], as it prints them ("0.2",
    "1", "−0.5"): every multiple of the finest step it would choose (a tenth of the range, rounded up
    to 1, 2 or 5 × 10^k). It picks that step or a coarser one, whose labels are no longer."""
    span = high - low
    if not (math.isfinite(span) and span > 0):
        return [_printed(low, 0)]
    base = 10.0 ** math.floor(math.log10(span / 10))
    step = base * next(m for m in (1, 2, 5, 10) if m * base >= span / 10 * (1 - 1e-9))
    decimals = max(0, -math.floor(math.log10(step) + 1e-9))
    return [_printed(k * step, decimals) for k in range(math.ceil(low / step), math.floor(high / step) + 1)]


def autorange(low: float, high: float) -> tuple[float, float]:
    """The range an autoranged axis can show for data in [low, high]: Plotly pads it for its markers,
    up to a tenth on each side here."""
    margin = (high - low) / 10 or abs(low) / 10 or 1.0
    return low - margin, high + margin


def log_labels(low: float, high: float, exponents: bool = False) -> list[str]:
    """The labels of a logarithmic axis over [low, high] (values, not their logarithms): one per power
    of ten, "1000" or, with ``exponents`` (Plotly's exponentformat "e"), "1e−15"."""
    first, last = math.floor(math.log10(low)), math.ceil(math.log10(high))
    if exponents:
        return [_printed(10.0**k, 0) if 0 <= k <= 3 else f"1e{k}".replace("-", "−") for k in range(first, last + 1)]
    return [_printed(10.0**k, max(0, -k)) for k in range(first, last + 1)]


def _printed(value: float, decimals: int) -> str:
    """A number as Plotly prints a tick: no trailing zeros, a real minus sign."""
    text = f"{value:.{decimals}f}"
    text = text.rstrip("0").rstrip(".") if "." in text else text
    return "0" if text in ("-0", "") else text.replace("-", "−")


def heatmap_margins(y_ticks: tuple[Iterable[str], float], x_ticks: tuple[Iterable[str], float], x_angle: float,
                    title_room: int, colour_bar_title: str | None) -> dict[str, int]:
    """Margins that hold a heatmap's left tick labels, its top (``x_angle``-turned) tick labels with
    their axis titles, ``title_room`` px above them for the figure's title, and the colour bar. Each
    axis's ticks come as (labels, font size)."""
    (y_labels, y_size), (x_labels, x_size) = y_ticks, (list(x_ticks[0]), x_ticks[1])
    top = title_room + max(100, x_axis_room(x_labels, x_size, x_angle))
    # without a colour bar, the last key label, turned towards the right, may reach past the plot's end
    right = colour_bar_margin(colour_bar_title) if colour_bar_title is not None else max(
        20, overhang(x_labels[-1:], x_size, x_angle))
    return dict(l=left_margin(y_labels, y_size), r=right, t=math.ceil(top), b=20)


def left_margin(labels: Iterable[str], size: float, axis_title: bool = True) -> int:
    """The left margin that holds a y axis's tick labels (and its title)."""
    return math.ceil(widest(labels, size) + (AXIS_TITLE_ROOM if axis_title else TICK_ROOM))


def x_axis_room(labels: Iterable[str], size: float, angle: float = 0, axis_title: bool = True) -> int:
    """The margin above or below the plot that holds an x axis's tick labels, turned by ``angle``,
    and its title."""
    room = AXIS_TITLE_ROOM if axis_title else X_TICK_ROOM
    return math.ceil(rotated_height(widest(labels, size), size, angle) + room)


def overhang(labels: Sequence[str], size: float, angle: float = 0, categories: int = 0) -> int:
    """The margin that holds an x axis's first or last tick label where it sticks out past the plot's
    end: half of it when level (centred on its tick), all of its turned width when turned towards that
    side. A category axis's tick sits half a category in from the end (at least half of
    NARROW_PLOT / ``categories``)."""
    width = widest(labels, size)
    reach = width / 2 if angle == 0 else width * math.cos(math.radians(angle))
    inset = NARROW_PLOT / categories / 2 if categories else 0
    return math.ceil(max(0.0, reach - inset) + PAD)


def colour_bar_margin(title: str) -> int:
    """The right margin that holds a colour bar titled ``title`` (12 px) beside the plot."""
    return math.ceil(max(COLOUR_BAR_MIN, pixels(title, 12) + COLOUR_BAR_ROOM))


def colour_bar_room(title: str, labels: Iterable[str], thickness: int) -> int:
    """The right margin that holds a colour bar set at the plot's right edge (``x=1``, so its place
    does not depend on the plot's width): its pads, the bar, its tick labels and its title, which runs
    along the bar's right side (figures/style.py) one line wide."""
    title_line = LINE_BOX * TITLE_SIZE if title else 0.0
    return math.ceil(COLOUR_BAR_PADS + thickness + widest(labels, 12) + title_line + PAD)


def figure_width(across: int) -> float:
    """A figure's width when ``across`` figures share the page's width side by side: a figure never knows
    its width, so its labels are sized for this one."""
    return (PAGE_WIDTH - COLUMN_GAP * (across - 1)) / across


def labels_that_fit(room: float, size: float, angle: float = 90) -> int:
    """How many tick labels of ``size`` px fit along ``room`` px of an axis with their boxes apart: a
    y axis's level labels stack one line each (``angle`` 90); an x axis's labels turned by ``angle``
    lie side by side, a line apart across their slant (so 1 / sin(angle) lines of the axis each)."""
    pitch = (LINE_BOX * size + 1) / math.sin(math.radians(abs(angle)))
    return max(1, math.floor(room / pitch))


# The smallest tick label still read without a magnifier: below it, an axis labels every k-th token.
MIN_TICK_SIZE = 7
TICK_SIZE = 12


def row_pitch(size: float = TICK_SIZE) -> float:
    """The height one level tick label takes with a line of space to its neighbour."""
    return LINE_BOX * size + 1


def fitted_ticks(n: int, room: float, angle: float) -> tuple[int, int, float]:
    """How an axis of ``n`` token labels along ``room`` px reads best: (labels shown, every k-th, at
    ``size`` px), labels turned by ``angle`` (90: level on a y axis; an x axis's turned ones). The
    largest size up to TICK_SIZE at which every label fits with its box apart; below MIN_TICK_SIZE,
    every k-th label at that size."""
    pitch = room / max(n, 1) * math.sin(math.radians(abs(angle)))
    size = min(TICK_SIZE, math.floor((pitch - 1) / LINE_BOX))
    if size >= MIN_TICK_SIZE:
        return n, 1, size
    every = math.ceil(n / labels_that_fit(room, MIN_TICK_SIZE, angle))
    return -(-n // every), every, MIN_TICK_SIZE


def legend_below(names: Sequence[str]) -> tuple[dict, int]:
    """A legend under the plot, pinned to the figure's bottom edge (its place does not depend on the
    plot's height), and the height it takes. One row when its entries fit across NARROW_PLOT, else
    one entry a line: a row wraps at the plot's width, which a figure never knows."""
    across = sum(pixels(name, 12) + LEGEND_SYMBOL for name in names) + LEGEND_GAP * (len(names) - 1)
    rows = 1 if across < NARROW_PLOT else len(names)
    settings = dict(orientation="h" if rows == 1 else "v", x=0, xanchor="left", yref="container", y=0,
                    yanchor="bottom")
    return settings, rows * LEGEND_ROW + LEGEND_PADS


def legend_right(names: Sequence[str]) -> tuple[dict, int]:
    """A legend beside the plot at its top right, one entry a line, and the right margin it takes."""
    settings = dict(orientation="v", x=1, xanchor="left", y=1, yanchor="top")
    return settings, math.ceil(widest(names, 12) + LEGEND_SYMBOL + LEGEND_GAP + PAD)
