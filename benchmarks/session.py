"""One visitor's session of the app, spoken in Streamlit's own websocket protocol (no browser).

What a browser tab sends, reduced to what the server sees: connect to ``/_stcore/stream``, ask for
a script run with the link's query string, then rerun with a changed widget value. What comes back
is read the way the page would show it: widgets (found by their label), Plotly charts, errors.
Used by the load test (benchmarks/load.py) and the scale-out test; it talks to loopback only.
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.parse
from dataclasses import dataclass, field

import websockets
from streamlit.proto.Alert_pb2 import Alert
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.Slider_pb2 import Slider
from streamlit.proto.WidgetStates_pb2 import WidgetState

RUN_TIMEOUT_S = 120.0  # one script run, however loaded the machine


@dataclass
class Run:
    """What one script run drew: charts (Plotly specs), widgets by label, and any error shown."""

    seconds_to_heatmap: float | None = None
    charts: list[dict] = field(default_factory=list)
    widgets: dict[str, object] = field(default_factory=dict)  # label → widget proto
    errors: list[str] = field(default_factory=list)

    @property
    def heatmaps(self) -> list[dict]:
        return [chart for chart in self.charts if any(t.get("type") == "heatmap" for t in chart["data"])]


class Session:
    """``async with Session(url) as s: run = await s.open({"text": ...}); await s.set("Layer", 3)``."""

    def __init__(self, base_url: str, cookie: str | None = None) -> None:
        self.stream_url = base_url.replace("http://", "ws://", 1).rstrip("/") + "/_stcore/stream"
        self.headers = {"Cookie": cookie} if cookie else {}
        self.query_string = ""
        self.widgets: dict[str, object] = {}
        self.socket = None
        self.handshake_headers: dict[str, str] = {}

    async def __aenter__(self) -> Session:
        self.socket = await websockets.connect(
            self.stream_url, subprotocols=["streamlit"], additional_headers=self.headers, max_size=None,
            open_timeout=RUN_TIMEOUT_S,
        )
        self.handshake_headers = dict(self.socket.response.headers)
        return self

    async def __aexit__(self, *exc) -> None:
        await self.socket.close()

    async def open(self, query: dict[str, str]) -> Run:
        """The first run, as opening a link with this query string."""
        self.query_string = urllib.parse.urlencode(query)
        return await self._rerun([])

    async def set(self, label: str, value: object) -> Run:
        """Change the widget labelled ``label`` to ``value`` (an option as shown, or a number) and rerun."""
        widget = self.widgets.get(label)
        if widget is None:
            raise KeyError(f"no widget labelled {label!r} on the page (have: {sorted(self.widgets)})")
        return await self._rerun([_widget_state(widget, value)])

    async def _rerun(self, states: list[WidgetState]) -> Run:
        message = BackMsg()
        message.rerun_script.query_string = self.query_string
        message.rerun_script.widget_states.widgets.extend(states)
        started = time.monotonic()
        await self.socket.send(message.SerializeToString())
        run = Run()
        async with asyncio.timeout(RUN_TIMEOUT_S):
            while True:
                reply = ForwardMsg()
                reply.ParseFromString(await self.socket.recv())
                kind = reply.WhichOneof("type")
                if kind == "delta" and reply.delta.WhichOneof("type") == "new_element":
                    self._read_element(reply.delta.new_element, run, started)
                elif kind == "page_info_changed":  # the app rewrote the URL: a browser would send it back
                    self.query_string = reply.page_info_changed.query_string
                elif kind == "script_finished":
                    if reply.script_finished == ForwardMsg.FINISHED_EARLY_FOR_RERUN:
                        continue
                    if reply.script_finished != ForwardMsg.FINISHED_SUCCESSFULLY:
                        run.errors.append(f"script finished: {reply.script_finished}")
                    break
        self.widgets = run.widgets
        return run

    @staticmethod
    def _read_element(element, run: Run, started: float) -> None:
        kind = element.WhichOneof("type")
        body = getattr(element, kind)
        if kind == "plotly_chart":
            chart = json.loads(body.spec)
            run.charts.append(chart)
            if run.seconds_to_heatmap is None and any(t.get("type") == "heatmap" for t in chart["data"]):
                run.seconds_to_heatmap = time.monotonic() - started
        elif kind == "exception":
            run.errors.append(f"exception: {body.type}: {body.message}")
        elif kind == "alert" and body.format == Alert.ERROR:
            run.errors.append(f"error: {body.body}")
        elif getattr(body, "label", "") and getattr(body, "id", ""):
            run.widgets[body.label] = body


def _widget_state(widget, value: object) -> WidgetState:
    """The value in the form the browser would send for this kind of widget."""
    state = WidgetState(id=widget.id)
    if isinstance(widget, Slider) and widget.type == Slider.SELECT_SLIDER:
        state.string_array_value.data.append(str(value))
    elif isinstance(widget, Slider):
        state.double_array_value.data.append(float(value))
    elif isinstance(value, bool):
        state.bool_value = value
    else:  # radio, selectbox, text input: the option as shown
        state.string_value = str(value)
    return state


def names_its_tokens(chart: dict, labels: list[str]) -> bool:
    """Whether the heatmap's x-axis labels are ``labels`` at their positions: every token, or an evenly
    thinned set where they would not fit. A tick is an integer position or a category "position: label"."""
    axis = chart["layout"].get("xaxis", {})
    values, text = list(axis.get("tickvals", [])), list(axis.get("ticktext", []))
    if not text or len(values) != len(text):
        return False
    positions = [int(str(v).split(":", 1)[0]) for v in values]
    return positions[0] == 0 and all(p < len(labels) and labels[p] == t for p, t in zip(positions, text))


def title(chart: dict) -> str:
    text = chart["layout"].get("title", "")
    return text.get("text", "") if isinstance(text, dict) else str(text)
