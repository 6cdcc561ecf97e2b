"""The head view for a text longer than the model's capture limit (thousands of tokens): the whole
input is read, each layer's queries and keys are kept, and one head's pattern is computed block by
block: an overview pooled to screen resolution, and a zoom by query/key ranges down to exact cells.
The app comes here straight from the text (:func:`reads_whole`), without the ordinary run of the
first tokens, which this view never draws; :mod:`.head` hands over here a result that dropped tokens
the model itself could read."""

from __future__ import annotations

import streamlit as st

from ...analysis.blockwise import POOLINGS, Overview
from ...analysis.long_input import COLOURS, LOG_FLOOR, TILES, LongInput, clamp_region, long_heatmap
from ...core.result import AttentionResult
from ...inputs.tokens import Tokens
from .. import cache
from ..controls import layer_head_choice
from ..heavy import heavy
from ..level_canvas import long_heatmap_chart
from ..state import unremember
from ..widgets import choice, forget, integer

POOLING_NAMES = {"max": "max (the strongest weight in each tile)", "mean": "mean (the average weight of each tile)"}
COLOUR_NAMES = {"log": "log", "linear": "linear"}
RANGES = ("head_long_q0", "head_long_q1", "head_long_k0", "head_long_k1")


def applies(result: AttentionResult) -> bool:
    """The run dropped tokens, and the model can read them blockwise."""
    return result.meta.get("dropped", 0) > 0 and cache.backend(result.model).can_read_long


def reads_whole(model: str, text: str) -> bool:
    """:func:`applies` from the text's tokens alone: the ordinary run would capture the first tokens
    only to be told that they are not all."""
    backend = cache.backend(model)
    return backend.can_read_long and len(long_tokens(model, text)[0]) > backend.max_tokens


@st.cache_resource(max_entries=8, show_spinner=False)
def long_tokens(model: str, text: str) -> tuple[Tokens, int]:
    """The whole text's tokens and how many the model cannot read, once per (model, text): both
    whether this view reads the text and the input it reads (0.3 s of tokenizing at 32k tokens)."""
    return cache.backend(model).long_tokens(text)


@st.cache_resource(max_entries=4, show_spinner="Reading the whole text…")
def long_input(model: str, text: str) -> LongInput:
    """Per (model, text): layers × heads × tokens × d_k floats once every layer is asked for, never
    tokens². A slot of the server's heavy work (refused, not queued, when every slot is taken)."""
    tokens, dropped = long_tokens(model, text)
    with heavy("reading the whole text"):
        return cache.backend(model).long_input(tokens, dropped)


@st.cache_resource(max_entries=32, show_spinner="Computing the head's pattern block by block…")
def head_overview(_long: LongInput, identity: tuple, layer: int, head: int, means: bool) -> Overview:
    """One pass per head (pooled tiles, and the normalizers with ``means``), after the layers it needs
    (the layers below run whole, the head's fused kernel pass for max tiles); ``identity`` = (model,
    text) names ``_long``. Passes over T²/2 logits: seconds of CPU at 32k tokens, heavy work."""
    with heavy("this head's pass over the whole text"):
        return _long.overview(layer, head, TILES, means)


def read_whole(model: str, text: str, how: str) -> LongInput:
    """The long input of (model, text), after one line saying that this view reads all of it, and ``how``."""
    long = long_input(model, text)
    st.info(f"This text has {long.length:,} tokens, more than the {cache.backend(model).max_tokens:,} the other "
            f"views capture. This view reads all of them: {how}")
    return long


def whole_for_a_new_text(identity: tuple) -> None:
    """A new text opens on the whole input: the last text's ranges mean nothing in it (and a range
    just short of the whole would cost a second pass over it). A link's ranges, read on the session's
    first text, still apply."""
    if st.session_state.get("head_long_text", identity) != identity:
        for key in RANGES:
            forget(key)
    st.session_state["head_long_text"] = identity


def _whole(n_queries: int, n_keys: int) -> None:
    for key, value in zip(RANGES, (0, n_queries - 1, 0, n_keys - 1)):
        st.session_state[key] = value


def zoom(n_queries: int, n_keys: int) -> tuple[range, range]:
    """The query and key ranges to draw (sliders, in the link as long_q0 … long_k1; whole by
    default; a box dragged on the levels sets them too), and, zoomed in, a button back to the whole.
    The head view zooms a captured pattern too large for float32 with the same ones."""
    left, right = st.columns(2)
    with left:
        q0 = integer("First query", 0, n_queries - 1, "head_long_q0", 0)
        q1 = integer("Last query", 0, n_queries - 1, "head_long_q1", n_queries - 1)
    with right:
        k0 = integer("First key", 0, n_keys - 1, "head_long_k0", 0)
        k1 = integer("Last key", 0, n_keys - 1, "head_long_k1", n_keys - 1)
    rows, cols = clamp_region(n_queries, q0, q1), clamp_region(n_keys, k0, k1)
    if (len(rows), len(cols)) == (n_queries, n_keys):  # the whole, as a link without ranges opens
        for key in RANGES:
            unremember(key)
    else:
        st.button("Whole text", key="head_long_whole", on_click=_whole, args=(n_queries, n_keys),
                  help="Back to every query and key (double-clicking the levels heatmap does the same).")
    return rows, cols


def render(result: AttentionResult) -> None:
    render_whole(result.model, result.tokens.text)


def render_whole(model: str, text: str) -> None:
    """The view of a text past the model's capture limit, from the model's name and the text."""
    long = long_input(model, text)
    n = long.length
    whole_for_a_new_text((model, hash(text)))
    st.info(
        f"This text has {n:,} tokens, more than the {cache.backend(model).max_tokens:,} the other views capture. "
        "This view reads all of them: it keeps each layer's queries and keys and computes one head's attention "
        "block by block, never the whole table at once. Pick a head, then zoom in with the ranges below."
    )
    if long.dropped:
        st.caption(f"The model reads at most {n:,} tokens: the last {long.dropped:,} were dropped.")
    layer, head = layer_head_choice(long.n_layers, long.n_heads, key="head", reductions=False)
    left, right = st.columns([2, 1])
    with left:
        pooling = choice("Each tile shows", POOLINGS, "head_long_pooling", widget="radio", horizontal=True,
                         format_func=POOLING_NAMES.get)
    with right:
        colours = choice("Colours", COLOURS, "head_long_scale", widget="radio", horizontal=True,
                         format_func=COLOUR_NAMES.get, help="Log: over thousands of keys most weights are tiny "
                         f"(about 1 / the number of keys); the log scale tells them apart down to {LOG_FLOOR:g}.")
    rows, cols = zoom(n, n)
    whole = head_overview(long, (model, text), layer, head, pooling == "mean")
    heatmap = long_heatmap(long, layer, head, whole, rows, cols, pooling, colours=colours)
    title = f"layer {layer}, head {head}: queries {rows.start}–{rows.stop - 1}, keys {cols.start}–{cols.stop - 1}"
    long_heatmap_chart(heatmap, long.tokens.labels, title, "head_long_chart", ranges=RANGES)
    if heatmap.is_exact:
        st.caption("Every cell is one query–key pair with its exact weight (hover shows it), computed from the "
                   "softmax normalizers of the whole row, so the weights are the model's own.")
    else:
        st.caption(
            f"Each square is a tile of {heatmap.tile_rows}×{heatmap.tile_cols} tokens showing the "
            f"{'largest' if pooling == 'max' else 'mean'} weight among its query–key pairs ({pooling} pooling), "
            f"in 256 shades ({'log scale; ' if colours == 'log' else ''}the colour bar gives the weights). Narrow the "
            f"ranges to {TILES} tokens or fewer each way to see exact cells."
        )
