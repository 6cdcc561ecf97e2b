"""Figure builders: distinct repeated tokens, thinned labels, escaped text, compact payloads."""

import json
import re

import numpy as np

from attention_viz.figures.export import standalone_html
from attention_viz.figures.focus import highlighted_text
from attention_viz.figures.grid import downsample, heads_grid, tile
from attention_viz.figures.heatmap import attention_heatmap
from attention_viz.figures.numbers import exact

rng = np.random.default_rng(0)


def stochastic(*shape):
    x = rng.random(shape).astype(np.float32)
    return x / x.sum(-1, keepdims=True)


def test_repeated_tokens_stay_distinct_on_the_axes():
    labels = ["the", "cat", "saw", "the", "dog"]
    figure = attention_heatmap(stochastic(5, 5), labels)
    x = figure.data[0].x
    assert len(set(x)) == 5 and x[0] == "0: the" and x[3] == "3: the"  # hover tells the two apart
    assert list(figure.layout.xaxis.ticktext) == labels  # ticks still read "the" twice


def test_long_inputs_thin_the_tick_labels():
    labels = [f"w{i}" for i in range(512)]
    figure = attention_heatmap(stochastic(512, 512), labels)
    assert len(figure.layout.xaxis.ticktext) <= 64
    assert len(figure.data[0].x) == 512


def test_html_in_tokens_is_escaped_for_plotly_and_for_the_page():
    labels = ["<script>", "alert(1)", "<b>"]
    figure = attention_heatmap(stochastic(3, 3), labels)
    assert "&lt;script&gt;" in figure.layout.xaxis.ticktext[0]
    assert "<script>" not in json.dumps(list(figure.data[0].x))
    html = highlighted_text(labels, np.array([0.2, 0.3, 0.5]))
    assert "<script>" not in html and "&lt;script&gt;" in html and "&lt;b&gt;" in html


def test_threshold_blanks_small_weights():
    pattern = np.array([[0.9, 0.1], [0.4, 0.6]], np.float32)
    z = attention_heatmap(pattern, ["a", "b"], threshold=0.5).data[0].z
    assert np.isnan(z[0, 1]) and np.isnan(z[1, 0]) and z[0, 0] == np.float32(0.9)


def test_head_view_payload_at_512_tokens_is_compact():
    figure = attention_heatmap(stochastic(512, 512), [f"t{i}" for i in range(512)])
    assert len(figure.to_json()) < 3_000_000
    assert '"bdata"' in figure.to_json()  # binary typed array, not a JSON list of numbers


def test_grid_tiles_every_head_and_stays_small():
    stack = stochastic(6, 12, 512, 512)
    image = tile(stack, 40)
    assert image.shape == (6 * 41 - 1, 12 * 41 - 1)
    assert np.isnan(image[40]).all() and np.isnan(image[:, 40]).all()  # gutters
    figure = heads_grid(stack)
    assert list(figure.layout.xaxis.ticktext)[:2] == ["head 0", "head 1"]
    assert len(figure.to_json()) < 3_000_000


def test_downsampling_averages_blocks():
    pattern = stochastic(100, 100)
    small = downsample(pattern, 10)
    assert small.shape == (10, 10)
    np.testing.assert_allclose(small[0, 0], pattern[:10, :10].mean(), rtol=1e-5)
    assert downsample(pattern[:8, :8], 10).shape == (8, 8)


def test_standalone_html_embeds_plotly_and_needs_no_network():
    html = standalone_html(attention_heatmap(stochastic(3, 3), ["a", "b", "c"]), "x<y")
    assert "<title>x&lt;y</title>" in html
    # plotly.js mentions a CDN only as the default topojson source of geo maps, never loaded here
    assert not re.search(r"<script[^>]*src=", html) and not re.search(r"<link[^>]*href=\"?http", html)
    assert len(html) > 1_000_000  # plotly.js itself is inside


def test_zero_is_exactly_zero_and_tiny_is_not():
    assert exact(0.0) == "0 (exactly)"
    assert exact(4e-9) == "4.0e-09" and exact(-4e-9) == "-4.0e-09"
    assert exact(1e-45) != "0 (exactly)"  # the smallest float32 subnormal is not 0
    assert exact(0.25) == "2.5e-01"
