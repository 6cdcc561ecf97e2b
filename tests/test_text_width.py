"""Label widths estimated without a browser, and the margins built from them (the browser tests check
in Chromium that those margins hold the labels, legends and colour bars: no figure is drawn twice)."""

import numpy as np
import plotly.graph_objects as go

from attention_viz.figures.heatmap import attention_heatmap
from attention_viz.figures.text_width import (
    autorange,
    colour_bar_room,
    em_width,
    heatmap_margins,
    legend_below,
    legend_right,
    log_labels,
    number_labels,
    overhang,
    pixels,
    rotated_height,
    x_axis_room,
)


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


# Widths Chromium measured for labels the app draws (Source Sans, 12 px; colour-bar titles 14 px).
MEASURED = {("−0.5", 12): 21, ("−0.06", 12): 27, ("1e−15", 12): 30, ("1000", 12): 24, ("layer 0", 12): 34,
            ("head 10", 12): 41, ("random 10", 12): 56, ("softmax(scores)", 12): 81,
            ("dim 40: sin(pos·0.0562), period 112", 12): 174, ("value", 14): 32, ("PE·PEᵀ", 14): 38,
            ("weight", 14): 42}


def test_estimates_cover_what_chromium_measured_without_doubling_it():
    for (text, size), measured in MEASURED.items():
        assert measured <= pixels(text, size) <= 2 * measured, text
    assert em_width("2024") < em_width("word")  # figures are narrower than letters
    assert em_width("−1") > em_width("-1")  # Plotly's minus sign is wider than a hyphen


def test_number_labels_are_plotlys_at_its_finest_step():
    assert number_labels(0, 1.15) == ["0", "0.2", "0.4", "0.6", "0.8", "1"]  # no trailing zeros
    assert number_labels(-1.1, 1.1) == ["−1", "−0.5", "0", "0.5", "1"]  # a real minus sign
    assert number_labels(0, 127)[-1] == "120"
    assert number_labels(2.0, 2.0) == ["2"]
    # Plotly printed −0.06 … 0.06 on the learned table's colour bar: ours are at least as wide
    assert max(map(len, number_labels(-0.066, 0.066))) >= len("−0.06")
    low, high = autorange(38, 66)
    assert low < 38 and high > 66


def test_log_labels_name_each_power_of_ten():
    assert log_labels(1, 1024)[:4] == ["1", "10", "100", "1000"]
    assert "0.001" in log_labels(0.002, 1)
    spread = log_labels(1e-16, 5, exponents=True)
    assert "1e−15" in spread and "1" in spread


def test_x_axis_and_edge_room_grow_with_the_labels_and_their_angle():
    short, long = ["a", "b"], ["a", "antidisestablishment"]
    assert x_axis_room(long, 12) == x_axis_room(short, 12)  # level: one line high, however wide
    assert x_axis_room(long, 12, -60) > x_axis_room(short, 12, -60)
    assert x_axis_room(long, 12, -60) > x_axis_room(long, 12)
    assert x_axis_room(short, 12) > x_axis_room(short, 12, axis_title=False)
    assert overhang(long, 12, -30) > overhang(long, 12) > overhang(short, 12)  # turned: all of it, cos 30°
    assert overhang(long, 12, categories=2) < overhang(long, 12)  # a category's tick sits inside the plot


def test_colour_bar_room_holds_the_bar_its_labels_and_its_title_along_its_side():
    plain = colour_bar_room("", ["−1", "1"], 12)
    assert colour_bar_room("", ["−1", "1"], 30) > plain
    assert colour_bar_room("", ["−0.0448", "0.0448"], 12) > plain
    assert colour_bar_room("q", ["−1", "1"], 12) > plain  # one line of title beside the labels
    assert colour_bar_room("log10 attention weight", ["−1", "1"], 12) == colour_bar_room("q", ["−1", "1"], 12)


def test_legends_take_one_row_when_they_fit_else_one_line_each():
    settings, height = legend_below(["before", "after"])
    assert settings["orientation"] == "h" and height == 29  # measured: 29 px a row
    names = ["f(q) for σ = 1", "pairs (key = waist, value = weight)", "prediction"]
    settings, height = legend_below(names)
    assert settings["orientation"] == "v" and height == 67  # measured: 67 px for three lines
    assert settings["yref"] == "container" and settings["y"] == 0  # at the figure's bottom edge, whatever its plot
    assert legend_right(names)[1] > legend_right(["before", "after"])[1]


def test_figures_take_their_margins_from_what_they_show():
    from attention_viz.figures import basics, image, inside, masks, positional

    def margin(figure: go.Figure) -> go.layout.Margin:
        return figure.layout.margin

    z = np.random.default_rng(0).standard_normal((3, 32))
    assert margin(inside.matrix_heatmap(z, row_labels=["a", "antidisestablishment", "c"])).l > margin(
        inside.matrix_heatmap(z, row_labels=["a", "b", "c"])).l
    assert margin(inside.matrix_heatmap(z * 1e4)).r > margin(inside.matrix_heatmap(z)).r  # "−20000" is wider than "−2"
    table = np.zeros((500, 16))
    assert margin(positional.encoding_heatmap(table)).l > margin(positional.encoding_heatmap(table[:50])).l
    keys, values = np.array(basics.WAISTS), np.array(basics.WEIGHTS)
    regression = basics.kernel_regression_figure(keys, values, 57.0, 1.0)
    assert margin(regression).b > x_axis_room(["50"], 12) + 60  # the axis, and the legend's three lines under it
    scores = np.array([[1.0, -np.inf], [0.5, 2.0]])
    assert margin(masks.scores_heatmap(scores, ["a", "b"], ["a", "b"], "t")).r < margin(
        masks.scores_heatmap(scores * 1e4, ["a", "b"], ["a", "b"], "t")).r  # "−20000" is wider than "−2"
    raw = image.grid_values_figure(np.full((4, 6), 1 / 24))
    m = margin(raw)
    assert (raw.layout.width - m.l - m.r, raw.layout.height - m.t - m.b) == (6 * image.CELL, 4 * image.CELL)


def test_fitted_ticks_take_the_largest_size_whose_boxes_stay_apart():
    """Written out: n labels along ``room`` px, turned by ``angle``, sit room / n apart along the axis,
    room / n × sin(angle) across their slant; a label's box is 1.34 font sizes high plus 1 px."""
    from attention_viz.figures.text_width import MIN_TICK_SIZE, fitted_ticks

    for n, room, angle in ((14, 500, 60), (30, 500, 90), (64, 900, 90), (64, 549, 90), (500, 549, 90), (3, 300, 60)):
        shown, every, size = fitted_ticks(n, room, angle)
        across = room / n * every * np.sin(np.radians(angle))
        assert across >= 1.34 * size + 1  # apart
        assert shown == len(range(0, n, every))
        if every == 1:
            assert size == 12 or room / n * np.sin(np.radians(angle)) < 1.34 * (size + 1) + 1  # no larger fits
        else:
            assert size == MIN_TICK_SIZE and room / n * (every - 1) * np.sin(np.radians(angle)) < 1.34 * size + 1


def test_a_sentence_heatmap_labels_every_token_on_both_axes():
    """14 tokens (the trophy sentence): every key and query labelled at 12 px; 30: every key, upright;
    64 queries: every one, the figure a row pitch (12 px × 1.34 + 1) per row at least."""
    for n in (14, 30, 64):
        labels = [f"tok{i}" for i in range(n)]
        figure = attention_heatmap(np.full((n, n), 1 / n), labels, title="t")
        assert list(figure.layout.yaxis.ticktext) == labels and figure.layout.yaxis.tickfont.size == 12
        plot_height = figure.layout.height - figure.layout.margin.t - figure.layout.margin.b
        assert plot_height >= n * (1.34 * 12 + 1)
        if n <= 30:
            assert list(figure.layout.xaxis.ticktext) == labels
        assert figure.layout.xaxis.tickangle == (-60 if n == 14 else -90)
