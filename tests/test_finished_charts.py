"""Charts as a new user reads them: rows named for what they are, a removed head framed (not a filled
square that reads like an attention cell), heatmaps whose empty end is the page's background in the
dark theme too, the "Copy link" button at the top beside the title, and Inside one head folded into
steps, the first open."""

import numpy as np
import pytest
from apphelpers import app, charts, switch_view
from streamlit.runtime.context import ContextProxy, StreamlitTheme

from attention_viz.figures.ablation import pattern_pair
from attention_viz.figures.grid import heads_grid
from attention_viz.figures.heatmap import attention_heatmap
from attention_viz.figures.inside import matrix_heatmap
from attention_viz.figures.masks import mask_heatmap, scores_heatmap
from attention_viz.figures.style import BACKGROUND
from attention_viz.ui import cache

LABELS = ["the", "cat", "sat"]
PATTERN = np.array([[1.0, 0, 0], [0.5, 0.5, 0], [0.2, 0.3, 0.5]], dtype=np.float32)
SCORES = np.array([[1.0, -np.inf, -np.inf], [0.5, -1.0, -np.inf], [0.2, 0.3, -2.0]])


def colours(figure) -> list:
    """The colour scale of the figure's heatmap (its trace's, or its shared colour axis's)."""
    spec = figure.to_plotly_json()
    trace = spec["data"][0]
    scale = trace.get("colorscale") or spec["layout"]["coloraxis"]["colorscale"]
    return [list(stop) for stop in scale]


def low_end(scale: list) -> str:
    return scale[0][1]


def middle(scale: list) -> str:
    return next(colour for stop, colour in scale if abs(stop - 0.5) < 1e-9)


@pytest.mark.parametrize("build", [
    lambda dark: attention_heatmap(PATTERN, LABELS, dark=dark),
    lambda dark: matrix_heatmap(PATTERN, "m", diverging=False, dark=dark),
    lambda dark: pattern_pair(PATTERN, PATTERN, (LABELS, LABELS), (LABELS, LABELS), dark=dark),
], ids=["attention", "matrix", "before-after"])
def test_weights_start_from_the_page_background_in_either_theme(build):
    light, dark = colours(build(False)), colours(build(True))
    assert low_end(light).lower() in ("rgb(247,251,255)", "#f7fbff")  # Plotly's Blues: white, as before
    assert low_end(dark) == BACKGROUND[True]
    assert dark[-1][1] != BACKGROUND[True]  # the most weight stands out from the page


@pytest.mark.parametrize("build", [
    lambda dark: attention_heatmap(PATTERN - 0.3, LABELS, diverging=True, dark=dark),
    lambda dark: matrix_heatmap(PATTERN - 0.3, "m", dark=dark),
    lambda dark: scores_heatmap(SCORES, LABELS, LABELS, "scores", dark=dark),
], ids=["difference", "matrix", "masked scores"])
def test_signed_values_are_the_page_background_at_zero_in_the_dark(build):
    assert middle(colours(build(True))) == BACKGROUND[True]
    assert middle(colours(build(False))).lower() in ("rgb(247,247,247)", "#f7f7f7")  # RdBu's white middle


def test_a_mask_is_drawn_off_the_dark_background_and_the_theme_is_part_of_the_cache_key():
    light, dark = colours(mask_heatmap(PATTERN > 0, LABELS, LABELS, "mask")), colours(
        mask_heatmap(PATTERN > 0, LABELS, LABELS, "mask", dark=True))
    assert light != dark and low_end(dark) != "#ffffff"
    cached = [colours(cache.figure(attention_heatmap, PATTERN, LABELS, dark=dark)) for dark in (False, True, False)]
    assert cached[0] == cached[2] != cached[1]  # one cached figure per theme


def test_a_removed_head_is_framed_not_filled():
    stack = np.full((2, 3, 3, 3), 1 / 3, dtype=np.float32)
    spec = heads_grid(stack, marked={(1, 2)}).to_plotly_json()
    frames = [shape for shape in spec["layout"]["shapes"] if shape.get("name", "").startswith("removed")]
    assert [frame["name"] for frame in frames] == ["removed 1.2"]
    frame, tile = frames[0], 3 + 1  # a tile of 3 cells and its gutter
    assert frame["fillcolor"] == "rgba(0,0,0,0)" and frame["line"]["width"] >= 2
    assert (frame["x0"], frame["x1"], frame["y0"], frame["y1"]) == (2 * tile - 1, 3 * tile - 1, tile - 1, 2 * tile - 1)
    assert spec["data"][1]["marker"]["color"] == "rgba(0,0,0,0.01)"  # no red square on top of a cell


def test_across_layers_calls_its_rows_layers():
    at = app(view="layers")
    assert not at.exception and not at.error
    rows = next(c for c in charts(at) if "in every layer" in c["layout"]["title"]["text"])
    assert rows["layout"]["yaxis"]["title"]["text"] == "layer"
    assert rows["layout"]["yaxis"]["ticktext"][:2] == ["layer 0", "layer 1"]
    rollout = next(c for c in charts(at) if "rollout" in c["layout"]["title"]["text"])
    assert rollout["layout"]["yaxis"]["title"]["text"] == "query (attending)"  # its rows are tokens


def popovers(at):
    """Every popover block on the page, found by walking the element tree."""
    found, stack = [], [at._tree]
    while stack:
        node = stack.pop()
        if getattr(node, "type", None) == "popover":
            found.append(node)
        stack.extend(getattr(node, "children", {}).values())
    return found


def test_the_copy_link_is_at_the_top_beside_the_title_not_in_the_sidebar():
    at = app(view="head", layer="2", head="4")
    assert not at.exception
    (link,) = popovers(at)
    assert link.proto.popover.label == "Copy link"
    code = [element for element in link.children.values() if element.type == "code"]
    assert len(code) == 1 and "view=head" in code[0].value and "layer=2" in code[0].value and "head=4" in code[0].value
    assert not [element for element in at.sidebar if element.type == "code"]
    # beside the title: its column sits in the same row as the title's, first on the page
    row = next(block for block in at.main.children.values() if block.type == "flex_container")
    assert [column.children[0].type for column in row.children.values()] == ["title", "popover"]


def test_inside_one_head_is_folded_into_steps_with_the_first_open():
    at = app(view="inside")
    assert not at.exception and not at.error
    steps = [e for e in at.expander if e.label[:1].isdigit()]
    assert [e.label.split(" · ")[0] for e in steps] == ["1", "2", "3", "4"]
    assert [e.proto.expanded for e in steps] == [True, False, False, False]
    assert sum(len([c for c in step.get("plotly_chart")]) for step in steps) == len(charts(at))  # all in steps


@pytest.fixture
def dark_page(monkeypatch):
    monkeypatch.setattr(ContextProxy, "theme", property(lambda self: StreamlitTheme({"type": "dark"})))


def test_in_the_dark_theme_the_pages_heatmaps_start_from_its_background(dark_page):
    at = app(view="inside")
    assert not at.exception and not at.error
    heatmaps = [c for c in charts(at) if c["data"][0]["type"] == "heatmap"]
    assert heatmaps and all(BACKGROUND[True] in str(c["data"][0]["colorscale"]) for c in heatmaps)
    for view in ("layers", "head"):  # the landing view too
        at = switch_view(at, view)
        assert all(BACKGROUND[True] in str(c["data"][0]["colorscale"]) for c in charts(at)), view
    for view in ("compare", "basics", "grid"):  # their token heatmaps (the grid: the enlarged head)
        at = switch_view(at, view)
        shown = [c for c in charts(at) if c["data"][0]["type"] == "heatmap" and c["data"][0].get("colorscale")
                 and "key" in str(c["layout"].get("xaxis", {}).get("title", ""))]
        assert shown and all(BACKGROUND[True] in str(c["data"][0]["colorscale"]) for c in shown), view
