"""The Circuit page (Explore) and its figure: the induction preset drawn as a graph of its top edges
(width by |score|, colour by sign, q/k/v by dash), every choice in the link, the slider re-running
only the circuit (the scores computed once), a clicked head's heatmap, one-line refusals."""

from __future__ import annotations

import numpy as np
import pytest
from apphelpers import plain
from single_view import array, figures, link, open_view, problems

from attention_viz.analysis.circuit import position
from attention_viz.analysis.patching import PRESETS
from attention_viz.backends import circuit as backend_circuit
from attention_viz.backends.circuit import CircuitSearch
from attention_viz.backends.registry import load_backend
from attention_viz.core.names import DECODER_SELF
from attention_viz.figures.circuit import DASH, NEGATIVE, POSITIVE, circuit_graph

INDUCTION = PRESETS["induction"]


@pytest.fixture(scope="module")
def search() -> CircuitSearch:
    return CircuitSearch(load_backend("induction"), *INDUCTION.inputs)


def test_the_figure_draws_the_top_edges_by_score(search):
    circuit = search.result(12)
    figure = circuit_graph(circuit)
    edges = circuit.edges()
    lines = [t for t in figure.data[3:-1]]  # after the three legend entries, before the nodes
    assert len(lines) == 12 == len(edges)
    for line, edge in zip(lines, reversed(edges)):  # the largest drawn last
        assert (line.x[0], line.y[0]) == position(circuit.graph, edge["from"])
        assert line.line.color == (POSITIVE if edge["score"] > 0 else NEGATIVE)
        kind = edge["to"].rsplit(".", 1)[-1] if edge["to"].count(".") == 2 else ""
        assert line.line.dash == DASH[kind]
    widths = [line.line.width for line in reversed(lines)]
    assert widths == sorted(widths, reverse=True) and widths[0] > widths[-1]
    nodes = figure.data[-1]
    assert list(nodes.customdata) == [*circuit.graph.nodes, "logits"]
    assert f"keeps {circuit.metric_kept:.2f}" in figure.layout.title.text


def test_the_preset_is_drawn_with_every_choice_in_the_link(search):
    at = open_view("circuit", model="induction", text="a b c a b")
    assert not problems(at)
    graph, heatmap = figures(at)
    assert len(graph["data"]) == 3 + 20 + 1
    kept = [m for m in at.metric if m.label.startswith("Kept by the top 20")]
    assert kept and float(kept[0].value) == pytest.approx(search.result(20).metric_kept, abs=1e-3)
    shown = link(at)
    for key, value in (("clean", INDUCTION.clean), ("corrupt", INDUCTION.corrupt), ("answer", "a"), ("wrong", "x"),
                       ("method", "eap"), ("top", "20")):
        assert shown.get(key) == value, (key, shown)
    first = search.result(20).first_head()  # the view opens on the circuit's first head
    assert shown["head"] == first and first in search.result(20).circuit_nodes()
    layer, head = (int(i) for i in first.split("."))
    run = load_backend("induction").run(INDUCTION.clean)
    np.testing.assert_allclose(array(heatmap["data"][0]["z"]).reshape(len(run.tokens), -1),
                               run.pattern(DECODER_SELF, layer, head), atol=1e-6)


def test_a_link_opens_its_method_size_and_head_and_the_slider_reruns_only_the_circuit(monkeypatch):
    made, steps = [], []
    original = backend_circuit.CircuitSearch.__init__

    def counted(self, *args, **kwargs):
        made.append(args[5] if len(args) > 5 else kwargs.get("method"))
        steps.append(args[6] if len(args) > 6 else kwargs.get("steps"))
        original(self, *args, **kwargs)
    monkeypatch.setattr(backend_circuit.CircuitSearch, "__init__", counted)
    at = open_view("circuit", model="induction", text="a b c a b", method="eap-ig", top="81", head="1.2", steps="3")
    assert not problems(at)
    assert [m.value for m in at.metric if m.label.startswith("Kept by the top 81")] == ["1.000"]
    _, heatmap = figures(at)
    run = load_backend("induction").run(INDUCTION.clean)
    np.testing.assert_allclose(array(heatmap["data"][0]["z"]).reshape(len(run.tokens), -1),
                               run.pattern(DECODER_SELF, 1, 2), atol=1e-6)
    at.slider(key="circuit_top").set_value(0).run()
    assert [m.value for m in at.metric if m.label.startswith("Kept by the top 0")] == ["0.000"]
    assert link(at)["top"] == "0" and link(at)["method"] == "eap-ig" and link(at)["steps"] == "3"
    assert made.count("eap-ig") == 1 and steps == [3]  # scored once: the slider took the scores from the cache


def test_a_model_without_a_residual_circuit_shows_the_induction_model_and_says_so(search):
    at = open_view("circuit", model="minilm", text="The cat sat.")
    assert not problems(at)
    assert any("This view runs induction: minilm has no circuit here" in plain(i.value) for i in at.info)
    assert len(figures(at)) == 2
    assert [m.value for m in at.metric if m.label.startswith("Kept by the top 20")] == [
        f"{search.result(20).metric_kept:.3f}"]


def test_inputs_of_different_lengths_are_one_line():
    at = open_view("circuit", model="induction", text="a b c a b", clean="a b c a b", corrupt="a b c d a b",
                   answer="c", wrong="d")
    (message,) = problems(at)
    assert "has 6 tokens and the corrupt 7" in message and "\n" not in message
    assert not figures(at)


def test_the_app_lists_the_page_under_explore():
    from apphelpers import app, charts

    at = app(view="circuit", model="induction", text="a b c a b")
    assert not at.exception and not at.error and len(charts(at)) == 2
    (explore,) = [radio for radio in at.sidebar.radio if radio.key == "nav_explore"]
    assert explore.value == "circuit" and explore.format_func("circuit") == "Circuit"


def test_a_gpt2_folder_gets_its_circuit_drawn(tmp_path, monkeypatch):
    from test_hf_backend import save_gpt2

    save_gpt2(tmp_path)
    monkeypatch.setenv("ATTENTION_VIZ_MODEL_ROOTS", str(tmp_path))
    at = open_view("circuit", model=f"hf:{tmp_path}", text="the cat sat on the mat and the dog",
                   clean="the cat sat on the mat and the dog", corrupt="the dog sat on the mat and the cat",
                   answer="cat", wrong="dog", top="9")
    assert not problems(at)
    graph, _ = figures(at)
    assert len(graph["data"]) == 3 + 9 + 1
    assert "mlp 0" in graph["data"][-1]["customdata"]


def test_a_click_names_the_node_of_the_nodes_trace_only():
    from types import SimpleNamespace

    from attention_viz.ui.views.circuit import clicked_node

    event = SimpleNamespace(selection=SimpleNamespace(points=[
        {"curve_number": 4, "point_index": 0},  # an edge's line
        {"curve_number": 9, "point_index": 6, "customdata": "1.2"},
    ]))
    assert clicked_node(event, 9) == "1.2" and clicked_node(event, 4) is None and clicked_node(None, 9) is None


def test_the_curve_of_every_size_is_drawn_when_its_box_is_opened(search):
    at = open_view("circuit", model="induction", text="a b c a b")
    assert len(figures(at)) == 2  # closed: no circuits of every size run
    at.session_state["circuit_curve_box"] = True
    at.run()
    assert not problems(at)
    curve = figures(at)[1]
    kept = array(curve["data"][0]["y"])
    assert kept[0] == pytest.approx(0.0, abs=1e-5) and kept[-1] == pytest.approx(1.0, abs=1e-5)
    sizes = [int(k) for k in array(curve["data"][0]["customdata"])]
    middle = len(sizes) // 2
    assert kept[middle] == pytest.approx(search.result(sizes[middle]).metric_kept, abs=1e-5)
