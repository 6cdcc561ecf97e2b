"""Every view, as a screen-reader user and a low-vision user meet it: axe-core (the rules of WCAG 2.x
A and AA, run inside the page: no network) finds no serious or critical violation, and every chart
has a role and a label that names its model, and on the head view its layer, head and sentence."""

from __future__ import annotations

import importlib.resources
import urllib.parse

import pytest

from browser import VIEW_LABELS, open_view, settled, wait_for_heatmap

pytestmark = pytest.mark.slow

AXE = (importlib.resources.files("axe_playwright_python") / "axe.min.js").read_text(encoding="utf-8")
SERIOUS = """async () => {
    const found = await axe.run(document, {resultTypes: ['violations']});
    return found.violations.filter(v => ['serious', 'critical'].includes(v.impact))
        .map(v => `${v.id}: ${v.help} (${v.nodes.length}×, e.g. ${v.nodes[0].target.join(' ')})`);
}"""
CHART_LABELS = """() => [...document.querySelectorAll('.js-plotly-plot, .avlc')]
    .map(chart => [chart.getAttribute('role'), chart.getAttribute('aria-label')])"""
TEXT = "The animal didn't cross the street because it was too tired."


def labels(page) -> list[list[str | None]]:
    page.wait_for_timeout(400)  # the labelling script runs at most every 200 ms
    return page.evaluate(CHART_LABELS)


def test_every_view_passes_axe_and_labels_its_charts(app_url, page):
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(f"{app_url}/?{urllib.parse.urlencode({'text': TEXT, 'view': 'head', 'layer': '3', 'head': '1'})}")
    wait_for_heatmap(page)
    settled(page)
    head = labels(page)
    assert head and all(role == "figure" for role, _ in head)
    assert any(all(word in (label or "") for word in ("minilm", "layer 3", "head 1", "The animal didn")) for _, label in head), head

    violations, unlabelled = {}, {}
    page.add_script_tag(content=AXE)  # stays in the window: views change by reruns, not page loads
    for view in VIEW_LABELS:
        if view != "head":
            open_view(page, view)
        found = page.evaluate(SERIOUS)
        if found:
            violations[view] = found
        missing = [label for role, label in labels(page) if role != "figure" or not label]
        if missing:
            unlabelled[view] = missing
    assert violations == {}
    assert unlabelled == {}
