"""`make run` and the container start the server through attention_viz/ui/serve.py: the default model is
loaded and run before Streamlit starts, in the process that serves, so a fresh server's first visitor
does not wait for torch, the page's libraries and the model."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from attention_viz.backends import registry
from attention_viz.ui import serve

ROOT = Path(__file__).resolve().parents[1]


def test_the_warm_up_leaves_the_default_model_loaded_and_the_page_libraries_imported(monkeypatch):
    monkeypatch.setattr(registry, "_loaded", type(registry._loaded)())  # an empty cache of this test's own
    serve.warm_up()
    assert any(key.startswith(f"{registry.DEFAULT_MODEL} on ") for key in registry._loaded.keys())
    assert {"torch", "plotly.graph_objects", "pandas", "pyarrow", "attention_viz.ui.views.head"} <= set(sys.modules)


def test_a_failing_warm_up_is_logged_and_the_server_still_starts(monkeypatch, caplog):
    def broken(*args, **kwargs):
        raise OSError("disk gone")
    monkeypatch.setattr(registry, "load_backend", broken)
    serve.warm_up()  # no exception
    assert "warming the default model up failed" in caplog.text


def test_it_serves_app_py_with_the_flags_it_was_given(monkeypatch):
    calls = []
    monkeypatch.setattr(serve, "warm_up", lambda: calls.append("warm_up"))
    from streamlit.web import cli
    monkeypatch.setattr(cli, "main", lambda args, prog_name: calls.append((args, prog_name)))
    serve.main(["--server.port", "8599"])
    assert calls == ["warm_up", (["run", str(ROOT / "app.py"), "--server.port", "8599"], "streamlit")]


def test_make_run_starts_it():
    recipe = re.search(r"^run:.*\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(), re.M).group(1)
    assert "-m attention_viz.ui.serve --server.port $(PORT) --server.address $(ADDRESS)" in recipe
