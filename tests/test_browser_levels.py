"""Our levels element in a real browser (ui/level_canvas.js): past 256 × 256 cells the head view draws
one head's uint8 levels on a canvas. Hover names the cell under the pointer (or the arrow keys' cursor),
a dragged box zooms in (and goes into the link), the save button writes PNG at 3× or SVG, and typed
text stays text."""

from __future__ import annotations

import urllib.parse

import pytest

from attention_viz.analysis.head_levels import captured_heatmap
from attention_viz.backends.registry import load_backend
from attention_viz.figures.axes import shorten, ticked
from attention_viz.core.names import ENCODER_SELF
from benchmarks.texts import text_of_tokens
from browser import open_view, settled, wait_for_link

LAYER, HEAD = 2, 5
HOSTILE = "<b>bold</b> <img src=x onerror=alert(1)> "


@pytest.fixture(scope="module")
def text() -> str:
    return HOSTILE + text_of_tokens(load_backend("minilm"), 420, 11)


@pytest.fixture(scope="module")
def labels(text: str) -> list[str]:
    return list(load_backend("minilm").tokenize(text)[0].labels)


def open_levels(page, app_url: str, text: str) -> None:
    params = {"view": "head", "layer": str(LAYER), "head": str(HEAD), "text": text}
    page.set_viewport_size({"width": 1400, "height": 1600})  # the whole heatmap on screen, for the pointer
    page.goto(f"{app_url}/?{urllib.parse.urlencode(params)}")
    page.wait_for_selector(".avlc[data-drawn]", state="attached", timeout=120_000)
    settled(page)
    page.locator(".avlc").evaluate("e => e.scrollIntoView({block: 'start'})")


def cell_centre(page, row: int, col: int) -> tuple[float, float]:
    """Where on the page the centre of the drawn cell (row, col) is."""
    box = page.locator(".avlc-cells").bounding_box()
    rows, cols = (int(page.locator(".avlc-cells").evaluate(f"c => c.{side}")) for side in ("height", "width"))
    return box["x"] + (col + 0.5) * box["width"] / cols, box["y"] + (row + 0.5) * box["height"] / rows


def test_hover_names_the_cell_under_the_pointer_or_the_arrow_keys_and_typed_tags_stay_text(app_url, page, text,
                                                                                            labels):
    open_levels(page, app_url, text)
    n = len(labels)
    assert n > 256 and page.locator(".js-plotly-plot").count() == 0  # levels, on our element
    assert page.locator(".avlc-xtick").all_text_contents() == [shorten(labels[i]) for i in ticked(n)]
    assert page.locator(".avlc-title").text_content() == f"layer {LAYER}, head {HEAD}"
    assert page.locator(".avlc b, .avlc img").count() == 0  # the typed tags are tokens, never elements
    assert "<b>" in page.locator(".avlc-subtitle").text_content()  # the sentence, as typed
    pattern = load_backend("minilm").run(text).pattern(ENCODER_SELF, LAYER, HEAD)
    codes = captured_heatmap(pattern, range(n), range(n)).codes
    for row, col in ((200, 37), (3, n - 1)):
        page.mouse.move(*cell_centre(page, row, col))
        lines = page.locator(".avlc-hover div").all_text_contents()
        assert lines[:3] == [f"layer {LAYER}, head {HEAD}", f"query {row}: {shorten(labels[row])}",
                             f"key {col}: {shorten(labels[col])}"]
        assert lines[3].startswith(f"attention weight: level {codes[row, col]} of 255 (255 = ")
    page.mouse.move(0, 0)
    assert page.locator(".avlc-hover").is_hidden()
    page.locator(".avlc-cells").focus()  # without a pointer: the arrow keys walk the cells
    for key in ["ArrowDown", "ArrowRight", "ArrowRight", "ArrowRight", "ArrowDown", "ArrowDown", "Shift+ArrowDown"]:
        page.keyboard.press(key)  # the first press shows the cursor where it is, the others move it
    lines = page.locator(".avlc-hover div").all_text_contents()
    assert lines[1:3] == [f"query 12: {shorten(labels[12])}", f"key 3: {shorten(labels[3])}"]
    assert page.locator(".avlc-cursor").is_visible()
    page.keyboard.press("Escape")
    assert page.locator(".avlc-hover").is_hidden() and page.locator(".avlc-cursor").is_hidden()
    wide = int(page.locator(".avlc-axes").get_attribute("width"))
    page.set_viewport_size({"width": 1000, "height": 1600})  # a narrower window: the figure is laid out again
    page.wait_for_function("w => +document.querySelector('.avlc-axes').getAttribute('width') < w", arg=wide)
    assert page.locator(".avlc-xtick").count() == len(ticked(n))


def test_a_dragged_box_zooms_into_that_region_into_the_link_and_a_double_click_goes_back(app_url, page, text, labels):
    open_levels(page, app_url, text)
    page.mouse.move(*cell_centre(page, 20, 10))
    page.mouse.down()
    page.mouse.move(*cell_centre(page, 300, 330), steps=5)
    assert page.locator(".avlc-box").is_visible()  # the box follows the pointer while dragging
    page.mouse.up()
    wait_for_link(page, {"long_q0": "20", "long_q1": "300", "long_k0": "10", "long_k1": "330"})
    title = f"layer {LAYER}, head {HEAD}: queries 20–300, keys 10–330"
    page.wait_for_function("t => document.querySelector('.avlc-title')?.textContent === t", arg=title)
    assert page.locator(".avlc-cells").evaluate("c => [c.height, c.width]") == [281, 321]  # still levels: 90,201 cells
    assert page.locator(".avlc-xtick").first.text_content() == shorten(labels[10])
    assert page.get_by_role("button", name="Whole text").is_visible()  # the page's way back, beside the ranges
    page.locator(".avlc-cells").dblclick()  # the element's own
    # back to the whole: the default, which a link without ranges opens on, so the link drops them
    page.wait_for_function("() => !['long_q0', 'long_q1', 'long_k0', 'long_k1']"
                           ".some(k => new URLSearchParams(location.search).has(k))", polling=100)
    page.wait_for_function("t => document.querySelector('.avlc-title')?.textContent === t",
                           arg=f"layer {LAYER}, head {HEAD}")
    settled(page)
    assert page.get_by_role("button", name="Whole text").count() == 0
    open_view(page, "grid")  # the all-heads page enlarges a head on the element too; then back
    page.wait_for_function("() => document.querySelectorAll('.avlc[data-drawn]').length === 1")
    assert "Drag" not in page.locator(".avlc-hint").text_content()  # the enlarged head does not zoom
    open_view(page, "head")
    page.wait_for_selector(".avlc[data-drawn] .avlc-xtick")
    assert page.locator(".avlc").count() == 1  # the unmounted element let go of its figure: one, drawn anew


def test_the_save_button_writes_png_at_three_times_or_svg_as_the_sidebar_says(app_url, page, text):
    open_levels(page, app_url, text)
    width, height = (int(page.locator(".avlc-axes").get_attribute(side)) for side in ("width", "height"))
    with page.expect_download() as saved:
        page.get_by_role("button", name="Save PNG").click()
    assert saved.value.suggested_filename == f"attention-viz_minilm_head_chart_L{LAYER}H{HEAD}.png"
    png = open(saved.value.path(), "rb").read()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert (int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")) == (3 * width, 3 * height)
    page.locator("[data-testid='stSidebar']").get_by_text("SVG", exact=True).click()
    page.get_by_role("button", name="Save SVG").wait_for()
    with page.expect_download() as saved:
        page.get_by_role("button", name="Save SVG").click()
    assert saved.value.suggested_filename.endswith(".svg")
    svg = open(saved.value.path(), encoding="utf-8").read()
    assert svg.startswith("<svg") and f"layer {LAYER}, head {HEAD}</text>" in svg
    assert svg.count("data:image/png;base64,") == 2  # the cells and the colour bar
    assert "&lt;b&gt;bold&lt;/b&gt;" in svg and "<b>" not in svg  # the sentence in the subtitle, as text
