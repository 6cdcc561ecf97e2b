"""docs/notebook.ipynb runs top to bottom in a fresh kernel (nbclient + ipykernel, headless, in a
temporary folder), its outputs are what it says, and the saved notebook carries plotly.js once: its
outputs, laid out as a notebook page lays them out, draw in Chromium with the network blocked — in
order, and with an output moved above the one that carries plotly.js. Outputs never clash, user
text stays text, and the kernel side sends plotly.js with the first output only (every output in Colab)."""

import re
import sys
import types
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

import attention_viz as av
from attention_viz.figures.notebook import Session, plotly_loader
from attention_viz.figures.offline import script_json
from test_browser_hostile import CLEAN, HOSTILE, INJECTED

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "docs" / "notebook.ipynb"
PLOTLY_BANNER = "* plotly.js v"  # the first line of the bundled plotly.min.js
SHOW_CELLS = ("av.show(", "wide = av.run(", "pair = av.run(")


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    folder = tmp_path_factory.mktemp("notebook")
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(notebook, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(folder)}}).execute()
    return notebook, folder


def outputs(notebook, source_start: str) -> list[dict]:
    """The outputs of the one code cell whose source starts with ``source_start``."""
    cells = [c for c in notebook.cells if c.cell_type == "code" and c.source.startswith(source_start)]
    assert len(cells) == 1, source_start
    return cells[0].outputs


def text_of(cell_outputs: list[dict]) -> str:
    return "".join(o.get("text", "") or o.get("data", {}).get("text/plain", "") for o in cell_outputs)


def html_of(cell_outputs: list[dict]) -> str:
    """The one view a cell drew: av.show draws as it is called (display data), and the cell's value,
    the same view, is not drawn again."""
    (shown,) = [o for o in cell_outputs if "text/html" in o.get("data", {})]
    assert not [o for o in cell_outputs if o.output_type == "execute_result"], "drawn twice"
    return shown.data["text/html"]


def shown_outputs(notebook) -> list[str]:
    """Every av.show output's HTML, in the notebook's order."""
    return [html_of(c.outputs) for c in notebook.cells if c.cell_type == "code" and c.source.startswith(SHOW_CELLS)]


def test_the_notebook_runs_top_to_bottom_without_errors(executed):
    notebook, _ = executed
    code = [c for c in notebook.cells if c.cell_type == "code"]
    assert code and all(c.execution_count for c in code)
    assert not [o for c in code for o in c.outputs if o.output_type == "error"]


def test_its_outputs_are_what_it_says(executed):
    notebook, folder = executed
    labels = text_of(outputs(notebook, "import attention_viz as av"))
    assert "'[CLS]'" in labels and "'animal'" in labels and "'tired'" in labels
    shape = text_of(outputs(notebook, "stack = result.stack()"))
    assert re.match(r"\(\(6, 12, (\d+), \1\), np\.float32\(1\.0\), np\.float32\(1\.0\)\)", shape), shape
    shown = shown_outputs(notebook)
    assert len(shown) == 6 and not any("<iframe" in output for output in shown)
    assert [output.count(PLOTLY_BANNER) for output in shown] == [1, 0, 0, 0, 0, 0], "plotly.js with the first only"
    assert shown[0].index(PLOTLY_BANNER) < shown[0].index('class="attention-viz"'), "plotly.js ahead of the view"
    heads = html_of(outputs(notebook, 'av.show(result, view="heads")'))
    assert re.search(r'id="av-[0-9a-f]{12}-attention-data"', heads)
    translated = outputs(notebook, "pair = av.run(")
    assert text_of(translated).startswith("la zone économique européenne a été signée en août 1992 .")
    exported = text_of(outputs(notebook, "path = av.export("))
    assert exported.startswith("attention.html ") and (folder / "attention.html").stat().st_size > 4_000_000
    assert (folder / "attention.html").read_text(encoding="utf-8").count(PLOTLY_BANNER) == 1, "a file carries its own"


def test_the_saved_notebook_carries_plotly_js_once_and_stays_small(executed, tmp_path):
    notebook, _ = executed
    assert len(shown_outputs(notebook)) >= 5
    saved = tmp_path / "saved.ipynb"
    nbformat.write(notebook, saved)
    assert saved.read_text(encoding="utf-8").count(PLOTLY_BANNER) == 1
    assert saved.stat().st_size < 8e6, f"{saved.stat().st_size / 1e6:.1f} MB"


def test_every_output_has_ids_of_its_own_and_the_first_of_a_session_carries_plotly_js(monkeypatch):
    result = av.run("minilm", "The cat sat on the mat.")
    session = Session()
    monkeypatch.setattr("attention_viz.figures.notebook.SESSION", session)
    heads = av.show(result, "heads")
    first, again, head = heads._repr_html_(), heads._repr_html_(), av.show(result, "head")._repr_html_()
    assert first.startswith(plotly_loader()) and PLOTLY_BANNER not in again + head
    prefixes = [set(re.findall(r'id="(av-[0-9a-f]{12}-)', output)) for output in (first, again, head)]
    assert all(len(p) == 1 for p in prefixes) and len(set.union(*prefixes)) == 3, "one prefix per output"
    fragments = first[len(plotly_loader()):] + again + head
    assert not re.search(r'id="(?!av-[0-9a-f]{12}-)', fragments), "every id carries the output's prefix"

    pinned = Session()
    monkeypatch.setattr("attention_viz.figures.notebook.SESSION", pinned)
    assert av.init_notebook()._repr_html_() == plotly_loader()
    assert PLOTLY_BANNER not in av.show(result, "grid")._repr_html_()
    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))  # one page per output
    assert av.show(result, "grid")._repr_html_().count(PLOTLY_BANNER) == 1


# --- in a browser --------------------------------------------------------------------------------

DRAWN = """() => [...document.querySelectorAll('.attention-viz')].map(output =>
    output.querySelectorAll('.js-plotly-plot .main-svg').length > 0)"""
# what a notebook has on its page before the outputs: require.js (classic Jupyter) and a CommonJS module
MODULE_LOADERS = """<script>
window.defined = 0;
window.define = function () { window.defined += 1; throw new Error("anonymous define()"); };
window.define.amd = {};
window.module = {exports: {}};
</script>"""


# How JupyterLab renders an output after the page has loaded: its HTML set as innerHTML (where scripts
# never run), then each script replaced by a copy made with createElement, which runs as it is inserted.
INSERT_AS_JUPYTERLAB = """<script>
for (const html of JSON.parse(document.getElementById("outputs").textContent)) {
  const output = document.createElement("div");
  output.className = "output";
  output.innerHTML = html;
  document.body.appendChild(output);
  for (const script of output.querySelectorAll("script")) {
    const copy = document.createElement("script");
    for (const attribute of script.attributes) copy.setAttribute(attribute.name, attribute.value);
    copy.textContent = script.textContent;
    script.replaceWith(copy);
  }
}
</script>"""


def notebook_page(path: Path, outputs_html: list[str], before: str = "", inserted: bool = False) -> Path:
    """The outputs one under the other, each in its own element, as a notebook page holds them: in the
    page's HTML (a saved notebook converted to a page) or ``inserted`` by a script as JupyterLab does."""
    if inserted:
        data = f"<script type=\"application/json\" id=\"outputs\">{script_json(outputs_html)}</script>"
        cells = data + INSERT_AS_JUPYTERLAB
    else:
        cells = "\n".join(f"<div class=\"output\">{output}</div>" for output in outputs_html)
    path.write_text(f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"></head><body>{before}\n{cells}</body></html>",
                    encoding="utf-8")
    return path


def open_offline(page, listen, path: Path) -> dict[str, list[str]]:
    """``path`` opened with every non-file request aborted; what it asked for, threw and alerted."""
    seen = {"blocked": [], "errors": [], "dialogs": []}
    page.set_viewport_size({"width": 1200, "height": 1000})
    listen(page, "pageerror", lambda error: seen["errors"].append(str(error)))
    listen(page, "dialog", lambda dialog: (seen["dialogs"].append(dialog.message), dialog.dismiss()))
    page.route("**/*", lambda route: route.continue_() if route.request.url.startswith(("file:", "about:"))
               else (seen["blocked"].append(route.request.url), route.abort()))
    page.goto(path.as_uri())
    return seen


def wait_all_drawn(page, n: int) -> None:
    page.wait_for_function(f"() => {{ const d = ({DRAWN})(); return d.length === {n} && d.every(Boolean); }}",
                           timeout=120_000, polling=200)


@pytest.mark.slow
def test_the_saved_outputs_draw_in_order_offline(executed, disk_page, listen, tmp_path):
    notebook, _ = executed
    shown = shown_outputs(notebook)
    seen = open_offline(disk_page, listen, notebook_page(tmp_path / "in-order.html", shown))
    wait_all_drawn(disk_page, len(shown))
    heads = disk_page.locator(".attention-viz[data-drawn]")
    assert heads.count() == 2 and heads.nth(1).get_attribute("data-drawn") == "cross:2:mean"
    assert heads.nth(0).locator("h3").text_content() == "minilm"
    assert disk_page.evaluate("document.body.dataset.drawn") is None, "an output marks its own element only"
    heads.nth(0).locator("[id$='-readout']").click()  # focuses that output: the arrow keys are its own
    disk_page.keyboard.press("ArrowRight")
    disk_page.wait_for_function("() => document.querySelector('.attention-viz[data-drawn]').dataset.drawn === "
                                "'encoder:0:1'", timeout=30_000, polling=200)
    assert heads.nth(1).get_attribute("data-drawn") == "cross:2:mean", "the other heads view stays"
    assert seen == {"blocked": [], "errors": [], "dialogs": []}


@pytest.mark.slow
def test_an_output_above_the_one_with_plotly_js_draws_once_it_arrives(executed, disk_page, listen, tmp_path):
    """The translation's heads view and the focus view (figures) moved above the output that carries
    plotly.js, on a page that has require.js's define and a CommonJS module (classic Jupyter's page has
    the first)."""
    notebook, _ = executed
    shown = shown_outputs(notebook)
    moved = [shown[5], shown[2], shown[0], shown[1], shown[3], shown[4]]
    seen = open_offline(disk_page, listen, notebook_page(tmp_path / "moved.html", moved, MODULE_LOADERS))
    wait_all_drawn(disk_page, len(moved))
    assert disk_page.locator(".attention-viz[data-drawn]").first.get_attribute("data-drawn") == "cross:2:mean"
    assert disk_page.evaluate("[window.defined, Object.keys(window.module.exports).length]") == [0, 0]
    assert seen == {"blocked": [], "errors": [], "dialogs": []}


@pytest.mark.slow
def test_hostile_text_in_outputs_inserted_as_jupyterlab_does_stays_text(disk_page, listen, tmp_path, monkeypatch):
    monkeypatch.setattr("attention_viz.figures.notebook.SESSION", Session())
    result = av.run("minilm", HOSTILE)
    result.model = HOSTILE
    shown = [av.show(result, view)._repr_html_() for view in ("head", "heads", "focus", "heads")]
    seen = open_offline(disk_page, listen, notebook_page(tmp_path / "hostile.html", shown, inserted=True))
    wait_all_drawn(disk_page, len(shown))
    assert disk_page.evaluate(INJECTED) == CLEAN
    assert disk_page.locator(".attention-viz h3").all_text_contents() == [HOSTILE] * 4, "the model name, as text"
    assert disk_page.locator(".attention-viz[data-drawn]").count() == 2, "two heads views side by side"
    assert seen == {"blocked": [], "errors": [], "dialogs": []}


def test_the_readme_snippet_pasted_as_one_cell_shows_each_view(tmp_path):
    """The README's notebook code as one cell: both av.show views drawn (not only the cell's last value,
    the exported file's path), each once."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    snippet = re.search(r"## In a notebook\n\n```python\n(.*?)```", readme, re.S).group(1)
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(snippet)])
    NotebookClient(notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    cell_outputs = notebook.cells[0].outputs
    assert not [o for o in cell_outputs if o.output_type == "error"]
    views = [o for o in cell_outputs if 'class="attention-viz"' in o.get("data", {}).get("text/html", "")]
    assert len(views) == snippet.count("av.show(") == 2
    assert "attention.html" in text_of([o for o in cell_outputs if o.output_type == "execute_result"])
