"""The one look of our figures, built once: plotly_white's layout and the defaults of the trace types
we draw. Naming "plotly_white" in a figure makes Plotly copy and validate its whole template (every
trace type, 3D scenes, maps) into that figure: ~21 ms a figure here and 7 KB on the wire; this one
costs ~8 ms and 2.6 KB, and looks the same.

Tick labels are never checked for overflow (``ticklabeloverflow="allow"``): by default plotly.js
measures every tick label of every linear axis and colour bar on each draw to hide those that would
stick out of the figure, a fifth of its drawing time on our pages, for labels our margins already
hold.

A colour bar's title runs along its right side: above the bar (Plotly's default) it sits on the top
tick label, which reaches half a line past the bar's end."""

from __future__ import annotations

import plotly.graph_objects as go
import plotly.io as pio

_WHITE = pio.templates["plotly_white"]
_UNUSED = ("geo", "polar", "scene", "ternary")  # layout parts of plots we never draw
TRACES = ("heatmap", "scatter", "scattergl", "bar", "histogram", "image")
_NO_OVERFLOW_CHECK = {"ticklabeloverflow": "allow"}
_COLOUR_BAR = {**_NO_OVERFLOW_CHECK, "title": {"side": "right"}}
THIN_COLOUR_BAR = 12  # px: the colour bar beside small heatmaps (Plotly's default is 30)


def _layout() -> dict:
    layout = {key: value for key, value in _WHITE.layout.to_plotly_json().items() if key not in _UNUSED}
    for axis in ("xaxis", "yaxis"):
        layout[axis] = {**layout[axis], **_NO_OVERFLOW_CHECK}
    layout["coloraxis"] = {**layout["coloraxis"], "colorbar": {**layout["coloraxis"]["colorbar"], **_COLOUR_BAR}}
    return layout


def _trace_defaults(trace: str) -> list:
    """plotly_white's defaults for ``trace``, its colour bar (where it has one) unchecked for overflow and
    titled along its side."""
    defaults = [item.to_plotly_json() for item in getattr(_WHITE.data, trace)]
    for item in defaults:
        if "colorbar" in item:
            item["colorbar"] = {**item["colorbar"], **_COLOUR_BAR}
        if "marker" in item and "colorbar" in item["marker"]:
            item["marker"] = {**item["marker"], "colorbar": {**item["marker"]["colorbar"], **_COLOUR_BAR}}
    return defaults


TEMPLATE = go.layout.Template(layout=_layout(), data={trace: _trace_defaults(trace) for trace in TRACES})

# The page's background in Streamlit's light and dark themes: the low end of a sequential scale and the
# middle of a diverging one, so an empty cell is the page itself and a dark page never glares white.
BACKGROUND = {False: "#ffffff", True: "#0e1117"}
# In the dark, more weight is brighter: the background rising through Plotly's Blues to its light end.
_DARK_BLUES = [[0.0, BACKGROUND[True]], [0.35, "#08306b"], [0.7, "#2171b5"], [1.0, "#9ecae1"]]
_DARK_RDBU = [[0.0, "#92c5de"], [0.25, "#2166ac"], [0.5, BACKGROUND[True]], [0.75, "#b2182b"], [1.0, "#f4a582"]]


def sequential(dark: bool = False) -> str | list:
    """Zero to most, for weights: white → blue on a light page, the page's dark → light blue on a dark one."""
    return _DARK_BLUES if dark else "Blues"


def diverging(dark: bool = False) -> str | list:
    """Signed values around 0: blue, the page's background at 0, red."""
    return _DARK_RDBU if dark else "RdBu_r"


def two_levels(dark: bool = False) -> list:
    """A yes/no matrix (a mask): "no" a shade off the background, "yes" blue."""
    return [[0, "#262a33" if dark else "#f3f3f3"], [1, "#4a90d9" if dark else "#2b6cb0"]]
