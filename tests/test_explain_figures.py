"""Figure builders of the explanation pages (inside, positional, basics) show what they claim."""

import json

import numpy as np
import pytest
import torch

from attention_viz.core.attention import scaled_dot_product_attention
from attention_viz.figures import basics, inside, positional
from attention_viz.core.positional import (
    binary_positions,
    integer_positions,
    normalized_positions,
    shift_rotation,
    sinusoidal,
)


# ---------------------------------------------------------------- inside


def test_matrix_heatmap_puts_tokens_on_the_token_axis_and_escapes_them():
    labels = ["the", "<b>", "the"]
    z = np.random.default_rng(0).standard_normal((3, 32))
    figure = inside.matrix_heatmap(z, "Q", row_labels=labels)
    trace = figure.data[0]
    assert np.asarray(trace.z).shape == (3, 32)
    assert len(set(trace.y)) == 3  # repeated tokens stay distinct
    assert list(figure.layout.yaxis.ticktext) == ["the", "&lt;b&gt;", "the"]
    assert list(trace.x) == list(range(32))  # dimension index on the other axis
    assert trace.zmin == -trace.zmax  # signed values: symmetric diverging scale


def test_matrix_heatmap_outlines_a_band_and_refuses_wrong_labels():
    figure = inside.matrix_heatmap(np.zeros((4, 96)), row_labels=list("abcd"), highlight_cols=(32, 64))
    shape = figure.layout.shapes[0]
    assert (shape.x0, shape.x1) == (31.5, 63.5)
    with pytest.raises(ValueError):
        inside.matrix_heatmap(np.zeros((4, 8)), row_labels=["a", "b"])


def test_row_statistics_and_the_saturation_figure():
    flat = np.full((2, 4), 0.25)
    peaked = np.array([[1.0, 0, 0, 0], [0.97, 0.01, 0.01, 0.01]])
    np.testing.assert_allclose(inside.row_entropy(flat), [2.0, 2.0])
    assert inside.row_entropy(peaked)[0] == 0 and inside.row_max(peaked)[0] == 1
    figure = inside.saturation_figure(flat, peaked, ["a", "b"], d_k=32)
    maxima = {t.name: list(t.y) for t in figure.data if t.xaxis == "x"}
    assert maxima == {"÷√32 (the model)": [0.25, 0.25], "not scaled": [1.0, 0.97]}


# ---------------------------------------------------------------- positional


def test_encoding_heatmap_has_the_table_shape():
    pe = sinusoidal(50, 16).numpy()
    figure = positional.encoding_heatmap(pe)
    assert np.asarray(figure.data[0].z).shape == (50, 16)
    assert figure.layout.yaxis.title.text == "position" and figure.layout.xaxis.title.text == "dimension"


def test_robust_colours_ignore_outliers():
    table = np.ones((10, 10))
    table[0, 0] = 100.0
    assert positional.encoding_heatmap(table).data[0].zmax == 100.0
    assert positional.encoding_heatmap(table, robust=True).data[0].zmax < 10


def test_pe_similarity_is_symmetric_with_diagonal_d_over_2():
    for d in (16, 128):
        pe = sinusoidal(64, d).numpy()
        figure = positional.similarity_heatmap(pe)
        z = np.asarray(figure.data[0].z, dtype=np.float64)
        np.testing.assert_allclose(z, z.T, atol=1e-4)
        np.testing.assert_allclose(np.diag(z), d / 2, atol=1e-3)
    cosine = positional.similarity(np.random.default_rng(0).standard_normal((8, 5)), cosine=True)
    np.testing.assert_allclose(np.diag(cosine), 1.0)


def test_dimension_curves_one_line_per_chosen_dimension():
    pe = sinusoidal(100, 64).numpy()
    figure = positional.dimension_curves(pe, [0, 1, 10])
    assert len(figure.data) == 3
    np.testing.assert_allclose(figure.data[2].y, pe[:, 10])
    assert figure.data[0].name.startswith("dim 0: sin") and figure.data[1].name.startswith("dim 1: cos")


def test_shift_is_the_same_rotation_for_every_position():
    d, k, pair = 64, 5, 3
    pe = sinusoidal(100, d).numpy()
    rotation = shift_rotation(k, d)[pair].numpy()
    assert positional.rotation_error(pe, rotation, pair, k) < 1e-5
    angles = positional.shift_angles(pe, pair, k)
    expected = np.mod(k * positional.omega(pair, d), 2 * np.pi)
    np.testing.assert_allclose(angles, expected, atol=1e-4)
    figure = positional.shift_figure(pe, pair, k, rotation)
    measured = next(t for t in figure.data if t.name == "measured angle")
    assert len(measured.y) == 100 - k  # every position, not only the drawn ones
    rotated = next(t for t in figure.data if (t.name or "").startswith("R(k)"))
    drawn = next(t for t in figure.data if t.name == "PE(t)")
    np.testing.assert_allclose(rotated.x, drawn.x[k:], atol=1e-5)  # crosses land on PE(t+k)


def test_alternatives_show_their_problems():
    integer = positional.integer_figure(integer_positions(50, 16).numpy())
    assert max(integer.data[1].y) == 49  # grows with the position
    normalized = positional.normalized_figure(normalized_positions(5, 16).numpy(), normalized_positions(50, 16).numpy())
    short, long = normalized.data[1], normalized.data[2]
    assert short.y[4] == 1.0 and long.y[4] == pytest.approx(4 / 49)  # same index, different value
    assert "1.00 in 5 tokens" in json.dumps(normalized.to_plotly_json()["layout"]["annotations"], ensure_ascii=False)
    jumps = positional.binary_figure(binary_positions(50, 16).numpy()).data[1].y
    assert min(jumps) == 1.0 and max(jumps) > 2.0  # uneven steps
    pe = sinusoidal(50, 16).numpy()
    sin_fig = positional.sinusoidal_figure(pe)
    curves = [np.asarray(t.y) for t in sin_fig.data[1:]]
    assert len(curves) == 3
    for curve in curves[1:]:
        np.testing.assert_allclose(curve, curves[0], atol=1e-4)  # depends only on the offset
    steps = positional.neighbour_distance(pe)
    np.testing.assert_allclose(steps, steps[0], atol=1e-5)  # every step the same distance


# ---------------------------------------------------------------- basics


def test_seed_softmax_example():
    figure = basics.score_pairs_figure()
    raw, scaled = figure.data
    # order: 51 vs 49 first, second, 70 vs 30 first, second
    assert raw.y[0] == pytest.approx(1 / (1 + np.exp(-2)))  # 0.88: unscaled 51/49 is already lopsided
    assert scaled.y[0] == pytest.approx(0.5, abs=0.07) and scaled.y[1] == pytest.approx(0.5, abs=0.07)
    assert raw.y[2] == pytest.approx(1.0) and raw.y[3] < 1e-15  # 70/30 unscaled: one-hot
    assert scaled.y[2] == pytest.approx(1 / (1 + np.exp(-5)))  # (70 − 30) / 8 = 5
    np.testing.assert_allclose(np.add(raw.y[0::2], raw.y[1::2]), 1.0)


def test_dot_product_variance_grows_like_d_k():
    stats = basics.dot_product_stats([4, 64, 1024], samples=300, n_keys=8, seed=1)
    np.testing.assert_allclose(stats["variance"] / stats["d_k"], 1.0, rtol=0.2)
    np.testing.assert_allclose(stats["variance_scaled"], 1.0, rtol=0.2)
    assert stats["max_weight"][-1] > 0.9 and stats["max_weight_scaled"][-1] < 0.6
    figure = basics.variance_figure(stats)
    assert figure.layout.xaxis.type == "log" and figure.layout.yaxis.type == "log"


def test_dk_softmax_bars():
    scores = np.array([3.0, 1.0, -2.0])
    figure = basics.dk_softmax_figure(scores, d_k=4)
    np.testing.assert_allclose(figure.data[0].y, basics.softmax(scores))
    np.testing.assert_allclose(figure.data[1].y, basics.softmax(scores / 2))
    assert basics.softmax(np.array([1000.0, 0.0]))[0] == 1.0  # stable for large scores


def test_kernel_regression_prediction_is_the_weighted_mean():
    keys, values = np.array(basics.WAISTS), np.array(basics.WEIGHTS)
    query, sigma = 60.5, 3.0
    by_hand = np.exp(-((query - keys) ** 2) / (2 * sigma**2))
    by_hand /= by_hand.sum()
    weights, prediction = basics.nadaraya_watson(query, keys, values, sigma)
    np.testing.assert_allclose(weights, by_hand)
    assert prediction == pytest.approx(float(by_hand @ values))
    figure = basics.kernel_regression_figure(keys, values, query, sigma)
    star = next(t for t in figure.data if t.name == "prediction")
    assert star.x[0] == query and star.y[0] == pytest.approx(float(by_hand @ values))
    bars = basics.kernel_weights_figure(keys, values, weights)
    np.testing.assert_allclose(bars.data[0].y, by_hand)


def test_the_seeds_waist_example():
    """Waist 57 with a narrow kernel: K2 (56 → 43) and K3 (58 → 48) get half each → 45.5 kg."""
    weights, prediction = basics.nadaraya_watson(57.0, np.array(basics.WAISTS), np.array(basics.WEIGHTS), 1.0)
    assert weights[1] == pytest.approx(0.5, abs=1e-3) and weights[2] == pytest.approx(0.5, abs=1e-3)
    assert prediction == pytest.approx(43 * 0.5 + 48 * 0.5, abs=0.01)


def test_kernel_weights_are_attention_with_a_gaussian_score():
    """softmax(−(q−k)²/2σ²) equals scaled dot-product attention on the features [q, −q²/2] · [k/σ², 1/σ²]
    (the −k²/2σ² part is per key, the −q² part cancels in softmax): kernel regression *is* attention."""
    keys, query, sigma = np.array(basics.WAISTS), 61.0, 4.0
    q = torch.tensor([[query, 1.0]], dtype=torch.float64)
    k = torch.tensor(np.stack([keys / sigma**2, -(keys**2) / (2 * sigma**2)], axis=1))
    v = torch.tensor(np.array(basics.WEIGHTS)[:, None])
    out = scaled_dot_product_attention(q, k, v, scale=False)
    np.testing.assert_allclose(out.pattern[0].numpy(), basics.kernel_weights(query, keys, sigma), atol=1e-12)
