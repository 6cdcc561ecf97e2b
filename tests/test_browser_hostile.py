"""Every page in a real browser, opened with hostile text: each draws without an error; HTML and
JavaScript in the sentence show as literal text in every view and in the exported HTML; no dialog
fires and no element is injected. Markdown and LaTeX from a link stay text."""

import urllib.parse

import pytest

from browser import MARGINS_PUSHED, NO_CHART, VIEW_LABELS, open_view, wait_for_heatmap

HOSTILE = "<script>alert('x')</script> <img src=x onerror=alert(1)> \"'><svg onload=alert(2)> it"
INJECTED = """() => ({
    handlers: document.querySelectorAll('[onerror],[onload]').length,
    images: [...document.querySelectorAll('img')].filter(i => i.getAttribute('src') === 'x').length,
    svgs: [...document.querySelectorAll('svg')].filter(s => s.getAttribute('onload')).length,
    scripts: [...document.querySelectorAll('script')].filter(s => s.textContent.trim() === "alert('x')").length,
})"""
CLEAN = {"handlers": 0, "images": 0, "svgs": 0, "scripts": 0}


PROBLEMS = "[data-testid='stException'], [data-testid='stAlertContentError']"
# the views whose figures or text show the sentence's tokens
SHOW_THE_SENTENCE = {"head", "grid", "focus", "layers", "compare"}


def test_every_page_opens_without_an_error_and_hostile_text_stays_text_in_it_and_in_the_exported_html(
        app_url, page, disk_page, listen, tmp_path):
    """One session opens the hostile text from a link and picks every view in the sidebar in turn,
    as a person does (a page load each would cost the browser ~10 CPU-s here): each view draws its
    figure (the atlas, with none built, offers to build one), shows no error, fires no dialog and
    gets no element injected; where the sentence is shown, its markup is literal tokens; no figure
    needed its margins moved (drawn once). Then the head view's figure is exported and opened from
    disk."""
    page.set_viewport_size({"width": 1300, "height": 900})
    dialogs: list[str] = []

    def on_dialog(dialog) -> None:  # on the app's page, then on the exported file's
        dialogs.append(dialog.message)
        dialog.dismiss()

    listen(page, "dialog", on_dialog)
    page.goto(f"{app_url}/?{urllib.parse.urlencode({'text': HOSTILE, 'view': 'head'})}")
    wait_for_heatmap(page)
    broken = {}
    for view in [*(v for v in VIEW_LABELS if v != "head"), "head"]:  # ends on the head view, to export
        open_view(page, view)
        if view in NO_CHART:
            page.get_by_text(NO_CHART[view]).first.wait_for(timeout=90_000)
        else:
            page.wait_for_selector(".js-plotly-plot .main-svg", timeout=90_000)
        problems = page.locator(PROBLEMS).all_inner_texts()
        if problems or (view not in NO_CHART and page.locator(".js-plotly-plot").count() == 0):
            broken[view] = problems or ["no figure"]
        if view in SHOW_THE_SENTENCE:
            # the markup is shown as tokens, literally: "<", "script", ">" on an axis or in the text
            shown = page.evaluate("() => [...document.querySelectorAll('text, span')].map(e => e.textContent.trim())")
            assert "<" in shown and "script" in shown and "alert" in shown, view
        assert page.evaluate(MARGINS_PUSHED) == [], view  # every figure's margins hold its labels: drawn once
        assert page.evaluate(INJECTED) == CLEAN, view
    page.wait_for_timeout(800)  # give any injected handler the chance to fire
    assert broken == {} and dialogs == []
    wait_for_heatmap(page)

    page.get_by_role("button", name="Prepare the figure as HTML (works offline)").click()
    with page.expect_download() as download:
        page.get_by_role("button", name="Download figure (HTML, works offline)").click()
    path = tmp_path / "figure.html"
    download.value.save_as(path)
    # the sentence rides in the figure's JSON (the subtitle) as data: escaped, never as markup
    assert "<script>alert" not in path.read_text(encoding="utf-8")

    dialogs.clear()
    listen(disk_page, "dialog", on_dialog)
    requests: list[str] = []
    listen(disk_page, "request", lambda r: requests.append(r.url))
    disk_page.goto(path.as_uri())
    wait_for_heatmap(disk_page)
    disk_page.wait_for_timeout(800)
    assert dialogs == [] and disk_page.evaluate(INJECTED) == CLEAN
    assert all(url.startswith(("file:", "data:", "blob:")) for url in requests), requests  # offline
    assert "script" in disk_page.locator(".xtick text").all_text_contents()


# Markdown and LaTeX from a link: Streamlit renders Markdown in alerts, captions and headings, so a
# payload that reached them unescaped would become a real link, fetch an outside image or run KaTeX.
LINK = "[Click here to log in](https://evil.example/login)"
PIXEL = "![x](https://evil.example/pixel.png)"
LATEX = "$\\href{https://evil.example}{\\text{click}}$"
MARKDOWN_LINKS = {
    "model name": {"model": LINK},
    "hf: folder in an error": {"model": f"hf:{PIXEL}"},
    "sentence, token focus heading": {"text": f"{LATEX} {PIXEL} it", "view": "focus"},
    "second sentence": {"text": "the cat", "view": "compare", "compare_mode": "sentences",
                        "compare_text_b": f"{LINK} {LATEX}"},
}
OUTSIDE = """() => ({
    links: [...document.querySelectorAll('a[href]')].map(a => a.href).filter(h => new URL(h).host !== location.host),
    images: [...document.querySelectorAll('img')].map(i => i.src).filter(s => s.includes('evil.example')),
    math: document.querySelectorAll('.katex').length,
})"""
SHOWN = "document.body.innerText + [...document.querySelectorAll('input, textarea')].map(i => i.value)"


@pytest.mark.parametrize("where", list(MARKDOWN_LINKS))
def test_markdown_and_latex_from_a_link_stay_text(app_url, page, listen, where):
    page.set_viewport_size({"width": 1300, "height": 900})
    requests: list[str] = []
    listen(page, "request", lambda r: requests.append(r.url))
    page.goto(f"{app_url}/?{urllib.parse.urlencode(MARKDOWN_LINKS[where])}")
    # shown, as text (or kept in its box), once the run has drawn it
    page.wait_for_function(f"() => ({SHOWN}).includes('evil.example')", timeout=90_000)
    page.wait_for_timeout(1_500)  # let every element of the run render (and any image load)
    assert page.evaluate(OUTSIDE) == {"links": [], "images": [], "math": 0}
    host = urllib.parse.urlsplit(app_url).netloc
    assert all(urllib.parse.urlsplit(u).netloc == host for u in requests if u.startswith("http")), requests
