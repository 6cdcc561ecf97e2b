"""The page's first script loads Streamlit's chart chunk from the very address the front end imports
it from (one module, fetched and run once), and holds nothing Streamlit's sanitizer drops it for."""

import re
from pathlib import Path

import streamlit

from attention_viz.ui.page_scripts import CHARTS_EARLY, chart_chunk_script
from attention_viz.ui.private_api import streamlit_chunk

BUNDLES = Path(streamlit.__file__).parent / "static" / "static" / "js"


def test_the_chart_chunk_is_the_one_the_front_end_imports_for_plotly_charts():
    chunk = streamlit_chunk("PlotlyChart")
    assert chunk is not None and chunk.startswith("static/js/PlotlyChart.")
    name = chunk.rsplit("/", 1)[1]
    # Streamlit's index bundle imports it lazily, relative to itself (static/js/), by this exact name
    index = [p.read_text(errors="ignore") for p in BUNDLES.glob("index.*.js")]
    assert any(f"import(`./{name}`)" in text for text in index)
    # and the chunk is Plotly: the page's charts are drawn by what it sets up
    assert "plotly" in (BUNDLES / name).read_text(errors="ignore")[:2_000_000].lower()
    assert f'"{chunk}"' in CHARTS_EARLY


def test_the_chart_script_is_kept_by_the_sanitizer_and_absent_without_a_chunk():
    script, = re.findall(r"<script>(.*?)</script>", CHARTS_EARLY, re.S)
    assert not re.search(r"<[/\w]", script)
    assert "import(" in script
    assert chart_chunk_script(None) == ""
    assert streamlit_chunk("NoSuchElement") is None
