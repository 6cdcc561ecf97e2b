"""The first screen a newcomer sees: at 1280×800 the default page's heatmap is on it, without
scrolling; on a 390-px phone the heatmap's matrix gets the width (a thin colour bar beside it, token
labels thinned so none overlaps)."""

from __future__ import annotations

import pytest

from browser import NO_CHART, POLL_MS, settled, wait_for_heatmap

pytestmark = pytest.mark.slow

# The matrix of the first heatmap (Plotly's heatmap image), its colour bar, and its x tick labels
GEOMETRY = """() => {
    const chart = document.querySelector('.js-plotly-plot');
    const box = e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
    return {
        chart: box(chart),
        cells: box(chart.querySelector('.heatmaplayer image, .hm image')),
        colourbar: box(chart.querySelector('.colorbar .cbfills') || chart.querySelector('.colorbar')),
        ticks: [...chart.querySelectorAll('.xtick text')].filter(t => t.textContent.trim()).map(box),
    };
}"""


def overlapping(boxes: list[list[float]]) -> list[tuple[int, int]]:
    return [(i, j) for i, a in enumerate(boxes) for j, b in enumerate(boxes[i + 1:], i + 1)
            if min(a[2], b[2]) - max(a[0], b[0]) > 1 and min(a[3], b[3]) - max(a[1], b[1]) > 1]


def test_the_heatmap_is_on_the_first_screen_of_a_laptop(app_url, page):
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(app_url)
    wait_for_heatmap(page)
    settled(page)
    left, top, right, bottom = page.evaluate(GEOMETRY)["cells"]
    visible = (min(bottom, 800) - top) / (bottom - top)
    assert top < 500 and visible >= 0.9, (top, bottom)  # on the first screen, (nearly) whole


def test_on_a_phone_the_matrix_gets_the_width(app_url, page):
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(app_url)
    wait_for_heatmap(page)
    settled(page)
    page.wait_for_timeout(800)  # the narrow-screen script runs at most every 250 ms
    shape = page.evaluate(GEOMETRY)
    chart_width = shape["chart"][2] - shape["chart"][0]
    assert shape["cells"][2] - shape["cells"][0] >= 0.5 * chart_width
    assert shape["colourbar"][2] - shape["colourbar"][0] <= 40
    assert overlapping(shape["ticks"]) == []




# The page's fetches of Streamlit's chart chunk (its start, on the page's clock), and its Plotly charts
CHART_CODE = """() => [performance.getEntriesByType('resource').filter(e => e.name.includes('/PlotlyChart.')).length,
                       document.querySelectorAll('.js-plotly-plot').length]"""


def test_the_chart_code_loads_from_the_first_run_once_even_on_a_page_without_a_chart(app_url, page):
    """The page's first script starts loading the chart code while the server still runs the model
    (ui/page_scripts.py), not once the first chart arrives: a page that draws no chart loads it too,
    once. (The logit lens of an encoder shows a sentence, no chart.)"""
    page.goto(f"{app_url}/?view=logit_lens")
    page.get_by_text(NO_CHART["logit_lens"]).first.wait_for()
    page.wait_for_function(f"() => ({CHART_CODE})()[0] > 0", polling=POLL_MS, timeout=30_000)
    assert page.evaluate(CHART_CODE) == [1, 0]
