"""The one look of our figures, built once: plotly_white's layout and the defaults of the trace types
we draw. Naming "plotly_white" in a figure makes Plotly copy and validate its whole template (every
trace type, 3D scenes, maps) into that figure: ~21 ms a figure here and 7 KB on the wire; this one
costs ~8 ms and 2.6 KB, and looks the same.

Tick labels are never checked for overflow (``ticklabeloverflow="allow"``): by default plotly.js
measures every tick label of every linear axis and colour bar on each draw to hide those that would
stick out of the figure, a fifth of its drawing time on our pages, for labels our margins already
hold."""

from __future__ import annotations

import plotly.graph_objects as go
import plotly.io as pio

_WHITE = pio.templates["plotly_white"]
_UNUSED = ("geo", "polar", "scene", "ternary")  # layout parts of plots we never draw
TRACES = ("heatmap", "scatter", "scattergl", "bar", "histogram", "image")
_NO_OVERFLOW_CHECK = {"ticklabeloverflow": "allow"}
THIN_COLOUR_BAR = 12  # px: the colour bar beside small heatmaps (Plotly's default is 30)


def _layout() -> dict:
    layout = {key: value for key, value in _WHITE.layout.to_plotly_json().items() if key not in _UNUSED}
    for axis in ("xaxis", "yaxis"):
        layout[axis] = {**layout[axis], **_NO_OVERFLOW_CHECK}
    layout["coloraxis"] = {**layout["coloraxis"], "colorbar": {**layout["coloraxis"]["colorbar"], **_NO_OVERFLOW_CHECK}}
    return layout


def _trace_defaults(trace: str) -> list:
    """plotly_white's defaults for ``trace``, its colour bar (where it has one) unchecked for overflow."""
    defaults = [item.to_plotly_json() for item in getattr(_WHITE.data, trace)]
    for item in defaults:
        if "colorbar" in item:
            item["colorbar"] = {**item["colorbar"], **_NO_OVERFLOW_CHECK}
        if "marker" in item and "colorbar" in item["marker"]:
            item["marker"] = {**item["marker"], "colorbar": {**item["marker"]["colorbar"], **_NO_OVERFLOW_CHECK}}
    return defaults


TEMPLATE = go.layout.Template(layout=_layout(), data={trace: _trace_defaults(trace) for trace in TRACES})
