"""Label widths estimated without a browser, and the heatmap margins built from them (the browser
tests check in Chromium that those margins hold the labels: no figure is drawn twice)."""

import numpy as np
import plotly.graph_objects as go

from attention_viz.figures.heatmap import attention_heatmap
from attention_viz.figures.text_width import em_width, heatmap_margins, pixels, rotated_height


def test_wider_scripts_and_emoji_count_wider_and_joiners_count_nothing():
    assert em_width("東京大学") > em_width("tokyo") > em_width("ill")
    assert em_width("WWW") > em_width("aaa") > em_width("iii")
    assert em_width("🍕") > em_width("a")
    family = "👩\u200d👩\u200d👧"  # three emoji joined by zero-width joiners
    assert em_width(family) == 3 * em_width("👩")
    assert em_width("e\u0301") == em_width("e")  # a combining accent adds no width
    assert pixels("word", 12) > pixels("word", 9)


def test_turned_labels_reach_higher_the_longer_and_the_steeper_they_are():
    assert rotated_height(100, 12, -60) > rotated_height(50, 12, -60)
    assert rotated_height(100, 12, -60) > rotated_height(100, 12, -30)
    assert rotated_height(0, 12, 0) > 0  # one line of text is never flat


def test_margins_grow_with_the_longest_label_the_title_and_the_colour_bar_title():
    short = heatmap_margins((["a", "b"], 12), (["a", "b"], 12), -60, 0, "weight")
    long_y = heatmap_margins((["a", "supercalifragilistic"], 12), (["a", "b"], 12), -60, 0, "weight")
    long_x = heatmap_margins((["a", "b"], 12), (["a", "supercalifragilistic"], 12), -60, 0, "weight")
    titled = heatmap_margins((["a", "b"], 12), (["a", "b"], 12), -60, 35, "weight")
    log_bar = heatmap_margins((["a", "b"], 12), (["a", "b"], 12), -60, 0, "log10 attention weight")
    assert long_y["l"] > short["l"] and long_y["t"] == short["t"]
    assert long_x["t"] > short["t"] and long_x["l"] == short["l"]
    assert titled["t"] == short["t"] + 35
    assert log_bar["r"] > short["r"]
    assert heatmap_margins((["a"], 12), (["a"], 12), -60, 0, None)["r"] < short["r"]  # no colour bar


def test_the_heatmap_takes_its_margins_from_the_labels_it_shows():
    """Long tokens widen the left margin; only the ticks shown count (every k-th of 300 tokens)."""
    def margin(labels: list[str]) -> go.layout.Margin:
        return attention_heatmap(np.full((len(labels), len(labels)), 1 / len(labels)), labels, title="t").layout.margin
    assert margin(["a", "b", "c"]).l < margin(["a", "antidisestablishment", "c"]).l
    many = ["x"] * 300
    many[1] = "antidisestablishment"  # never a shown tick: every 5th token is labelled
    assert margin(many).l == margin(["x"] * 300).l
