"""One view of the app alone, headless: the sidebar's model and sentence (from the link), the
cached run, the view, and the link written back, as app.py does it. For pages the lead has not
registered in app.py yet, and to keep page tests to the page."""

from __future__ import annotations

import json

import numpy as np
from streamlit.testing.v1 import AppTest

from apphelpers import TIMEOUT


def _script(view: str) -> None:
    import importlib

    from attention_viz.ui import cache
    from attention_viz.ui.export import drawn_from
    from attention_viz.ui.state import remember, seed_from_url, write_to_url
    from attention_viz.ui.widgets import text

    import streamlit as st

    seed_from_url()
    st.session_state["view"] = view  # URL names drop the view's prefix, as with the app's view radio
    model = st.session_state["model"]
    sentence = text("Sentence", "text", "The animal didn't cross the street because it was too tired.")
    result = cache.run(model, sentence, None)
    with drawn_from(result.provenance):  # as app.py does around every view
        extra = importlib.import_module(f"attention_viz.ui.views.{view}").render(result)
    for name, value in (extra or {}).items():
        remember(name, str(value))
    write_to_url(model)


def open_view(view: str, **params: str) -> AppTest:
    at = AppTest.from_function(_script, args=(view,), default_timeout=TIMEOUT * 3)
    at.query_params.update(params)
    return at.run()


def problems(at: AppTest) -> list[str]:
    return [e.value for e in at.exception] + [e.value for e in at.error]


def figures(at: AppTest) -> list[dict]:
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def array(value) -> np.ndarray:
    """A Plotly array as sent to the browser: a list, or a base64 typed array."""
    if isinstance(value, dict) and "bdata" in value:
        import base64

        flat = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
        shape = value.get("shape")
        return flat.reshape([int(n) for n in str(shape).split(",")]) if shape else flat
    return np.asarray(value)


def link(at: AppTest) -> dict[str, str]:
    return {k: (v[0] if isinstance(v, list) else v) for k, v in at.query_params.items()}
