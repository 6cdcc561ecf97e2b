"""Every private touchpoint of another library, checked against the version it was written for.

When a pinned version changes the first test fails on purpose: check each shim of
attention_viz/ui/private_api.py (and the websocket protocol of benchmarks/session.py) against the new
version, then update CHECKED_AGAINST."""

from importlib.metadata import version
from pathlib import Path

import plotly.graph_objects as go
import streamlit

from attention_viz.ui import private_api
from attention_viz.ui.page_style import STYLE

ROOT = Path(__file__).resolve().parents[1]


def test_the_shims_were_checked_against_the_installed_and_pinned_versions():
    pins = dict(line.strip().split("==") for line in (ROOT / "constraints.txt").read_text().splitlines()
                if "==" in line and not line.startswith("#"))
    for package, checked in private_api.CHECKED_AGAINST.items():
        assert version(package) == checked, f"{package} is {version(package)}: check the shims, then CHECKED_AGAINST"
        assert pins[package] == checked, f"constraints.txt pins {package}=={pins[package]}: check the shims"


def test_a_figure_without_validation_is_the_validated_figure():
    built = go.Figure(go.Heatmap(z=[[0.1, 0.9], [0.5, 0.5]], colorscale="Blues"), layout={"height": 300})
    spec = built.to_dict()
    assert private_api.figure_without_validation(spec).to_dict() == spec


def test_streamlits_front_end_still_names_its_element_wrapper_so():
    bundles = (Path(streamlit.__file__).parent / "static" / "static" / "js").glob("*.js")
    assert any(private_api.STREAMLIT_ELEMENT_CLASS in path.read_text(errors="ignore") for path in bundles)
    assert f".{private_api.STREAMLIT_ELEMENT_CLASS}," in STYLE


def test_streamlits_front_end_still_marks_its_main_column_so():
    bundles = (Path(streamlit.__file__).parent / "static" / "static" / "js").glob("*.js")
    assert any(private_api.STREAMLIT_MAIN_TESTID in path.read_text(errors="ignore") for path in bundles)
    assert f"[data-testid='{private_api.STREAMLIT_MAIN_TESTID}']" in STYLE


def test_streamlits_front_end_still_marks_captions_so():
    bundles = (Path(streamlit.__file__).parent / "static" / "static" / "js").glob("*.js")
    assert any(f'`{private_api.STREAMLIT_CAPTION_TESTID}`' in path.read_text(errors="ignore") for path in bundles)
    assert f"[data-testid='{private_api.STREAMLIT_CAPTION_TESTID}']" in STYLE


def test_the_benchmarks_websocket_protocol_has_the_fields_it_reads():
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    assert {"script_finished", "delta", "new_session"} <= {f.name for f in ForwardMsg.DESCRIPTOR.fields}
    assert {"rerun_script"} <= {f.name for f in BackMsg.DESCRIPTOR.fields}
    assert ForwardMsg.FINISHED_SUCCESSFULLY != ForwardMsg.FINISHED_EARLY_FOR_RERUN


def test_streamlits_front_end_still_marks_the_instructions_and_the_sidebar_button_so():
    """The touch-screen rule hides the "Press Ctrl+Enter" line; the phone script clicks the collapse button."""
    from attention_viz.ui.page_scripts import SCRIPTS

    bundles = [p.read_text(errors="ignore") for p in (Path(streamlit.__file__).parent / "static" / "static" / "js").glob("*.js")]
    for testid in (private_api.STREAMLIT_INSTRUCTIONS_TESTID, private_api.STREAMLIT_SIDEBAR_COLLAPSE_TESTID):
        assert any(f"`{testid}`" in bundle for bundle in bundles), testid
    assert f"[data-testid='{private_api.STREAMLIT_INSTRUCTIONS_TESTID}']" in STYLE and "pointer: coarse" in STYLE
    assert f"[data-testid='{private_api.STREAMLIT_SIDEBAR_COLLAPSE_TESTID}'] button" in SCRIPTS


def test_no_page_script_holds_what_streamlits_sanitizer_drops_a_script_for():
    """st.html passes its HTML through DOMPurify, which drops a whole element without child elements whose
    text holds "<" before a letter or "/" (its rule ``/<[/\\w]/g``, in Streamlit's bundle): a script
    writing "<br>" in a string was dropped, and never ran."""
    import re

    from attention_viz.ui.page_scripts import SCRIPTS

    purify = (Path(streamlit.__file__).parent / "static" / "static" / "js").glob("purify*.js")
    assert any("/<[/\\w]/g" in p.read_text(errors="ignore") for p in purify)
    scripts = re.findall(r"<script>(.*?)</script>", SCRIPTS, re.S)
    assert len(scripts) == 3
    for script in scripts:
        assert not re.search(r"<[/\w]", script), re.search(r".{40}<[/\w].{20}", script)
