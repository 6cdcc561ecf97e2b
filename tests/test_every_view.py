"""Never a traceback: every view of the app on every kind of model it offers — encoder (minilm, a
tiny hf: BERT), decoder (a tiny hf: GPT-2), encoder–decoder (toy-translate, a tiny hf: T5), RNN
(toy-translate-rnn). Each view either draws or says in a sentence what it needs; an unexpected error
in one view is caught at the page edge and the rest of the page keeps working.

One AppTest per model walks through every view (the model and its results stay cached between
views), which keeps this fast."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from apphelpers import APP, TIMEOUT, charts, switch_view
from benchmarks.families import save_family
from test_hf_backend import save_bert, save_gpt2, save_t5

from attention_viz.analysis.weighting import WEIGHTINGS
from attention_viz.backends.induction import INDUCTION_EXAMPLES
from attention_viz.inputs.examples import TIRED
from attention_viz.core.names import GROUPS
from attention_viz.ui.views.compare import MODES

VIEWS = [
    "head", "grid", "compare", "focus", "layers", "inside", "causal", "positional", "encdec", "ablation", "detector",
    "atlas", "image", "basics",
]
TOY_TEXT = "the law was signed ."
HF_TEXT = "the cat sat on the mat"
BUILDERS = {"bert": save_bert, "gpt2": save_gpt2, "t5": save_t5,
            # transformers' modules with our attention function (soft-capping and windows; sinks and experts)
            "gemma2": lambda folder: save_family(folder, "gemma2"),
            "gpt-oss": lambda folder: save_family(folder, "gpt-oss")}


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
        switch_view(at, view)
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


def test_a_model_that_cannot_read_the_sentence_shows_its_example_on_every_view():
    """The induction model reads single symbols: opened with an English sentence (a model switch, or a
    link), the page puts the model's first example in the sentence box, says why, and every view draws
    (the atlas, with none built, offers to build one; Inside one head, which recomputes an encoder of
    ours, shows minilm on the same sentence and says so)."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update(model="induction", text=TIRED)
    at.run()
    assert at.session_state["text"] == next(iter(INDUCTION_EXAMPLES.values()))
    assert any("reads single lowercase letters" in m.value for m in at.info)
    assert [o for o in at.selectbox if o.key == "example"][0].options[1:] == list(INDUCTION_EXAMPLES)
    problems = {}
    for view in VIEWS:
        switch_view(at, view)
        broken = [e.value for e in at.exception] + [e.value for e in at.error]
        if broken or not (charts(at) or (view == "atlas" and at.button)):
            problems[view] = broken or ["no figure"]
    assert problems == {}
    assert at.query_params["text"] == next(iter(INDUCTION_EXAMPLES.values()))  # the link holds what is shown


@pytest.mark.parametrize("kind", list(BUILDERS))
def test_every_view_on_tiny_hf_models(hf_models, kind):
    assert walk(hf_models[kind], HF_TEXT) == {}


@pytest.mark.parametrize("kind", ["gemma2", "gpt-oss"])
def test_the_research_views_draw_on_families_that_run_in_transformers(hf_models, kind):
    """Patching, the logit lens and head ablation on a family that runs in transformers' own modules
    (our attention function in its registry): each draws or says in a sentence what it needs."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update(model=hf_models[kind], text=HF_TEXT)
    at.run()
    problems = {}
    for view in ("ablation", "patching", "logit_lens"):
        switch_view(at, view)
        broken = [e.value for e in at.exception] + [e.value for e in at.error]
        if broken or not (charts(at) or at.info):
            problems[view] = broken or ["neither a figure nor a message"]
    assert problems == {}


# ---------------------------------------------------------------- links round-trip every choice

WIDGETS = ("slider", "select_slider", "selectbox", "radio", "checkbox", "toggle", "text_input", "text_area", "multiselect")
NOT_IN_LINKS = {"example", "model_choice", "hf_spec"}  # the example picker fills the text; the model is `model=`
KEEP = {"text", "target", "nav_learn", "nav_explore", "compare_mode"}  # changed elsewhere (or by the case); here they must survive
LINK_CASES = [  # every view once, on a model where its choices exist (toy-translate: three attentions)
    ("minilm", "head", {}), ("toy-translate", "head", {}), ("minilm", "grid", {}), ("toy-translate", "focus", {}),
    ("minilm", "layers", {}), ("minilm", "inside", {}), ("toy-translate", "causal", {}),
    ("minilm", "positional", {}), ("toy-translate", "encdec", {}), ("minilm", "basics", {}),
    ("minilm", "compare", {"mode": "heads"}), ("toy-translate", "compare", {"mode": "sentences"}),
]


def choices(at: AppTest) -> dict[str, object]:
    """Every keyed widget on the page and its value."""
    found = {}
    for kind in WIDGETS:
        for widget in getattr(at, kind):
            if widget.key and widget.key not in NOT_IN_LINKS and not widget.key.startswith("$$"):
                found[widget.key] = widget.value
    return found


# What the app's choice widgets offer: integers (layers, heads, tokens, sizes), reductions, attentions, modes,
# weightings.
CANDIDATES = [*range(1100), "mean", "max", *GROUPS, *MODES, *WEIGHTINGS]


def set_other(widget) -> bool:
    """Give ``widget`` a value it offers other than its current one; False when it has none."""
    kind = type(widget).__name__
    if kind in ("Checkbox", "Toggle"):
        widget.set_value(not widget.value)
        return True
    if kind == "Slider":
        low, high = widget.proto.min, widget.proto.max
        widget.set_value(type(widget.value)(high if widget.value != high else low))
        return True
    if kind == "Multiselect" and widget.value:
        widget.set_value(widget.value[1:])
        return True
    if kind in ("SelectSlider", "Selectbox", "Radio"):
        shown = widget.format_func(widget.value)
        others = [c for c in CANDIDATES if _formats(widget, c) in widget.options and _formats(widget, c) != shown]
        if others:
            widget.set_value(others[-1])
            return True
    return False


def _formats(widget, candidate) -> str | None:
    try:
        return widget.format_func(candidate)
    except Exception:  # noqa: BLE001 - a candidate of another type than the widget's options
        return None


def link_params(at: AppTest) -> dict[str, str]:
    return {k: (v[0] if isinstance(v, list) else v) for k, v in at.query_params.items()}


@pytest.mark.parametrize("model, view, extra", LINK_CASES)
def test_a_link_reopens_every_choice_of_every_view(model, view, extra):
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update(model=model, text=TOY_TEXT, view=view, **extra)
    at.run()
    assert {k: choices(at)[f"{view}_{k}"] for k in extra} == extra  # the case's own choice came from the link
    for key in list(choices(at)):
        if key in KEEP:
            continue
        widget = next((w for kind in WIDGETS for w in getattr(at, kind) if w.key == key), None)
        if widget is None:  # gone after an earlier change (e.g. another compare mode)
            continue
        if set_other(widget):
            at.run()
    assert not at.exception and not at.error
    before = choices(at)
    reopened = AppTest.from_file(APP, default_timeout=TIMEOUT)
    reopened.query_params.update(link_params(at))
    reopened.run()
    assert choices(reopened) == before


# ---------------------------------------------------------------- the page edge


def test_an_unexpected_error_in_a_view_is_one_message_and_the_page_still_works(monkeypatch):
    from attention_viz.ui.views import grid

    def broken(result):
        raise RuntimeError("an internal detail")

    monkeypatch.setattr(grid, "render", broken)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update(view="grid")
    at.run()
    assert len(at.error) == 1 and "could not be drawn" in at.error[0].value
    assert "an internal detail" not in at.error[0].value  # the details are folded away ...
    assert at.expander and "an internal detail" in at.exception[0].value  # ... in an expander
    assert at.get("download_button")  # the rest of the page is there
    switch_view(at, "head")  # and another view works
    assert not at.exception and not at.error and charts(at)


def test_an_hf_encoder_decoder_model_gets_a_target_box_and_is_teacher_forced_on_it(hf_models):
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update(model=hf_models["t5"], text=HF_TEXT, view="head", group="decoder")
    at.run()
    at.sidebar.text_input(key="target").set_value("a dog is in the house").run()
    assert not at.exception and not at.error
    labels = charts(at)[0]["layout"]["yaxis"]["ticktext"]  # the decoder reads the start token + the target
    assert ["a", "dog", "is", "in", "the", "house"] == [t for t in labels if t.isalpha()]
    assert at.query_params["target"] in ("a dog is in the house", ["a dog is in the house"])
    encoder_only = AppTest.from_file(APP, default_timeout=TIMEOUT)
    encoder_only.query_params.update(model=hf_models["bert"], text=HF_TEXT)
    encoder_only.run()
    assert not [box for box in encoder_only.sidebar.text_input if box.key == "target"]


# ---------------------------------------------------------------- pages only lay out

BEHIND_THE_INTERFACE = {"backends.scratch", "backends.hf", "backends.translation", "backends.ours", "model", "hooks"}
UI = sorted((Path(APP).parent / "attention_viz" / "ui").rglob("*.py")) + [Path(APP)]


@pytest.mark.parametrize("path", UI, ids=lambda p: p.name)
def test_pages_import_no_torch_reach_into_no_backend_and_type_no_hook_name(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            assert not any(a.name.split(".")[0] == "torch" for a in node.names), path
        if isinstance(node, ast.ImportFrom):
            assert (node.module or "").split(".")[0] != "torch", path
            assert (node.module or "") not in BEHIND_THE_INTERFACE, (path, node.module)
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            assert isinstance(node.value, ast.Name) and node.value.id in ("st", "self"), (path, node.attr)
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance":
            assert "Backend" not in ast.unparse(node.args[1]) and "Transformer" not in ast.unparse(node.args[1])
        if isinstance(node, ast.JoinedStr):
            assert ".layers." not in ast.unparse(node), (path, ast.unparse(node))
