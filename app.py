"""attention-viz: type a sentence, see what every attention head does with it.

Streamlit only: the inputs, the cached model run, then one view. Run with `make run`.
"""

from __future__ import annotations

from attention_viz.settings import apply_process_settings

apply_process_settings()  # the server's process settings, before anything imports torch

import logging  # noqa: E402

import streamlit as st

from attention_viz.errors import ModelError
from attention_viz.ui import cache
from attention_viz.ui.export import result_downloads
from attention_viz.ui.inputs import request_panel
from attention_viz.ui.state import seed_from_url, write_to_url
from attention_viz.ui.views import basics, causal, compare, encdec, focus, grid, head, inside, layers, positional

# view key (used in the URL) → (label, render function). Views in STANDALONE need no model run.
VIEWS = {
    "head": ("Head heatmap", head.render),
    "grid": ("All heads", grid.render),
    "compare": ("Compare", compare.render),
    "focus": ("Token focus", focus.render),
    "layers": ("Across layers", layers.render),
    "inside": ("Inside one head", inside.render),
    "causal": ("Causal mask", causal.render),
    "positional": ("Positional encoding", positional.render),
    "encdec": ("Encoder–decoder", encdec.render),
    "basics": ("Basics: the formulas", basics.render),
}
STANDALONE = {"basics"}

st.set_page_config(page_title="attention-viz", page_icon="🔍", layout="wide")
seed_from_url()
request = request_panel()

with st.sidebar:
    if st.session_state.get("url_view") in VIEWS:
        st.session_state["view"] = st.session_state.pop("url_view")
    view = st.radio("View", list(VIEWS), format_func=lambda v: VIEWS[v][0], key="view")

st.title("attention-viz")
choices: dict = {}


def run_model():
    """The cached result of the request, or None after telling the user why not."""
    if not request.text.strip():
        st.info("Type a sentence in the sidebar (or pick an example) to see its attention.")
        return None
    try:
        result = cache.run(request.model, request.text, request.target)
    except ModelError as error:
        st.error(str(error))
        return None
    except Exception:  # never show a traceback to the user; the log keeps it
        logging.getLogger("attention_viz").exception("model run failed")
        st.error("Something went wrong while running the model; the details are in the server log.")
        return None
    dropped = result.meta.get("dropped", 0)
    if dropped:
        limit = cache.backend(request.model).max_tokens
        st.warning(f"The text is longer than the model's {limit} tokens: the last {dropped} tokens were dropped.")
    return result


if view in STANDALONE:
    choices = VIEWS[view][1](None) or {}
else:
    result = run_model()
    if result is not None:
        choices = VIEWS[view][1](result) or {}
        with st.expander("Download the attention tensors"):
            result_downloads(result)

write_to_url(model=request.model, text=request.text, target=request.target, view=view, **choices)
