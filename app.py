"""attention-viz: type a sentence, see what every attention head does with it.

Streamlit only: the inputs, the cached model run, then one view. Run with `make run` (or plain
`streamlit run app.py`: the server settings are in .streamlit/config.toml).
"""

from __future__ import annotations

from attention_viz.runtime.settings import apply_process_settings, freeze_startup_heap

apply_process_settings()  # the server's process settings, before anything imports torch

import importlib  # noqa: E402
import logging  # noqa: E402
from contextlib import nullcontext  # noqa: E402
from types import ModuleType  # noqa: E402

import streamlit as st  # noqa: E402

from attention_viz.ui.page_scripts import page_scripts  # noqa: E402
from attention_viz.ui.page_style import dim_stale_elements_in_one_step  # noqa: E402

# The page's frame first, before the imports below (torch among them: seconds on a server's first run):
# its scripts start loading the chart code in the browser meanwhile.
st.set_page_config(page_title="attention-viz", page_icon="🔍", layout="wide")
dim_stale_elements_in_one_step()
page_scripts()

# Imported here, at the first run of the server, what Streamlit and the pages would otherwise import
# lazily: two sessions starting at once could otherwise meet a half-imported module.
import numpy  # noqa: E402, F401
import pandas  # noqa: E402, F401
import plotly.graph_objects  # noqa: E402, F401
import plotly.io  # noqa: E402, F401
import pyarrow  # noqa: E402, F401

from attention_viz.backends.registry import HF_PREFIX
from attention_viz.core.provenance import Provenance
from attention_viz.errors import ModelError, UnreadableText
from attention_viz.ui import cache, plain
from attention_viz.ui.export import drawn_from, image_format_picker, result_downloads
from attention_viz.ui.inputs import request_panel, say_unknown, switch_to_example
from attention_viz.ui.state import remember, seed_from_url, share, write_to_url
from attention_viz.ui.text_window import window_text
from attention_viz.ui.views import long_head
from attention_viz.ui.navigation import landing, view_picker
from attention_viz.ui.progress import progress_shown

# view key (used in the URL) → (label, one-line caption, its module in ui/views), in the sidebar's order:
# the Learn path first (a student's natural first steps), then the Explore tools. A view's module is
# imported when it is first shown: a server's first run imports the landing view's only.
LEARN = {
    "basics": ("Basics: the formulas", "softmax(QKᵀ/√d_k)V, step by step on small numbers", "basics"),
    "inside": ("Inside one head", "Q, K, scores and softmax of one head on your sentence", "inside"),
    "positional": ("Positional encoding", "how a Transformer knows word order", "positional"),
    "causal": ("Causal mask", "why a decoder cannot look ahead", "causal"),
    "encdec": ("Encoder–decoder", "a translation's cross-attention, word by word", "encdec"),
    "image": ("Image attention", "which regions a caption word or a patch looks at", "image"),
}
EXPLORE = {
    "head": ("Head", "one head's heatmap (the landing view)", "head"),
    "grid": ("All heads", "every layer × head at a glance; click one to enlarge", "grid"),
    "focus": ("Token focus", "which heads link two tokens you pick", "focus"),
    "layers": ("Across layers", "one token through the stack; rollout and flow", "layers"),
    "compare": ("Compare", "two heads, two sentences, the coreference pair", "compare"),
    "ablation": ("Head ablation", "switch heads off and see what changes", "ablation"),
    "detector": ("Head detector", "find heads that match a pattern", "detector"),
    "patching": ("Patching", "which heads carry the difference between two sentences", "patching"),
    "logit_lens": ("Logit lens", "what a decoder would predict after each layer", "logit_lens"),
    "circuit": ("Circuit", "the edges between heads that carry it, checked by running them", "circuit"),
    "atlas": ("Head atlas", "every head over a corpus", "atlas"),
}
SECTIONS = {"Learn": LEARN, "Explore": EXPLORE}
VIEWS = {**LEARN, **EXPLORE}
DEFAULT_VIEW = "head"
STANDALONE = {"basics", "image"}  # views that need no model run
# views that read a text past the capture limit whole, blockwise, from the model's name and the text
WHOLE_TEXT = {"head": "long_head", "grid": "long_grid", "focus": "long_focus", "layers": "long_layers",
              "compare": "long_compare", "detector": "detector"}


def view_module(name: str) -> ModuleType:
    """The module ``attention_viz.ui.views.<name>``, imported on first use."""
    return importlib.import_module(f"attention_viz.ui.views.{name}")


seed_from_url()
request = request_panel()
with st.sidebar:
    view = view_picker(SECTIONS, DEFAULT_VIEW)
    image_format_picker()

heading, link_place = st.columns([5, 1], vertical_alignment="bottom")  # the link: filled in after the view
heading.title("attention-viz")
if request.switched:
    plain.info(request.switched)


def uploaded_name() -> str | None:
    """The name of the .txt file the request's text was read from; None when it is the box's sentence."""
    upload = st.session_state.get("text_file")
    return upload.name if upload is not None and request.text != st.session_state.get("text") else None


def run_model(say_dropped: bool = True):
    """The cached result of the request, or None after telling the user why not (and, with
    ``say_dropped``, that the text was cut)."""
    if request.model == HF_PREFIX:  # the hf: box is still empty: a hint, not an error
        st.info("Type a transformers model in the sidebar: a local folder or a hub id (what a folder needs is "
                "listed under the box).")
        return None
    if not request.text.strip():
        st.info("Type a sentence in the sidebar (or pick an example) to see its attention.")
        return None
    # a text past the model's limit: the window the sidebar picks (the downloads of a whole-text view: the first)
    text = window_text(request.model, request.text, request.window_slot) if say_dropped else request.text
    try:
        result = cache.run(request.model, text, request.target)
    except UnreadableText as error:  # another kind of input (symbols): the model's example instead
        if not switch_to_example(request.model, str(error), uploaded_name() is not None):
            plain.error(error)
        return None
    except ModelError as error:
        plain.error(error)
        return None
    except Exception:  # never show a traceback to the user; the log keeps it
        logging.getLogger("attention_viz").exception("model run failed")
        st.error("Something went wrong while running the model; the details are in the server log.")
        return None
    if (name := uploaded_name()) is not None:  # its figures and downloads name the file, not its text
        result = result.with_provenance(result.provenance.from_file(name))
    dropped = result.meta.get("dropped", 0)
    if dropped and say_dropped:
        limit = cache.backend(request.model).max_tokens
        st.warning(f"The text is longer than the model's {limit} tokens: the last {dropped} tokens were dropped.")
    return result


def reads_whole_text() -> bool:
    """Whether the view reads the whole of a text past the capture limit (Head, All heads, Token focus,
    Across layers, Compare's two heads and the head detector, with a model that can), told from the text's tokens: the ordinary run is then not made."""
    if view not in WHOLE_TEXT or request.model == HF_PREFIX or not request.text.strip() or request.target:
        return False
    try:
        return long_head.reads_whole(request.model, request.text)
    except ModelError:  # a refusal: the ordinary run says it on the page, and the log needs no traceback
        return False
    except Exception:  # noqa: BLE001 - the ordinary run reports the same failure, in one line
        logging.getLogger("attention_viz").warning("could not tell whether the whole text is read", exc_info=True)
        return False


def show(render, provenance: Provenance | None, *inputs) -> None:
    """One view, caught at the page edge: an unexpected error is one short message with the
    details folded away, and the rest of the page (sidebar, downloads, links) still works. Its
    figures are drawn from ``provenance`` (None: the view runs its own model and says so)."""
    try:
        with progress_shown(), nullcontext() if provenance is None else drawn_from(provenance):
            extra = render(*inputs)
        for name, value in (extra or {}).items():  # values a view puts in the link itself
            if value is not None:
                remember(name, str(value))
    except ModelError as error:
        plain.error(error)
    except Exception as error:  # noqa: BLE001 - the page edge: nothing below may take the page down
        logging.getLogger("attention_viz").exception("view %s failed", view)
        st.error(f"This view could not be drawn for this input ({type(error).__name__}). Other views still work.")
        with st.expander("Details (for a bug report)"):
            st.exception(error)


if view == DEFAULT_VIEW:
    landing()
if view in STANDALONE:
    show(view_module(VIEWS[view][2]).render, None, None)
elif reads_whole_text():
    limit = cache.backend(request.model).max_tokens
    st.info(f"The text is longer than the {limit} tokens the other views capture: this view reads all of it "
            f"block by block; the other views show it {limit} tokens at a time, in windows.")
    whole, name = Provenance(request.model, cache.backend(request.model).implementation, request.text), uploaded_name()
    show(view_module(WHOLE_TEXT[view]).render_whole, whole if name is None else whole.from_file(name), request.model,
         request.text)
    # the tensors of the first tokens need the ordinary run: made when the box is opened, not on every upload
    with st.expander(f"Download the attention tensors (the first {limit} tokens)", key="long_downloads",
                     on_change="rerun") as box:
        if box.open and (result := run_model(say_dropped=False)) is not None:
            result_downloads(result)
else:
    result = run_model()
    if result is not None:
        say_unknown(result)
        show(view_module(VIEWS[view][2]).render, result.provenance, result)
        with st.expander("Download the attention tensors"):
            result_downloads(result)

write_to_url(request.model)
with link_place:
    share(request.model, uploaded_name())
freeze_startup_heap()  # after the first run everything long-lived is loaded: keep it out of each run's GC
