"""docs/notebook.ipynb runs top to bottom in a fresh kernel (nbclient + ipykernel, headless, in a
temporary folder), its outputs are what it says, and an inline output draws in Chromium with the
network blocked, as a notebook front end would show it."""

import html
import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "docs" / "notebook.ipynb"


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    folder = tmp_path_factory.mktemp("notebook")
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(folder)}}).execute()
    return notebook, folder


def outputs(notebook, source_start: str) -> list[dict]:
    """The outputs of the one code cell whose source starts with ``source_start``."""
    cells = [c for c in notebook.cells if c.cell_type == "code" and c.source.startswith(source_start)]
    assert len(cells) == 1, source_start
    return cells[0].outputs


def text_of(cell_outputs: list[dict]) -> str:
    return "".join(o.get("text", "") or o.get("data", {}).get("text/plain", "") for o in cell_outputs)


def frame_of(cell_outputs: list[dict]) -> str:
    (shown,) = [o for o in cell_outputs if o.output_type == "execute_result"]
    return shown.data["text/html"]


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
    for start in ("av.show(", "wide = av.run(", "pair = av.run("):
        for cell in [c for c in notebook.cells if c.cell_type == "code" and c.source.startswith(start)]:
            frame = frame_of(cell.outputs)
            assert frame.startswith("<iframe srcdoc=") and frame.count("plotly.js v") == 1
    heads = html.unescape(frame_of(outputs(notebook, 'av.show(result, view="heads")')))
    assert 'id="attention-data"' in heads
    translated = outputs(notebook, "pair = av.run(")
    assert text_of(translated).startswith("la zone économique européenne a été signée en août 1992 .")
    exported = text_of(outputs(notebook, "path = av.export("))
    assert exported.startswith("attention.html ") and (folder / "attention.html").stat().st_size > 4_000_000


def test_an_inline_output_draws_offline_in_a_browser(executed, disk_page, listen, tmp_path):
    notebook, _ = executed
    page_file = tmp_path / "output.html"
    page_file.write_text(f"<!DOCTYPE html><html><body>{frame_of(outputs(notebook, 'pair = av.run('))}</body></html>",
                         encoding="utf-8")
    page = disk_page
    page.set_viewport_size({"width": 1200, "height": 1000})
    blocked, errors = [], []
    listen(page, "pageerror", lambda error: errors.append(str(error)))
    page.route("**/*", lambda route: route.continue_() if route.request.url.startswith(("file:", "about:"))
               else (blocked.append(route.request.url), route.abort()))
    page.goto(page_file.as_uri())
    frame = page.frames[1]
    frame.wait_for_selector("body[data-drawn='cross:2:mean']", timeout=60_000)
    frame.wait_for_selector("#chart .heatmaplayer image", timeout=60_000)
    assert frame.text_content("#heading") == "toy-translate"
    assert not blocked and not errors
