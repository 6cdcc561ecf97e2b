"""On a phone (390×844, touch): the sidebar closes once a view is picked in it, the sentence box says
nothing of Ctrl+Enter, and the head view's layer and head sit above its heatmap."""

from __future__ import annotations

import pytest

from browser import settled, wait_for_heatmap, wait_for_link

pytestmark = pytest.mark.slow

PHONE = {"width": 390, "height": 844}


@pytest.fixture
def phone(browser):
    context = browser.new_context(viewport=PHONE, has_touch=True, is_mobile=True, reduced_motion="reduce")
    tab = context.new_page()
    tab.set_default_timeout(60_000)
    yield tab
    context.close()


def test_on_a_phone_the_sidebar_closes_after_a_choice_and_no_ctrl_enter_is_offered(app_url, phone):
    phone.goto(app_url)
    wait_for_heatmap(phone)
    settled(phone)
    # the layer slider and the head choice above the heatmap: reached without scrolling past the figure
    layer = phone.locator("[data-testid='stMain'] [data-testid='stSlider']").first.bounding_box()
    cells = phone.locator(".js-plotly-plot .heatmaplayer image").first.bounding_box()
    assert layer["y"] < cells["y"]
    phone.locator("[data-testid='stExpandSidebarButton']").click()
    sidebar = phone.locator("[data-testid='stSidebar']")
    sidebar.locator("textarea").first.tap()
    phone.keyboard.type(" ")
    phone.wait_for_timeout(300)
    instructions = phone.locator("[data-testid='InputInstructions']")
    assert all(not instructions.nth(i).is_visible() for i in range(instructions.count()))
    sidebar.locator("[data-testid='stRadio']").get_by_text("All heads", exact=True).tap()
    wait_for_link(phone, {"view": "grid"})
    settled(phone)
    phone.wait_for_function("() => { const s = document.querySelector(\"[data-testid='stSidebar']\"); "
                            "return !s || s.getBoundingClientRect().right <= 1 || "
                            "s.getAttribute('aria-expanded') === 'false'; }", timeout=10_000)
