"""End to end in a real browser: the server started as the README does, Debian's Chromium."""

import re
import urllib.parse

import pytest

from browser import ROOT, SHARED_VIEW, chromium, new_page, served_app, wait_for_heatmap, wait_for_link, x_tick_labels


@pytest.fixture(scope="module")
def app_url():
    with served_app() as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    with chromium() as b:
        yield b


@pytest.fixture
def page(browser):
    page = new_page(browser, 1400, 1000)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    yield page
    page.close()
    assert not errors, errors


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
    # the app writes the link after the figure is drawn: wait for it rather than read it at once
    link = wait_for_link(page, {"layer": "2", "head": "5", "text": sentence})
    assert link["view"] == "head"


def test_a_shared_url_opens_that_exact_view(app_url, page, tmp_path):
    page.goto(f"{app_url}/?{urllib.parse.urlencode(SHARED_VIEW)}")
    wait_for_heatmap(page, "layer 3, head 1")
    labels = x_tick_labels(page)
    assert labels[:4] == ["[CLS]", "The", "animal", "didn"] and labels.count("the") == 1
    shot = tmp_path / "view.png"  # the README's picture is made by `make screenshot`, never by a test
    page.screenshot(path=str(shot), full_page=False)
    assert shot.stat().st_size > 20_000



VIEWS = [
    "basics", "inside", "positional", "causal", "encdec", "image",  # Learn
    "head", "grid", "focus", "layers", "compare", "ablation", "detector", "atlas",  # Explore
]


def test_the_page_list_matches_the_app():
    source = (ROOT / "app.py").read_text()
    assert re.findall(r'^    "(\w+)": \(', source, re.M) == VIEWS
    assert re.findall(r'^SECTIONS = \{"(\w+)": \w+, "(\w+)": \w+\}', source, re.M) == [("Learn", "Explore")]


@pytest.mark.parametrize("view", VIEWS)
def test_every_page_opens_without_an_error(app_url, page, view):
    page.goto(f"{app_url}/?view={view}")
    if view == "atlas":  # no atlas built in this run's atlas folder: the page offers to build one
        page.get_by_role("button", name="Build the probes atlas of minilm").wait_for(timeout=90_000)
    else:
        page.wait_for_selector(".js-plotly-plot .main-svg", timeout=90_000)
    page.wait_for_timeout(500)
    assert page.locator("[data-testid='stException']").count() == 0
    assert page.locator("[data-testid='stAlertContentError']").count() == 0
    assert view == "atlas" or page.locator(".js-plotly-plot").count() >= 1


def test_clicking_a_head_in_the_grid_enlarges_it(app_url, page):
    page.goto(f"{app_url}/?view=grid")
    wait_for_heatmap(page, "layer 0, head 0")  # the enlarged head before any click
    grid = page.locator(".js-plotly-plot").first
    tiles = grid.locator(".scatterlayer .points path")
    tiles.nth(6 * 12 - 1).wait_for(timeout=90_000)  # the grid may be drawn after the enlarged head
    assert tiles.count() == 6 * 12
    tiles.nth(2 * 12 + 7).click(force=True)  # layer 2, head 7
    wait_for_heatmap(page, "layer 2, head 7")
    wait_for_link(page, {"layer": "2", "head": "7", "view": "grid"})


PLOTS = """() => [...document.querySelectorAll('.js-plotly-plot')].map(gd => ({
    title: gd.layout.title && gd.layout.title.text,
    zmax: gd._fullData[0].zmax, zmin: gd._fullData[0].zmin,
    camera: gd._context.toImageButtonOptions,
}))"""


@pytest.mark.parametrize("mode", ["heads", "sentences", "coreference"])
def test_side_by_side_figures_share_one_colour_range_and_the_camera_saves_at_scale_3(app_url, page, mode):
    params = {"view": "compare", "compare_mode": mode, "compare_text_b": "The big animal didn't cross the street."}
    page.goto(f"{app_url}/?{urllib.parse.urlencode(params)}")
    page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot .heatmaplayer image').length >= 2",
                           timeout=90_000)
    plots = page.evaluate(PLOTS)
    first, second = plots[0], plots[1]  # the pair, side by side (a difference may follow)
    assert first["title"] != second["title"]
    assert (first["zmin"], first["zmax"]) == (second["zmin"], second["zmax"])  # one colour range, as drawn
    for plot in plots:
        assert plot["camera"]["scale"] >= 2 and plot["camera"]["format"] in ("png", "svg")
        assert plot["camera"]["filename"].startswith("attention-viz_minilm_compare_")
    if mode == "heads":  # asked for separate scales, each figure gets its own range
        page.goto(f"{app_url}/?{urllib.parse.urlencode({**params, 'separate': '1'})}")
        page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot .heatmaplayer image').length >= 2",
                               timeout=90_000)
        page.wait_for_timeout(1000)
        first, second = page.evaluate(PLOTS)[:2]
        assert first["zmax"] != second["zmax"]


def test_clicking_a_head_in_token_focus_opens_its_row(app_url, page):
    page.goto(f"{app_url}/?view=focus")
    page.wait_for_selector(".js-plotly-plot .scatterlayer .points path", timeout=60_000)
    cells = page.locator(".js-plotly-plot").first.locator(".scatterlayer .points path")
    cells.nth(3 * 12 + 1).click(force=True)  # layer 3, head 1
    wait_for_link(page, {"layer": "3", "head": "1", "view": "focus"})


def test_the_weighting_choice_redraws_the_head_as_value_weighted_norms_and_goes_into_the_link(app_url, page):
    page.goto(f"{app_url}/?view=head")
    wait_for_heatmap(page, "layer 3, head 1")
    page.get_by_text("value-weighted norms", exact=True).click()
    wait_for_heatmap(page, "layer 3, head 1 · value-weighted norms")
    wait_for_link(page, {"weighting": "norms", "view": "head"})


def ablation_tiles(page):
    """The head markers of the ablation page's grid (the figure titled "or click heads …")."""
    grid = page.locator(".js-plotly-plot").filter(has_text="or click heads")
    grid.locator(".scatterlayer .points path").first.wait_for(timeout=90_000)
    return grid.locator(".scatterlayer .points path")


CHIPS = "[data-testid='stMultiSelect'] [data-tag]"  # the chosen heads in the "Heads to remove" box


def red_tiles(page) -> int:
    return ablation_tiles(page).evaluate_all("els => els.filter(e => (e.style.fill || '').includes('214')).length")


def test_clicking_heads_in_the_ablation_grid_picks_them_and_the_link_reproduces_the_set(app_url, browser, page):
    page.goto(f"{app_url}/?view=ablation&ablate=3.1")
    assert ablation_tiles(page).count() == 6 * 12
    ablation_tiles(page).nth(2 * 12 + 5).click(force=True)  # layer 2, head 5: added
    wait_for_link(page, {"view": "ablation", "ablate": "3.1,2.5"})
    ablation_tiles(page).nth(3 * 12 + 1).click(force=True)  # 3.1 again: taken out
    wait_for_link(page, {"ablate": "2.5"})
    ablation_tiles(page).nth(0).click(force=True)  # layer 0, head 0: added
    link = wait_for_link(page, {"ablate": "2.5,0.0"})
    page.locator(CHIPS).nth(1).wait_for(timeout=30_000)
    fresh = new_page(browser, 1400, 1000)
    try:
        fresh.goto(f"{app_url}/?{urllib.parse.urlencode(link)}")
        assert ablation_tiles(fresh).count() == 6 * 12
        wait_for_link(fresh, {"ablate": "2.5,0.0", "view": "ablation"})
        fresh.locator(CHIPS).nth(1).wait_for(timeout=30_000)
        assert fresh.locator(CHIPS).evaluate_all("els => els.map(e => e.getAttribute('aria-label'))") == ["2.5", "0.0"]
        assert red_tiles(fresh) == 2  # the grid marks the two heads
    finally:
        fresh.close()


def shared_link(page) -> str:
    """The "Copy link" box's text (the sidebar's code block)."""
    return page.locator("[data-testid='stSidebar'] [data-testid='stCode'] code").inner_text().strip()


def picture(page) -> list:
    """What the view shows: each figure's title and tick labels, and each checkbox's state."""
    page.wait_for_timeout(500)
    plots = page.locator(".js-plotly-plot")
    shown = [(plots.nth(i).locator(".gtitle").all_text_contents(), plots.nth(i).locator(".xtick text").all_text_contents(),
              plots.nth(i).locator(".ytick text").all_text_contents()) for i in range(plots.count())]
    boxes = page.locator("[data-testid='stCheckbox'] input").evaluate_all("els => els.map(e => e.checked)")
    return [shown, boxes]


def test_a_link_made_after_changing_several_controls_opens_identically_in_a_fresh_browser(app_url, browser, page):
    page.goto(f"{app_url}/?view=head")
    wait_for_heatmap(page, "layer 3, head 1")
    page.get_by_text("Hide special tokens").click()
    wait_for_link(page, {"hide_special": "1"})
    page.get_by_text("Word level").click()
    wait_for_link(page, {"words": "1"})
    for step in range(1, 4):  # one key at a time: a rerun redraws the slider
        page.get_by_role("slider").nth(2).press("ArrowRight")
        wait_for_link(page, {"threshold": f"{step / 100:g}"})
    links = {"head": (shared_link(page), picture(page))}

    page.goto(f"{app_url}/?view=compare")
    wait_for_heatmap(page, "layer 5, head 0")
    page.get_by_text("Separate colour scales").click()
    wait_for_link(page, {"separate": "1"})
    b_layer = page.get_by_role("slider").nth(2)  # sliders: A layer, A head, B layer, B head
    b_layer.focus()
    b_layer.press("ArrowLeft")
    wait_for_heatmap(page, "layer 4, head 0")
    wait_for_link(page, {"b_layer": "4", "separate": "1"})
    links["compare"] = (shared_link(page), picture(page))

    page.goto(f"{app_url}/?view=focus")
    wait_for_heatmap(page, "attention from it to animal")
    page.get_by_label("Key token (attended to)").click()
    page.get_by_role("option", name="8: street").click()
    wait_for_heatmap(page, "attention from it to street")
    wait_for_link(page, {"key": "8"})
    links["focus"] = (shared_link(page), picture(page))

    fresh = browser.new_context(viewport={"width": 1400, "height": 1000}, reduced_motion="reduce")  # no cookies, no session
    try:
        for view, (link, seen) in links.items():
            assert "view=" + view in link
            other = fresh.new_page()
            other.goto(link if link.startswith("http") else f"{app_url}/{link}")
            wait_for_heatmap(other)
            assert picture(other) == seen, view
            assert shared_link(other) == link, view
            other.close()
    finally:
        fresh.close()
