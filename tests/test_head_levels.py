"""The head view (and the all-heads page's enlarged head) of a pattern past 256 × 256 cells: uint8
levels with one scale, zoomed by query and key ranges down to exact float cells (issue 16: at most
0.5 MB to the browser at 512 tokens of minilm). Below that size nothing changed."""

from __future__ import annotations

import numpy as np
import pytest

from attention_viz.analysis.head_levels import LEVELS_ABOVE, captured_heatmap, needs_levels
from attention_viz.backends.registry import load_backend
from attention_viz.figures.long_heatmap import long_heatmap_figure
from attention_viz.core.names import ENCODER_SELF
from attention_viz.core.result import AttentionResult
from attention_viz.analysis.selection import Choice, displayed
from attention_viz.ui.level_canvas import zoom_to
from attention_viz.ui.views.head import WINDOW
from attention_viz.ui.views.long_head import RANGES

from apphelpers import app, charts, level_maps, switch_view
from benchmarks.texts import text_of_tokens
from single_view import array, link

LAYER, HEAD = 2, 5
MB = 1_000_000


@pytest.fixture(scope="module")
def text() -> str:
    return text_of_tokens(load_backend("minilm"), 512)


@pytest.fixture(scope="module")
def captured(text: str) -> AttentionResult:
    return load_backend("minilm").run(text)


def opened(text: str, **params: str):
    at = app(text=text, view="head", layer=str(LAYER), head=str(HEAD), **params)
    assert not at.exception and not at.error
    return at


def within_a_level(codes: np.ndarray, expected: np.ndarray) -> bool:
    """Levels of one scale (the largest value) equal ``expected`` to within 1/255 of the scale."""
    scale = float(expected.max())
    return bool(np.abs(codes.astype(np.float64) / 255 * scale - expected).max() <= scale / 255)


def test_512_tokens_go_as_levels_of_the_captured_pattern_under_half_a_megabyte(text, captured):
    at = opened(text)
    assert not at.get("plotly_chart")  # our own element draws the levels (ui/level_canvas.py)
    [element] = [e for e in at.get("bidi_component") if e.proto.component_name == "attention_viz.level_canvas"]
    assert len(element.proto.bytes) + len(element.proto.js_content) + len(element.proto.css_content) <= 0.5 * MB
    [(header, colours, codes)] = level_maps(at)
    pattern = captured.pattern(ENCODER_SELF, LAYER, HEAD)
    assert codes.dtype == np.uint8 and codes.shape == (512, 512)
    assert within_a_level(codes, pattern)
    assert header["bar_ticks"][-1] == [255.0, f"{pattern.max():.3g}"]  # the colour bar reads in weights
    assert header["query_names"][0] == "0: [CLS]" and header["key_names"][511] == "511: [SEP]"  # hover names both
    assert "level {z} of 255" in header["value"] and "± ½" in header["value"]
    assert header["zoomable"] and header["file"] == "attention-viz_minilm_head_chart_L2H5"
    assert colours[0, 3] == 255  # no threshold: level 0 is drawn, the lightest blue
    assert any("level from 0 to 255" in caption.value for caption in at.caption)


def test_a_box_dragged_on_the_levels_sets_the_ranges_and_the_whole_text_button_goes_back(text, captured):
    at = opened(text)
    element = "head_chart_levels"
    at.session_state[element] = {"zoom": {"q0": 100, "q1": 355, "k0": 0, "k1": 255}}  # what the element sends
    zoom_to(at.session_state, element, RANGES)  # the element's callback, as its trigger runs it
    at.run()
    assert not at.exception and not level_maps(at)  # 256 × 256: exact cells, a Plotly heatmap
    assert np.array_equal(array(charts(at)[0]["data"][0]["z"]), captured.pattern(ENCODER_SELF, LAYER, HEAD)[100:356, :256])
    assert {name: link(at)[name] for name in ("long_q0", "long_q1", "long_k0", "long_k1")} == {
        "long_q0": "100", "long_q1": "355", "long_k0": "0", "long_k1": "255"}
    at.button(key="head_long_whole").click().run()  # zoomed in to exact cells: the page's way back
    [(_, _, codes)] = level_maps(at)
    assert codes.shape == (512, 512) and "long_q1" not in link(at)  # the whole: what a link opens on anyway
    assert not [b for b in at.button if b.key == "head_long_whole"]  # only while zoomed in


def test_hidden_special_tokens_and_the_threshold_apply_to_the_levels(text, captured):
    at = opened(text, hide_special="1", threshold="0.1")
    [(header, colours, codes)] = level_maps(at)
    expected = displayed(captured, Choice(ENCODER_SELF, LAYER, HEAD, hide_special=True)).matrix
    assert codes.shape == expected.shape == (510, 510)
    assert not any("[CLS]" in label or "[SEP]" in label for label in header["query_names"] + header["key_names"])
    below = expected < 0.1
    assert below.any() and (codes[below] == 0).all()  # blank...
    assert colours[0, 3] == 0 and (colours[1:, 3] == 255).all()  # ...drawn as nothing, like the float view's gaps
    kept = np.where(below, 0.0, expected)
    assert within_a_level(np.where(below, 0, codes), kept)


def test_log_and_per_row_colours_and_value_norms_still_work_on_levels(text, captured):
    at = opened(text, scale="log")
    [(header, _, codes)] = level_maps(at)
    logs = np.log10(np.maximum(captured.pattern(ENCODER_SELF, LAYER, HEAD), 1e-4))
    assert np.abs(-4 + codes.astype(np.float64) / 255 * 4 - logs).max() <= 4 / 255  # 1e-4 … 1 in 255 steps
    assert [label for _, label in header["bar_ticks"]] == ["1e-4", "1e-3", "1e-2", "1e-1", "1"]
    at.radio(key="head_scale").set_value("row").run()
    [(header, _, codes)] = level_maps(at)
    pattern = captured.pattern(ENCODER_SELF, LAYER, HEAD)
    assert header["bar_title"] == "÷ row's largest"
    assert within_a_level(codes, pattern / pattern.max(axis=1, keepdims=True))
    at.radio(key="weighting").set_value("norms").run()
    assert not at.exception
    [(header, _, codes)] = level_maps(at)
    assert codes.dtype == np.uint8 and "value-weighted norms" in header["title"]


def test_the_all_heads_page_enlarges_a_head_as_levels(text, captured):
    at = opened(text)
    switch_view(at, "grid")
    assert not at.exception
    [(header, _, codes)] = level_maps(at)
    layer, head = int(at.slider(key="grid_layer").value), int(at.select_slider(key="grid_head").value)
    assert codes.dtype == np.uint8 and within_a_level(codes, captured.pattern(ENCODER_SELF, layer, head))
    assert not header["zoomable"]  # the Head view zooms
    assert any("zooms into any region" in caption.value for caption in at.caption)


def test_below_256_by_256_cells_the_head_view_sends_float32_as_before():
    assert not needs_levels((256, 256)) and needs_levels((256, 257)) and LEVELS_ABOVE == 256 * 256
    at = app(text=text_of_tokens(load_backend("minilm"), 256), view="head")
    assert not at.exception
    figure = charts(at)[0]
    assert array(figure["data"][0]["z"]).dtype == np.float32
    assert len(figure["layout"]["xaxis"]["categoryarray"]) == WINDOW  # the 64-token window, as before
    assert "long_q0" not in link(at)


def test_past_the_tiles_a_side_the_levels_are_the_largest_weight_of_each_tile():
    matrix = np.random.default_rng(0).random((302, 280), dtype=np.float32)  # 84,560 cells
    heatmap = captured_heatmap(matrix, range(302), range(280), tiles=64)
    assert (heatmap.tile_rows, heatmap.tile_cols) == (5, 5) and heatmap.codes.shape == (61, 56)
    largest = np.array([[matrix[r : r + 5, c : c + 5].max() for c in range(0, 280, 5)] for r in range(0, 302, 5)])
    assert np.abs(heatmap.values() - largest).max() <= heatmap.scale / 510 + 1e-7
    zoomed = captured_heatmap(matrix, range(40, 296), range(10, 266))  # 256 × 256: exact
    assert zoomed.is_exact and np.array_equal(zoomed.exact, matrix[40:296, 10:266])


def test_queries_and_keys_keep_their_own_labels_and_positions_in_a_rectangle():
    matrix = np.random.default_rng(1).random((300, 250), dtype=np.float32)  # e.g. cross-attention
    queries, keys = [f"q{i}" for i in range(300)], [f"k{i}" for i in range(250)]
    levels = long_heatmap_figure(captured_heatmap(matrix, range(300), range(250)), queries, "t", keys, "weight")
    trace = levels.data[0]
    assert trace.z.dtype == np.uint8 and trace.z.shape == (300, 250)
    assert (trace.y[0], trace.x[-1]) == ("0: q0", "249: k249")
    exact = long_heatmap_figure(captured_heatmap(matrix, range(100, 300), range(50, 250)), queries, "t", keys, "weight")
    assert (exact.data[0].y[0], exact.data[0].x[0]) == ("100: q100", "50: k50")
    assert np.array_equal(exact.data[0].z, matrix[100:, 50:])
