"""The bytes of our levels element (figures/level_canvas.py): what ui/level_canvas.js draws."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from attention_viz.analysis.head_levels import captured_heatmap
from attention_viz.analysis.long_input import LongHeatmap
from attention_viz.figures.axes import MAX_TICKS
from attention_viz.figures.level_canvas import level_canvas_payload, position_ticks, read_payload

JS = Path(__file__).resolve().parents[1] / "attention_viz" / "ui" / "level_canvas.js"


def pattern(rows: int, cols: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).dirichlet(np.ones(cols), rows).astype(np.float32)


def test_the_levels_and_colours_arrive_as_built_and_the_header_describes_them():
    matrix = pattern(300, 280)
    heatmap = captured_heatmap(matrix, range(300), range(280))
    labels, keys = [f"q{i}" for i in range(300)], [f"k{i}" for i in range(280)]
    header, colours, codes = read_payload(level_canvas_payload(heatmap, labels, "layer 1, head 2", keys,
                                                               subtitle="minilm · “a b”", file_name="f"))
    assert np.array_equal(codes, heatmap.codes) and codes.shape == (300, 280)
    assert header["shape"] == [300, 280] and (header["n_queries"], header["n_keys"]) == (300, 280)
    assert header["query_names"][299] == "299: q299" and header["key_names"][0] == "0: k0"
    assert colours[0].tolist() == [247, 251, 255, 255] and colours[255].tolist() == [8, 48, 107, 255]  # Blues
    assert header["bar_ticks"][-1] == [255.0, f"{matrix.max():.3g}"]
    assert header["value"].startswith("weight: level {z} of 255 (255 = ")
    assert (header["title"], header["subtitle"], header["file"], header["format"]) == (
        "layer 1, head 2", "minilm · “a b”", "f", "png")


def test_token_ticks_are_every_kth_token_of_the_region_at_their_cells_centres():
    matrix = pattern(512, 512)
    labels = [f"t{i}" for i in range(500)] + ["x" * 40] * 12
    header, _, _ = read_payload(level_canvas_payload(captured_heatmap(matrix, range(512), range(512)), labels, "t"))
    assert len(header["x_ticks"]) == MAX_TICKS and header["x_ticks"][:2] == [[0.5, "t0"], [8.5, "t8"]]
    assert header["x_ticks"][-1][1] == "x" * 23 + "…"  # shortened as the Plotly heatmaps' ticks
    zoomed = captured_heatmap(matrix, range(100, 400), range(200, 500))  # 90,000 cells: still levels
    header, _, codes = read_payload(level_canvas_payload(zoomed, labels, "t"))
    assert codes.shape == (300, 300) and header["rows"] == [100, 400, 1] and header["cols"] == [200, 500, 1]
    assert header["query_names"][0] == "100: t100" and header["x_ticks"][0] == [0.5, "t200"]


def test_tiles_are_named_by_positions_and_the_axes_say_how_many_tokens_a_tile_holds():
    codes = np.arange(64 * 64, dtype=np.uint32).reshape(64, 64).astype(np.uint8)
    tiled = LongHeatmap(range(0, 4096), range(0, 4096), 64, 64, "max", codes, 0.9, None, "log")
    header, _, drawn = read_payload(level_canvas_payload(tiled, [str(i) for i in range(4096)], "t"))
    assert np.array_equal(drawn, codes)
    assert header["query_names"] is None and header["x_title"] == "key position (tiles of 64)"
    assert header["bar_title"] == "largest weight" and "log scale" in header["value"]
    assert header["x_ticks"][1] == [1000 / 64, "1,000"]


def test_position_ticks_are_round_numbers_inside_the_span():
    for span, tile in ((range(0, 32768), 64), (range(1200, 5000), 8), (range(37, 90), 1)):
        ticks = position_ticks(span, tile)
        positions = [int(label.replace(",", "")) for _, label in ticks]
        assert 3 <= len(ticks) <= 9 and all(span.start <= p < span.stop for p in positions)
        step = positions[1] - positions[0]
        assert re.fullmatch(r"(1|2|5)0*", str(step)) and all(b - a == step for a, b in zip(positions, positions[1:]))
        assert all(where == (p - span.start) / tile for (where, _), p in zip(ticks, positions))


def test_a_threshold_blanks_level_zero_and_user_text_stays_as_typed():
    matrix = pattern(300, 300)
    hostile = ["<img src=x onerror=f()>", "**bold**", "$x$", "%{z}"] * 75
    heatmap = captured_heatmap(matrix, range(300), range(300), threshold=0.01)
    header, colours, _ = read_payload(level_canvas_payload(heatmap, hostile, "t"))
    assert colours[0, 3] == 0 and (colours[1:, 3] == 255).all()
    assert header["query_names"][:4] == ["0: <img src=x onerror=f()>", "1: **bold**", "2: $x$", "3: %{z}"]
    # the element writes every text as textContent: no HTML parser ever sees it
    source = JS.read_text()
    assert "textContent" in source and not re.search(r"innerHTML|outerHTML|insertAdjacentHTML|document\.write", source)


def test_exact_cells_are_not_levels():
    exact = captured_heatmap(pattern(100, 100), range(100), range(100))
    with pytest.raises(ValueError, match="exact cells"):
        level_canvas_payload(exact, [str(i) for i in range(100)], "t")
