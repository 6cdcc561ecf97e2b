"""End to end in a real browser: the server started as the README does, Debian's Chromium."""

import re
import urllib.parse

import pytest

from attention_viz.ui.views.compare import MODE_NAMES
from browser import MARGINS_PUSHED, ROOT, SHARED_VIEW, open_view, settled, wait_for_heatmap, wait_for_link, x_tick_labels


def test_type_a_sentence_choose_layer_and_head_and_see_its_tokens(app_url, page):
    page.goto(app_url)
    wait_for_heatmap(page, "layer 3, head 1")  # the landing view: the head the app finds for "it" → "animal"
    assert page.get_by_text("How to read a heatmap").count() == 1
    headings = page.locator("[data-testid='stSidebar'] [data-testid='stMarkdownContainer'] strong").all_text_contents()
    assert headings == ["Learn", "Explore"]
    sentence = "Paris is the capital of France"
    box = page.get_by_label("Sentence", exact=True).and_(page.locator("textarea"))
    box.fill(sentence)
    box.press("Control+Enter")
    page.wait_for_function(
        "() => [...document.querySelectorAll('.js-plotly-plot .xtick text')].some(e => e.textContent === 'Paris')",
        timeout=60_000,
    )
    layer = page.get_by_role("slider").first
    layer.focus()
    layer.press("ArrowLeft")
    wait_for_heatmap(page, "layer 2, head 1")
    head = page.get_by_role("slider").nth(1)
    head.focus()
    for _ in range(4):
        head.press("ArrowRight")
    wait_for_heatmap(page, "layer 2, head 5")
    assert x_tick_labels(page) == ["[CLS]", "Paris", "is", "the", "capital", "of", "France", "[SEP]"]
    assert page.evaluate(MARGINS_PUSHED) == []  # its margins held the labels: drawn once, not twice
    # elements of a previous run dim in one step, not in a fade repainted every frame (ui/page_style.py):
    # even Streamlit's own stale-element transition, set on an element, lasts 0 s
    assert page.evaluate("""() => [...document.querySelectorAll('.stElementContainer')].slice(0, 5).map(e => {
        e.style.transition = 'opacity 1s ease-in 0.5s'; const d = getComputedStyle(e).transitionDuration;
        e.style.transition = ''; return d; })""") == ["0s"] * 5
    # the app writes the link after the figure is drawn: wait for it rather than read it at once
    link = wait_for_link(page, {"layer": "2", "head": "5", "text": sentence})
    assert link["view"] == "head"


def test_a_shared_url_opens_that_exact_view_and_the_weighting_choice_redraws_it_into_the_link(app_url, page, tmp_path):
    page.goto(f"{app_url}/?{urllib.parse.urlencode(SHARED_VIEW)}")
    wait_for_heatmap(page, "layer 3, head 1")
    labels = x_tick_labels(page)
    assert labels[:4] == ["[CLS]", "The", "animal", "didn"] and labels.count("the") == 1
    shot = tmp_path / "view.png"  # the README's picture is made by `make screenshot`, never by a test
    page.screenshot(path=str(shot), full_page=False)
    assert shot.stat().st_size > 20_000
    # the same page goes on (one page load fewer): the head redrawn as value-weighted norms
    page.get_by_text("value-weighted norms", exact=True).click()
    wait_for_heatmap(page, "layer 3, head 1 · value-weighted norms")
    wait_for_link(page, {"weighting": "norms", "view": "head"})


VIEWS = [
    "basics", "inside", "positional", "causal", "encdec", "image",  # Learn
    "head", "grid", "focus", "layers", "compare", "ablation", "detector", "patching", "logit_lens", "circuit", "atlas",  # Explore
]


def test_the_page_list_matches_the_app():
    source = (ROOT / "app.py").read_text()
    assert re.findall(r'^    "(\w+)": \(', source, re.M) == VIEWS
    assert re.findall(r'^SECTIONS = \{"(\w+)": \w+, "(\w+)": \w+\}', source, re.M) == [("Learn", "Explore")]


def test_clicking_a_head_in_the_grid_enlarges_it_and_in_token_focus_opens_its_row(app_url, page):
    page.goto(f"{app_url}/?view=grid")
    wait_for_heatmap(page, "layer 0, head 0")  # the enlarged head before any click
    grid = page.locator(".js-plotly-plot").first
    tiles = grid.locator(".scatterlayer .points path")
    tiles.nth(6 * 12 - 1).wait_for(timeout=90_000)  # the grid may be drawn after the enlarged head
    assert tiles.count() == 6 * 12
    tiles.nth(2 * 12 + 7).click(force=True)  # layer 2, head 7
    wait_for_heatmap(page, "layer 2, head 7")
    wait_for_link(page, {"layer": "2", "head": "7", "view": "grid"})

    open_view(page, "focus")  # in the sidebar (one page load fewer)
    page.wait_for_selector(".js-plotly-plot .scatterlayer .points path", timeout=60_000)
    cells = page.locator(".js-plotly-plot").first.locator(".scatterlayer .points path")
    cells.nth(3 * 12 + 1).click(force=True)  # layer 3, head 1
    wait_for_link(page, {"layer": "3", "head": "1", "view": "focus"})


PLOTS = """() => [...document.querySelectorAll('.js-plotly-plot')].map(gd => ({
    title: gd.layout.title && gd.layout.title.text,
    zmax: gd._fullData[0].zmax, zmin: gd._fullData[0].zmin,
    camera: gd._context.toImageButtonOptions,
}))"""


def side_by_side(page) -> tuple[dict, dict]:
    """The pair of the settled compare view (a difference may follow); every figure's camera checked."""
    settled(page)
    page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot .heatmaplayer image').length >= 2",
                           timeout=90_000)
    plots = page.evaluate(PLOTS)
    for plot in plots:
        assert plot["camera"]["scale"] >= 2 and plot["camera"]["format"] in ("png", "svg")
        assert plot["camera"]["filename"].startswith("attention-viz_minilm_compare_")
    assert plots[0]["title"] != plots[1]["title"]
    return plots[0], plots[1]


def test_side_by_side_figures_share_one_colour_range_and_the_camera_saves_at_scale_3(app_url, page):
    """Each compare mode, picked on the page, draws its pair with one colour range, as drawn; asked
    for separate scales, the two heads get their own ranges."""
    params = {"view": "compare", "compare_mode": "heads", "compare_text_b": "The big animal didn't cross the street."}
    page.goto(f"{app_url}/?{urllib.parse.urlencode(params)}")
    for mode in ["heads", "sentences", "coreference"]:
        if mode != "heads":
            page.get_by_text(MODE_NAMES[mode], exact=True).click()
            wait_for_link(page, {"mode": mode})
        first, second = side_by_side(page)
        assert (first["zmin"], first["zmax"]) == (second["zmin"], second["zmax"]), mode
    page.get_by_text(MODE_NAMES["heads"], exact=True).click()
    wait_for_link(page, {"mode": "heads"})
    side_by_side(page)
    page.get_by_text("Separate colour scales").click()
    wait_for_link(page, {"separate": "1"})
    first, second = side_by_side(page)
    assert first["zmax"] != second["zmax"]
