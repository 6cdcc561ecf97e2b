"""The head view's heatmap makes the room to label every key: up to the point where the colour bar
beside the plot would leave too little width for every key at the smallest label size, the bar stays
beside it; past it the bar lies under the plot and the keys get its width (figures/heatmap.py).
The browser test (tests/test_browser_labels.py) checks that every one of 64 tokens is then drawn."""

import numpy as np

from attention_viz.figures.heatmap import BAR_BELOW_ROOM, attention_heatmap
from attention_viz.figures.text_width import COLOUR_BAR_MIN, LINE_BOX, MIN_TICK_SIZE, PAGE_WIDTH


def heatmap(n: int) -> dict:
    return attention_heatmap(np.full((n, n), 1 / n), [f"w{i}" for i in range(n)], title="layer 0, head 0").to_dict()


def test_a_short_sentence_keeps_its_colour_bar_beside_the_plot():
    figure = heatmap(14)
    assert figure["layout"]["margin"]["r"] >= COLOUR_BAR_MIN
    assert figure["data"][0]["colorbar"].get("orientation", "v") == "v"
    assert figure["layout"]["xaxis"]["tickangle"] == -60


def test_past_what_fits_beside_the_bar_it_lies_under_the_plot_and_the_keys_get_its_width():
    # keys upright at the smallest size, a line box and a pixel apart, in the page's width less the
    # left labels' margin and the colour bar's: fewer than 64 fit
    figure = heatmap(64)
    beside = int((PAGE_WIDTH - figure["layout"]["margin"]["l"] - COLOUR_BAR_MIN) // (LINE_BOX * MIN_TICK_SIZE + 1))
    assert beside < 64
    bar = figure["data"][0]["colorbar"]
    assert bar["orientation"] == "h" and bar["yanchor"] == "bottom" and bar["y"] == 0
    layout = figure["layout"]
    assert layout["margin"]["r"] < COLOUR_BAR_MIN and layout["margin"]["b"] >= BAR_BELOW_ROOM
    assert layout["xaxis"]["tickangle"] == -90
    assert layout["height"] >= layout["margin"]["t"] + layout["margin"]["b"] + 64 * LINE_BOX * 12
