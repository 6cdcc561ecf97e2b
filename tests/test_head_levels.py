"""The head view (and the all-heads page's enlarged head) of a pattern past 256 × 256 cells: uint8
levels with one scale, zoomed by query and key ranges down to exact float cells (issue 16: at most
0.5 MB to the browser at 512 tokens of minilm). Below that size nothing changed."""

from __future__ import annotations

import numpy as np
import pytest

from attention_viz.analysis.head_levels import LEVELS_ABOVE, captured_heatmap, needs_levels
from attention_viz.backends.registry import load_backend
from attention_viz.figures.long_heatmap import long_heatmap_figure
from attention_viz.names import ENCODER_SELF
from attention_viz.result import AttentionResult
from attention_viz.selection import Choice, displayed
from attention_viz.ui.views.head import WINDOW

from apphelpers import app, charts, switch_view
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
    spec = at.get("plotly_chart")[0].proto.spec
    assert len(spec.encode()) <= 0.5 * MB
    trace = charts(at)[0]["data"][0]
    codes = array(trace["z"])
    pattern = captured.pattern(ENCODER_SELF, LAYER, HEAD)
    assert codes.dtype == np.uint8 and codes.shape == (512, 512)
    assert within_a_level(codes, pattern)
    assert trace["colorbar"]["ticktext"][-1] == f"{pattern.max():.3g}"  # the colour bar reads in weights
    assert trace["x"][0] == "0: [CLS]" and trace["y"][511] == "511: [SEP]"  # hover names both tokens
    assert "level %{z} of 255" in trace["hovertemplate"] and "± ½" in trace["hovertemplate"]
    assert any("level from 0 to 255" in caption.value for caption in at.caption)


def test_zoomed_to_256_a_side_the_cells_are_the_exact_pattern_and_the_ranges_round_trip(text, captured):
    at = opened(text, long_q0="100", long_q1="355", long_k0="0", long_k1="255")
    trace = charts(at)[0]["data"][0]
    cells = array(trace["z"])
    assert cells.dtype == np.float32
    assert np.array_equal(cells, captured.pattern(ENCODER_SELF, LAYER, HEAD)[100:356, :256])
    assert trace["y"][0].startswith("100: ") and trace["x"][0] == "0: [CLS]" and "%{z:.4f}" in trace["hovertemplate"]
    at.slider(key="head_long_q1").set_value(200).run()
    shared = link(at)
    assert {name: shared[name] for name in ("long_q0", "long_q1", "long_k0", "long_k1")} == {
        "long_q0": "100", "long_q1": "200", "long_k0": "0", "long_k1": "255"}
    again = app(**shared)
    assert not again.exception and charts(again)[0]["data"][0]["z"] == charts(at)[0]["data"][0]["z"]
    assert array(charts(at)[0]["data"][0]["z"]).shape == (101, 256)


def test_hidden_special_tokens_and_the_threshold_apply_to_the_levels(text, captured):
    at = opened(text, hide_special="1", threshold="0.1")
    trace = charts(at)[0]["data"][0]
    codes = array(trace["z"])
    expected = displayed(captured, Choice(ENCODER_SELF, LAYER, HEAD, hide_special=True)).matrix
    assert codes.shape == expected.shape == (510, 510)
    assert not any("[CLS]" in label or "[SEP]" in label for label in trace["x"] + trace["y"])
    below = expected < 0.1
    assert below.any() and (codes[below] == 0).all()  # blank...
    assert trace["colorscale"][0][1] == "rgba(0,0,0,0)"  # ...drawn as nothing, like the float view's gaps
    kept = np.where(below, 0.0, expected)
    assert within_a_level(np.where(below, 0, codes), kept)


def test_log_and_per_row_colours_and_value_norms_still_work_on_levels(text, captured):
    at = opened(text, scale="log")
    trace = charts(at)[0]["data"][0]
    codes = array(trace["z"]).astype(np.float64)
    logs = np.log10(np.maximum(captured.pattern(ENCODER_SELF, LAYER, HEAD), 1e-4))
    assert np.abs(-4 + codes / 255 * 4 - logs).max() <= 4 / 255  # 1e-4 … 1 in 255 steps
    assert trace["colorbar"]["ticktext"] == ["1e-4", "1e-3", "1e-2", "1e-1", "1"]
    at.radio(key="head_scale").set_value("row").run()
    trace = charts(at)[0]["data"][0]
    pattern = captured.pattern(ENCODER_SELF, LAYER, HEAD)
    assert trace["colorbar"]["title"]["text"] == "÷ row's largest"
    assert within_a_level(array(trace["z"]), pattern / pattern.max(axis=1, keepdims=True))
    at.radio(key="weighting").set_value("norms").run()
    assert not at.exception
    figure = charts(at)[0]
    assert array(figure["data"][0]["z"]).dtype == np.uint8 and "value-weighted norms" in figure["layout"]["title"]["text"]


def test_the_all_heads_page_enlarges_a_head_as_levels(text, captured):
    at = opened(text)
    switch_view(at, "grid")
    assert not at.exception
    [enlarged] = [c for c in charts(at) if "categoryarray" in c["layout"]["xaxis"]]
    codes = array(enlarged["data"][0]["z"])
    layer, head = int(at.slider(key="grid_layer").value), int(at.select_slider(key="grid_head").value)
    assert codes.dtype == np.uint8 and within_a_level(codes, captured.pattern(ENCODER_SELF, layer, head))
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
