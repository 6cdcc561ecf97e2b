"""Circuits: the edges between heads that carry the difference between a clean and a corrupt input
(edge attribution patching, Syed et al. 2023; EAP-IG, Hanna et al. 2024), and how much of it the top
edges keep when the circuit is run on its own. The edges are scored once per input pair and method
(:class:`attention_viz.backends.circuit.CircuitSearch`, cached here); the slider re-runs only the
circuit's forward. A click on a head opens its heatmap on the clean input."""

from __future__ import annotations

from dataclasses import replace

import streamlit as st

from ...analysis.patching import PRESETS
from ...analysis.circuit import DEFAULT_TOP, IG_STEPS, METHODS, Circuit, curve_sizes, head_of
from ...core.names import DECODER_SELF
from ...core.result import AttentionResult
from ...figures.circuit import circuit_graph, kept_curve
from ...figures.heatmap import attention_heatmap
from .. import cache, plain
from ..plain import literal
from ..export import chart, drawn_from, figure_downloads
from ..fallback import runs_another_model
from ..heavy import heavy
from ..theme import dark
from ..pair import pair_inputs
from ..widgets import choice, integer

EXPLANATION = (
    "Patching says which heads matter one at a time; a **circuit** says how they work together. Every head and "
    "feed-forward block writes into the residual stream, and every later one reads the sum, so each pair is an "
    "**edge**: a head's query, key and value inputs are three separate receivers. An edge's score is "
    "(what the writer writes on the clean input − on the corrupt one) · ∂metric/∂(the receiver's input): how much "
    "the metric would move if that edge alone carried the clean value. The top edges are then checked by running "
    "them: the clean input where only the circuit's edges carry this run's values and every other edge the corrupt "
    "run's (path patching); the share of the clean − corrupt gap it keeps is its **faithfulness**."
)
DEMO_MODEL = "induction"  # the shipped decoder, for a sidebar model without a circuit
PAGE_TOKENS = 64  # scoring is one forward and backward; the command line takes longer inputs
PAGE_STEPS = 20  # eap-ig's steps here; the command line takes up to MAX_IG_STEPS
MOST_EDGES = 300  # the slider's end: a drawing of more edges is a thicket


# a search keeps both runs' outputs of every component (and a reference to its model): a few at a time
@st.cache_resource(max_entries=4, show_spinner="Scoring every edge…")
def _search(model: str, clean: str, corrupt: str, answer: str, wrong: str, method: str, steps: int):
    from ...backends.circuit import CircuitSearch  # the model's forward (torch) behind the page edge

    with heavy("scoring the edges"):
        return CircuitSearch(cache.backend(model), clean, corrupt, answer, wrong, method, steps)


@st.cache_resource(max_entries=64, show_spinner="Running the circuit…")  # each holds the scores
def measured(model: str, clean: str, corrupt: str, answer: str, wrong: str, method: str, steps: int,
             top: int) -> Circuit:
    """The circuit of the ``top`` edges, run; the scores behind it are computed once per pair and method."""
    return _search(model, clean, corrupt, answer, wrong, method, steps).result(top)


@st.cache_resource(max_entries=16, show_spinner="Running circuits of every size…")
def curve(model: str, clean: str, corrupt: str, answer: str, wrong: str, method: str,
          steps: int) -> tuple[list[int], list[float]]:
    search = _search(model, clean, corrupt, answer, wrong, method, steps)
    sizes = curve_sizes(int(search.graph.allowed().sum()))
    with heavy("circuits of every size"):
        return sizes, search.kept_curve(sizes).tolist()


def clicked_node(event, curve: int) -> str | None:
    points = event.selection.points if event is not None else []
    for point in points:
        if point.get("curve_number") == curve and point.get("customdata") is not None:
            return str(point["customdata"])
    return None


def render(result: AttentionResult) -> dict:
    st.markdown(EXPLANATION)
    backend = cache.backend(result.model)
    if backend.shape != "decoder-only" or not backend.can_ablate:
        runs_another_model(DEMO_MODEL, f"{literal(result.model)} has no circuit here (edges are traced on decoders "
                           "whose residual stream is a sum of what each head writes), so it shows "
                           f"{DEMO_MODEL} on its preset pair. Pick {DEMO_MODEL}, or an hf: decoder folder (GPT-2, "
                           "Llama, Qwen, Gemma, Mistral, Phi-3, OLMo …), in the sidebar for your own.")
        result, backend = cache.run(DEMO_MODEL, PRESETS[DEMO_MODEL].clean), cache.backend(DEMO_MODEL)
    clean, corrupt, answer, wrong = pair_inputs("circuit", result.model, result.tokens.text)
    method = choice("Scores", list(METHODS), "circuit_method", "eap", widget="radio", horizontal=True,
                    format_func=lambda m: f"{m}: {METHODS[m]}")
    if not (clean.strip() and corrupt.strip() and answer.strip() and wrong.strip()):
        st.info("Type a clean and a corrupt input of the same length, the clean input's next token and the "
                "corrupt one's, to see the edges that carry the difference.")
        return {}
    tokens = len(backend.tokenize(clean)[0])
    if tokens > PAGE_TOKENS:
        plain.info(f"The clean input has {tokens} tokens: this page traces circuits on inputs of up to "
                   f"{PAGE_TOKENS}; the command line (python -m attention_viz circuit) takes longer ones.")
        return {}
    steps = (integer("Interpolation steps (each one more forward and backward)", 1, PAGE_STEPS, "circuit_steps",
                     IG_STEPS) if method == "eap-ig" else IG_STEPS)
    pair = (result.model, clean, corrupt, answer.strip(), wrong.strip(), method, steps)
    edges = int(_search(*pair).graph.allowed().sum())
    top = integer("Edges in the circuit (largest |score| first)", 0, min(edges, MOST_EDGES), "circuit_top",
                  min(DEFAULT_TOP, edges))
    circuit = measured(*pair, top)
    first, second, third = st.columns(3)
    first.metric("Metric on the clean input", f"{circuit.clean:.4f}")
    second.metric("Metric on the corrupt input", f"{circuit.corrupt:.4f}")
    third.metric(f"Kept by the top {top} edges", f"{circuit.metric_kept:.3f}")
    plain.caption(f"Measured: {circuit.metric}.")
    figure = cache.figure(circuit_graph, circuit, dark=dark())
    with drawn_from(replace(result.provenance, source=clean, target=None)):  # the pair typed here
        event = chart(st, figure, key="circuit_graph", on_select="rerun", selection_mode="points")
        figure_downloads(figure, "circuit_graph")
    st.caption("Red edges push towards the clean answer, blue ones away; width is |score|. Solid lines enter a "
               "head's query, dashed its key, dotted its value. Click a head to see its attention below.")
    with st.expander("How much circuits of every size keep", key="circuit_curve_box", on_change="rerun") as box:
        if box.open:
            sizes, kept = curve(*pair)
            chart(st, cache.figure(kept_curve, sizes, kept, top, method), key="circuit_curve")
            st.caption("An edge carries nothing unless a path of chosen edges joins it to the logits, so small "
                       "circuits can keep nothing at all.")
    clicked = clicked_node(event, len(figure.data) - 1)
    if clicked is not None and head_of(clicked) is not None and clicked != st.session_state.get("_circuit_clicked"):
        st.session_state["circuit_head"] = clicked
    st.session_state["_circuit_clicked"] = clicked
    shown = choice("Head shown", circuit.graph.head_nodes, "circuit_head", circuit.first_head())
    layer, head = head_of(shown)
    run = cache.run(result.model, clean)
    labels = list(run.tokens.labels)
    heatmap = cache.figure(attention_heatmap, run.pattern(DECODER_SELF, layer, head), labels, labels,
                           title=f"layer {layer}, head {head} on the clean input")
    with drawn_from(run.provenance):
        chart(st, heatmap, key="circuit_head_map")
    with st.expander("The circuit's edges"):
        st.dataframe(circuit.edges(), hide_index=True)
    return {}
