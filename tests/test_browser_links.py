"""Links in a real browser: clicks and control changes go into the link, and the link opens the
same view in a fresh browser context (no cookies, no session). In its own module, so it can run beside
test_browser.py."""

import urllib.parse

import pytest

from browser import new_page, open_view, reset, settled, shared_link, wait_for_heatmap, wait_for_link


@pytest.fixture(scope="module")
def stranger(browser):
    """A tab in another browser context (its own cookies and storage) that only ever opens links made
    in the test's page: what someone the link was sent to sees."""
    tab = new_page(browser)
    yield tab
    tab.context.close()


@pytest.fixture
def fresh(stranger):
    """The stranger's tab, with no session, cookies or storage left from an earlier link."""
    yield stranger
    reset(stranger)


def ablation_tiles(page):
    """The head markers of the ablation page's grid (the figure titled "or click heads …")."""
    grid = page.locator(".js-plotly-plot").filter(has_text="or click heads")
    grid.locator(".scatterlayer .points path").first.wait_for(timeout=90_000)
    return grid.locator(".scatterlayer .points path")


CHIPS = "[data-testid='stMultiSelect'] [data-tag]"  # the chosen heads in the "Heads to remove" box


# the red frames around removed heads in the ablation grid
RED_FRAMES = "[...p.querySelectorAll('.shapelayer path')].filter(e => (e.style.stroke || '').includes('214')).length"


def red_tiles(page) -> int:
    grid = page.locator(".js-plotly-plot").filter(has_text="or click heads")
    return grid.evaluate(f"p => {RED_FRAMES}")


def click_tile(page, index: int, link: dict[str, str], marked: int) -> dict[str, str]:
    """Click a head of the grid, then wait, as a person would, until the link has changed and the grid
    is drawn again with ``marked`` heads in red: a click on a grid still being redrawn (Streamlit mounts
    a new plot for each new figure) can land on the old one."""
    ablation_tiles(page).nth(index).click(force=True)
    shown = wait_for_link(page, link)
    settled(page)
    page.wait_for_function(
        f"""n => [...document.querySelectorAll('.js-plotly-plot')].some(p => p.textContent.includes('or click heads')
                 && {RED_FRAMES} === n)""",
        arg=marked, timeout=60_000, polling=50)
    return shown


def test_clicking_heads_in_the_ablation_grid_picks_them_and_the_link_reproduces_the_set(app_url, page, fresh):
    page.goto(f"{app_url}/?view=ablation&ablate=3.1")
    assert ablation_tiles(page).count() == 6 * 12
    settled(page)
    click_tile(page, 2 * 12 + 5, {"view": "ablation", "ablate": "3.1,2.5"}, 2)  # layer 2, head 5: added
    click_tile(page, 3 * 12 + 1, {"ablate": "2.5"}, 1)  # 3.1 again: taken out
    link = click_tile(page, 0, {"ablate": "2.5,0.0"}, 2)  # layer 0, head 0: added
    page.locator(CHIPS).nth(1).wait_for(timeout=30_000)
    fresh.goto(f"{app_url}/?{urllib.parse.urlencode(link)}")
    assert ablation_tiles(fresh).count() == 6 * 12
    wait_for_link(fresh, {"ablate": "2.5,0.0", "view": "ablation"})
    fresh.locator(CHIPS).nth(1).wait_for(timeout=30_000)
    assert fresh.locator(CHIPS).evaluate_all("els => els.map(e => e.getAttribute('aria-label'))") == ["2.5", "0.0"]
    assert red_tiles(fresh) == 2  # the grid marks the two heads


def picture(page) -> list:
    """What the view shows: each figure's title and tick labels, and each checkbox's state."""
    page.wait_for_timeout(500)
    plots = page.locator(".js-plotly-plot")
    shown = [(plots.nth(i).locator(".gtitle").all_text_contents(), plots.nth(i).locator(".xtick text").all_text_contents(),
              plots.nth(i).locator(".ytick text").all_text_contents()) for i in range(plots.count())]
    boxes = page.locator("[data-testid='stCheckbox'] input").evaluate_all("els => els.map(e => e.checked)")
    return [shown, boxes]


def test_a_link_made_after_changing_several_controls_opens_identically_in_a_fresh_browser(app_url, page, fresh):
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

    open_view(page, "compare")  # in the sidebar, as a person goes on: the settings above stay
    wait_for_heatmap(page, "layer 5, head 0")
    page.get_by_text("Separate colour scales").click()
    wait_for_link(page, {"separate": "1"})
    b_layer = page.get_by_role("slider").nth(2)  # sliders: A layer, A head, B layer, B head
    b_layer.focus()
    b_layer.press("ArrowLeft")
    wait_for_heatmap(page, "layer 4, head 0")
    wait_for_link(page, {"b_layer": "4", "separate": "1"})
    links["compare"] = (shared_link(page), picture(page))

    open_view(page, "focus")
    wait_for_heatmap(page, "attention from it to animal")
    page.get_by_label("Key token (attended to)").click()
    page.get_by_role("option", name="8: street").click()
    wait_for_heatmap(page, "attention from it to street")
    wait_for_link(page, {"key": "8"})
    links["focus"] = (shared_link(page), picture(page))

    for view, (link, seen) in links.items():  # each link opened anew: a new session of its own
        assert "view=" + view in link
        fresh.goto(link if link.startswith("http") else f"{app_url}/{link}")
        wait_for_heatmap(fresh)
        assert picture(fresh) == seen, view
        assert shared_link(fresh) == link, view
