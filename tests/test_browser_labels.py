"""No two text labels of a chart overlap: every view opened in Chromium at the two window sizes new
users have (1280×800, 1920×1080), and in every Plotly chart the boxes the browser drew for its tick
labels, annotations, axis titles, title and subtitle, colour bar labels and legend entries measured
against each other. Labels of different charts are never compared; hidden or empty ones are skipped."""

import re
import urllib.parse

import pytest

from browser import NO_CHART, POLL_MS, VIEW_LABELS, open_view, settled, wait_for_heatmap

pytestmark = pytest.mark.slow  # the served app and Chromium, every view twice

SIZES = ({"width": 1280, "height": 800}, {"width": 1920, "height": 1080})
SLACK = 1  # px: anti-aliased glyph edges of neighbours may touch
# Every text label of a Plotly chart: ticks of every axis (x, x2, …, the colour bar's), axis and
# colour-bar titles, title and subtitle, annotations (subplot titles too), legend entries, and the
# text written in heatmap cells and on bars (the causal page's "−∞").
LABELS = ", ".join((
    "g[class$='tick'] > text", "g[class$='tick2'] > text", "[class*='title'] > text", "text.gtitle",
    "text.gtitle-subtitle", "text[class*='title']", ".annotation-text", ".cbaxis text", ".legendtext",
    ".heatmaplayer text", ".barlayer text", ".textpoint text",
))
# Each label's box is its own (getBBox, the box getBoundingClientRect gives a level label) with its
# transform, so a turned label is the turned rectangle it fills, not the larger level box around it
# (two neighbours turned 60° overlap as level boxes while their text is well apart). Two boxes overlap
# by the least depth one must move to clear the other, across every side of either (separating axes).
OVERLAPS = """([labels, slack]) => [...document.querySelectorAll('.js-plotly-plot')].flatMap((gd, chart) => {
    const title = String(gd._fullLayout.title.text || `chart ${chart}`).replace(/<[^>]*>/g, '').slice(0, 50);
    const corners = e => {
        const b = e.getBBox(), m = e.getScreenCTM();
        return [[b.x, b.y], [b.x + b.width, b.y], [b.x + b.width, b.y + b.height], [b.x, b.y + b.height]]
            .map(([x, y]) => [m.a * x + m.c * y + m.e, m.b * x + m.d * y + m.f]);
    };
    const shown = [...new Set(gd.querySelectorAll(labels))].filter(e => {
        if (!e.textContent.trim() || e.closest('.hoverlayer')) return false;
        for (let a = e; a && a !== gd; a = a.parentElement) {
            const style = getComputedStyle(a);
            if (style.display === 'none' || style.visibility === 'hidden' || style.opacity === '0') return false;
        }
        const box = e.getBoundingClientRect();
        return box.width > 0 && box.height > 0;
    }).map(e => ({text: e.textContent.trim(), corners: corners(e)}));
    const depth = (p, q) => {
        let least = Infinity;
        for (const poly of [p, q]) for (let i = 0; i < 4; i++) {
            const [x0, y0] = poly[i], [x1, y1] = poly[(i + 1) % 4], length = Math.hypot(x1 - x0, y1 - y0);
            if (!length) continue;
            const axis = [(y0 - y1) / length, (x1 - x0) / length];
            const span = r => { const v = r.map(([x, y]) => x * axis[0] + y * axis[1]); return [Math.min(...v), Math.max(...v)]; };
            const [a0, a1] = span(p), [b0, b1] = span(q);
            least = Math.min(least, Math.min(a1, b1) - Math.max(a0, b0));
        }
        return least;
    };
    const found = [];
    for (let i = 0; i < shown.length; i++) for (let j = i + 1; j < shown.length; j++) {
        const d = depth(shown[i].corners, shown[j].corners);
        if (d > slack) found.push(`${title}: "${shown[i].text.slice(0, 30)}" × "${shown[j].text.slice(0, 30)}" (${d.toFixed(1)} px)`);
    }
    return found;
})"""
# Every chart shown is drawn at its box's width and fitted by the page script (ui/narrow_charts.js marks
# the data and the width it fitted a chart to, 250 ms after the page changes, then relayouts it): the
# labels measured are the ones a person sees. Charts folded away (no width) are not measured.
FITTED = """() => [...document.querySelectorAll('.js-plotly-plot')].every(gd => {
    const width = gd.clientWidth;
    if (!width || !gd.data || !gd._fullLayout) return !width;
    return gd.__attentionVizFitted === gd.data && gd.__attentionVizFittedAt === `${width}×${window.innerWidth}`
        && Math.abs(gd._fullLayout.width - width) <= 1 && !gd._transitioning;
})"""


def fitted(page) -> None:
    page.wait_for_function(FITTED, polling=POLL_MS, timeout=30_000)


# the views whose steps are folded: every step opened, so its charts are measured too
FOLDED = {"inside"}
STEP = re.compile(r"\d · ")


def open_every_step(page) -> None:
    """Open the folded steps ("2 · …") one by one: a click may redraw the page, so each is found again."""
    closed = page.locator("[data-testid='stMain'] details:not([open]) > summary").filter(has_text=STEP)
    for _ in range(closed.count()):
        closed.first.click()
        settled(page)
    assert closed.count() == 0


def test_no_two_labels_of_a_chart_overlap_in_any_view_at_either_window_size(app_url, page):
    page.set_viewport_size(SIZES[0])
    page.goto(f"{app_url}/?{urllib.parse.urlencode({'view': 'head'})}")
    wait_for_heatmap(page)
    found: dict[str, list[str]] = {}
    for size in SIZES:
        page.set_viewport_size(size)
        for view in VIEW_LABELS:
            open_view(page, view)
            if view in NO_CHART:  # it says why there is no chart (the atlas: none built; the lens: an encoder)
                page.get_by_text(NO_CHART[view]).first.wait_for()
                continue
            page.wait_for_selector(".js-plotly-plot .main-svg", timeout=90_000)
            if view in FOLDED:
                open_every_step(page)
            fitted(page)  # Plotly's resize to the column's width, and the page script's fit of the labels
            overlaps = page.evaluate(OVERLAPS, [LABELS, SLACK])
            if overlaps:
                found[f"{view} at {size['width']}×{size['height']}"] = overlaps
    for where, overlaps in found.items():  # the first few of each chart: enough to see what to fix
        charts: dict[str, list[str]] = {}
        for overlap in overlaps:
            charts.setdefault(overlap.split(": ")[0], []).append(overlap)
        print(where, *(f"{len(o)}× {o[0]} …" for o in charts.values()), sep="\n  ")
    assert found == {}


TROPHY = "The trophy didn't fit in the suitcase because it was too big."
PHONE = {"width": 390, "height": 844}
# Each token heatmap's token count, the tick labels drawn on each axis, the width of its cells and
# whether its subtitle stays inside the chart (wrapped, never cut)
TOKEN_CHARTS = """() => [...document.querySelectorAll('.js-plotly-plot')]
    .filter(gd => gd.data.some(t => t.type === 'heatmap') && gd.layout.xaxis && Array.isArray(gd.layout.xaxis.categoryarray))
    .map(gd => {
        const drawn = axis => [...gd.querySelectorAll(`.${axis}tick > text`)].map(t => t.textContent.trim()).filter(Boolean);
        const box = e => e.getBoundingClientRect();
        const chart = box(gd), cells = gd.querySelector('.heatmaplayer image, .hm image'), sub = gd.querySelector('.gtitle-subtitle');
        const tokens = axis => gd.layout[axis].categoryarray.map(v => String(v).replace(/^\\d+: /, ''));
        return {title: String(gd.layout.title.text || ''), keys: gd.layout.xaxis.categoryarray.length,
                key_tokens: tokens('xaxis'), query_tokens: tokens('yaxis'),
                queries: gd.layout.yaxis.categoryarray.length, x: drawn('x'), y: drawn('y'),
                cells: cells ? box(cells).width : 0,
                subtitle_inside: !sub || (box(sub).left >= chart.left - 1 && box(sub).right <= chart.right + 1)};
    })"""
# What the camera button saves: Plotly's image of the chart as drawn (the PNG is this SVG rasterized)
EXPORTED = """async i => {
    const gd = [...document.querySelectorAll('.js-plotly-plot')][i];
    const png = await window.Plotly.toImage(gd, {format: 'png', scale: 1});
    const url = await window.Plotly.toImage(gd, {format: 'svg', scale: 1});
    const svg = new DOMParser().parseFromString(decodeURIComponent(url.slice(url.indexOf(',') + 1)), 'image/svg+xml');
    const drawn = axis => [...svg.querySelectorAll(`.${axis}tick > text`)].map(t => t.textContent.trim()).filter(Boolean);
    return {png: png.startsWith('data:image/png'), x: drawn('x'), y: drawn('y')};
}"""


def token_charts(page, app_url: str, view: str, size: dict, text: str = TROPHY) -> list[dict]:
    page.set_viewport_size(size)
    page.goto(f"{app_url}/?{urllib.parse.urlencode({'view': view, 'text': text})}")
    wait_for_heatmap(page)
    settled(page)
    fitted(page)  # the page script that fits labels and wraps subtitles
    return page.evaluate(TOKEN_CHARTS)


@pytest.mark.parametrize("size", [SIZES[0], PHONE], ids=["1280x800", "390x844"])
def test_every_token_of_a_sentence_is_labelled_on_the_head_view_compare_and_the_export(app_url, page, size):
    head, *_ = token_charts(page, app_url, "head", size)
    assert head["keys"] == head["queries"] >= 14
    assert len(head["x"]) == head["keys"] and len(head["y"]) == head["queries"], head
    assert head["subtitle_inside"]
    if size == SIZES[0]:
        assert head["cells"] >= 380, head["cells"]
    exported = page.evaluate(EXPORTED, 0)
    assert exported["png"] and len(exported["x"]) == head["keys"] and len(exported["y"]) == head["queries"]
    pair = token_charts(page, app_url, "compare", size)
    assert len(pair) == 2
    for chart in pair:
        assert len(chart["x"]) == chart["keys"] and len(chart["y"]) == chart["queries"], chart
        assert chart["subtitle_inside"], chart["title"]
        if size == SIZES[0]:
            assert chart["cells"] >= 250, chart["cells"]


# 64 tokens with minilm's [CLS] and [SEP]: the head view's window, every one labelled at 1280 px
SIXTY_FOUR = ("The trophy didn't fit in the suitcase because it was too big. The old fishermen mended their nets "
              "while the children ran along the harbour wall, counting the boats that came back before the storm. "
              "Attention lets every word look at every other word and decide how much each one matters for its own "
              "meaning.")


def test_every_one_of_64_tokens_is_labelled_at_1280_on_the_head_view_compare_and_the_export(app_url, page):
    """Every token present on both axes, in order, with no two labels overlapping (the colour bar goes
    under the plot to give the keys its width), in the picture the camera button saves too."""
    head, *_ = token_charts(page, app_url, "head", SIZES[0], SIXTY_FOUR)
    assert head["keys"] == head["queries"] == 64
    assert head["x"] == head["key_tokens"] and head["y"] == head["query_tokens"], head
    assert page.evaluate(OVERLAPS, [LABELS, SLACK]) == []
    exported = page.evaluate(EXPORTED, 0)
    assert exported["png"] and exported["x"] == head["key_tokens"] and exported["y"] == head["query_tokens"]
    pair = token_charts(page, app_url, "compare", SIZES[0], SIXTY_FOUR)
    assert len(pair) == 2
    for chart in pair:
        assert chart["keys"] == chart["queries"] == 64
        assert chart["x"] == chart["key_tokens"] and chart["y"] == chart["query_tokens"], chart["title"]
    assert page.evaluate(OVERLAPS, [LABELS, SLACK]) == []
