"""Never a traceback: every view of the app on every kind of model it offers — encoder (minilm, a
tiny hf: BERT), decoder (a tiny hf: GPT-2), encoder–decoder (toy-translate, a tiny hf: T5), RNN
(toy-translate-rnn). Each view either draws or says in a sentence what it needs; an unexpected error
in one view is caught at the page edge and the rest of the page keeps working.

One AppTest per model walks through every view (the model and its results stay cached between
views), which keeps this fast."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from streamlit.testing.v1 import AppTest

from apphelpers import APP, TIMEOUT, charts
from test_hf_backend import save_bert, save_gpt2, save_t5

VIEWS = ["head", "grid", "compare", "focus", "layers", "inside", "causal", "positional", "encdec", "basics"]
TOY_TEXT = "the law was signed ."
HF_TEXT = "the cat sat on the mat"
BUILDERS = {"bert": save_bert, "gpt2": save_gpt2, "t5": save_t5}


@pytest.fixture(scope="module")
def hf_models(tmp_path_factory) -> Iterator[dict[str, str]]:
    """Tiny random transformers models built offline from a config, saved to a temp folder that the
    operator's setting allows hf: to load from."""
    root = tmp_path_factory.mktemp("hf")
    folders = {}
    for name, save in BUILDERS.items():
        save(root / name)
        folders[name] = f"hf:{root / name}"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ATTENTION_VIZ_MODEL_ROOTS", str(root))
        yield folders


def walk(model: str, text: str) -> dict[str, AppTest]:
    """Open the app on ``model`` and ``text``, then every view in turn; problems per view."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update(model=model, text=text)
    at.run()
    problems = {}
    for view in VIEWS:
        at.sidebar.radio(key="view").set_value(view).run()
        shown = charts(at)
        said = [m.value for m in at.info]
        broken = [e.value for e in at.exception] + [e.value for e in at.error]
        if broken or not (shown or said):
            problems[view] = broken or ["neither a figure nor a message"]
    return problems


@pytest.mark.parametrize("model, text", [
    ("minilm", "The animal didn't cross the street because it was too tired."),
    ("toy-translate", TOY_TEXT),
    ("toy-translate-rnn", TOY_TEXT),
])
def test_every_view_on_the_shipped_models(model, text):
    assert walk(model, text) == {}


@pytest.mark.parametrize("kind", list(BUILDERS))
def test_every_view_on_tiny_hf_models(hf_models, kind):
    assert walk(hf_models[kind], HF_TEXT) == {}
