"""The positional page's rotary section, run headless: it draws, its numbers are the rotary math
(checked against closed forms written here in numpy), and its controls round-trip the link."""

from __future__ import annotations

import numpy as np
import pytest

from single_view import array, figures, link, open_view, problems

from attention_viz.core.position_codes import decay_curves, query_key

ROTARY_TITLES = (
    "rotary: each pair of dimensions turns by m·θᵢ at position m",
    "the same query and key vectors at every pair of positions",
    "does q_m·k_n depend on m − n only? max − min over each diagonal",
    "long-range decay: farther tokens can score less",
)


def closed_form_rotary(q: np.ndarray, k: np.ndarray, m: int, n: int) -> float:
    """R(m)q · R(n)k by hand: pair i = (i, i + d/2) turned by m·θᵢ and n·θᵢ, so per pair
    (q₁k₁ + q₂k₂)·cos δ + (q₁k₂ − q₂k₁)·sin δ with δ = (m − n)·θᵢ."""
    half = len(q) // 2
    theta = 10000.0 ** (-np.arange(half) * 2.0 / len(q))
    q1, q2, k1, k2 = q[:half], q[half:], k[:half], k[half:]
    delta = (m - n) * theta
    return float(((q1 * k1 + q2 * k2) * np.cos(delta) + (q1 * k2 - q2 * k1) * np.sin(delta)).sum())


def sinusoid(position: int, d: int) -> np.ndarray:
    """The paper's PE row by hand: sin in dimension 2i, cos in 2i + 1."""
    omega = 10000.0 ** (-np.arange(d // 2) * 2.0 / d)
    row = np.empty(d)
    row[0::2], row[1::2] = np.sin(position * omega), np.cos(position * omega)
    return row


def rotary_figures(at) -> dict[str, dict]:
    found = {spec["layout"]["title"]["text"]: spec for spec in figures(at)
             if spec["layout"].get("title", {}).get("text") in ROTARY_TITLES}
    assert list(found) == list(ROTARY_TITLES)
    return found


@pytest.fixture(scope="module")
def page():
    return open_view("positional", model="minilm", text="dog bites man")


def test_rotary_section_draws_what_the_math_says(page):
    assert problems(page) == []
    found = rotary_figures(page)
    d, n = 64, 48
    q, k = (t.numpy() for t in query_key(d, 0))

    # pair rotation: each pair keeps its length and turns θᵢ per position
    for trace, pair in zip(found[ROTARY_TITLES[0]]["data"], (0, 4, d // 2 - 1)):
        x, y = array(trace["x"]), array(trace["y"])
        assert len(x) == n
        assert np.allclose(np.hypot(x, y), np.hypot(q[pair], q[pair + d // 2]))
        step = np.mod(np.diff(np.unwrap(np.arctan2(y, x))), 2 * np.pi)
        assert np.allclose(step, np.mod(10000.0 ** (-2 * pair / d), 2 * np.pi), atol=1e-9)

    # scores: the rotary panel is the closed form at every (m, n); three panels on minilm (learned too)
    panels = found[ROTARY_TITLES[1]]["data"]
    assert len(panels) == 3
    rotary = array(panels[0]["z"])
    for m, n_ in ((0, 0), (7, 2), (40, 47), (47, 0)):
        assert rotary[m, n_] == pytest.approx(closed_form_rotary(q, k, m, n_), abs=1e-9)
    sinusoidal = array(panels[1]["z"])
    assert sinusoidal[9, 4] == pytest.approx(float((q + sinusoid(9, d)) @ (k + sinusoid(4, d))), abs=1e-9)
    spread = {trace["name"]: array(trace["y"]) for trace in found[ROTARY_TITLES[2]]["data"]}
    assert spread["rotary"].max() < 1e-12 * np.abs(rotary).max()
    assert spread["sinusoidal (added)"].max() > 0.05 * np.abs(sinusoidal).max()
    assert spread["learned (added)"].max() > 0

    # the decay curve is the bound, relative to distance 0: (1/(d/2)) Σ_j |S_j| = (d/2 + 1)/2 at 0
    bound, _ = decay_curves(4096, d)
    assert bound[0] == pytest.approx((d // 2 + 1) / 2)
    assert np.allclose(array(found[ROTARY_TITLES[3]]["data"][0]["y"]), bound[1:] / bound[0])


def test_same_offset_table_equal_for_rotary_not_for_sinusoids(page):
    d, offset = 64, 3
    q, k = (t.numpy() for t in query_key(d, 0))
    table = page.dataframe[0].value  # the page's one table
    assert list(table["key position n"]) == [0, 5, 100, 1000, 10000]
    assert (table["query position m"] - table["key position n"] == offset).all()
    for _, row in table.iterrows():
        m, n = int(row["query position m"]), int(row["key position n"])
        assert row["rotary q·k"] == pytest.approx(closed_form_rotary(q, k, m, n), abs=1e-9)
        assert row["sinusoidal (q+PE)·(k+PE)"] == pytest.approx(float((q + sinusoid(m, d)) @ (k + sinusoid(n, d))), abs=1e-8)
    assert np.ptp(table["rotary q·k"]) < 1e-9 and np.ptp(table["sinusoidal (q+PE)·(k+PE)"]) > 1.0
    caption = next(c.value for c in page.caption if "placed at the start of a text" in c.value)
    assert f"differ by up to {np.ptp(table['sinusoidal (q+PE)·(k+PE)']):.3f}" in caption


def test_rotary_controls_round_trip_the_link(page):
    page.select_slider(key="positional_rope_d").set_value(16).run()
    assert page.multiselect(key="positional_rope_pairs").value == [0, 4]  # pair 31 is gone at d = 16
    page.slider(key="positional_rope_n").set_value(32).run()
    page.slider(key="positional_rope_draw").set_value(3).run()
    page.multiselect(key="positional_rope_pairs").set_value([1, 6]).run()
    page.slider(key="positional_rope_offset").set_value(10).run()
    assert problems(page) == []
    params = link(page)
    chosen = {"rope_d": "16", "rope_n": "32", "rope_draw": "3", "rope_pairs": "1,6", "rope_offset": "10"}
    assert {name: params.get(name) for name in chosen} == chosen  # the view's prefix is dropped in links
    reopened = open_view("positional", **params)
    assert problems(reopened) == []
    before, after = rotary_figures(page), rotary_figures(reopened)
    for title in ROTARY_TITLES:
        for one, two in zip(before[title]["data"], after[title]["data"]):
            for axis in ("x", "y", "z"):
                if axis in one:
                    assert np.array_equal(array(one[axis]), array(two[axis]))
    assert len(before[ROTARY_TITLES[0]]["data"]) == 2 and array(before[ROTARY_TITLES[1]]["data"][0]["z"]).shape == (32, 32)
    q, k = (t.numpy() for t in query_key(16, 3))
    table = reopened.dataframe[0].value
    assert table["rotary q·k"].iloc[0] == pytest.approx(closed_form_rotary(q, k, 10, 0), abs=1e-9)
