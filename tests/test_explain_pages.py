"""The explanation pages (inside one head, positional encoding, basics), run headless by AppTest on
the real default model: no exceptions, the expected charts, and widgets that never re-run the model."""

import pytest
from streamlit.testing.v1 import AppTest

from apphelpers import APP, app, charts

from attention_viz.backends.scratch import ScratchEncoderBackend

INSIDE_CHARTS = 17  # X, W_Q/W_K/W_V, Q/K/V, QKᵀ, ÷√d_k, softmax, context, concat, W_O, output, raw, real, raw X
POSITIONAL_CHARTS = 16  # PE, curves, PE·PEᵀ, shift, 4 alternatives, learned + cosine, 4 rotary, with/without
BASICS_CHARTS = 9  # seed softmax, variance, d_k bars, 2 + 2 scoring heatmaps, kernel weights, regression


def titles(at: AppTest) -> list[str]:
    return [spec["layout"].get("title", {}).get("text", "") for spec in charts(at)]


def ok(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


@pytest.fixture
def forwards(monkeypatch):
    """Counts real model forwards (cache misses) during a test."""
    calls = []
    original = ScratchEncoderBackend.run

    def counting(self, *args, **kwargs):
        calls.append((args, kwargs))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(ScratchEncoderBackend, "run", counting)
    return calls


@pytest.fixture
def hand_computations(monkeypatch):
    """Counts hand computations of a head (cache misses of the inside page)."""
    calls = []
    original = ScratchEncoderBackend.inside_head

    def counting(self, ids, layer, head, scale=True):
        calls.append((layer, head, scale))
        return original(self, ids, layer, head, scale)

    monkeypatch.setattr(ScratchEncoderBackend, "inside_head", counting)
    return calls


# ---------------------------------------------------------------- inside one head


def test_inside_shows_every_step_with_shapes_and_tokens():
    at = app(view="inside")
    ok(at)
    specs = charts(at)
    assert len(specs) == INSIDE_CHARTS
    names = titles(at)
    assert names[0] == "X (16×384), input of layer 0"
    assert names[1:4] == ["W_Q of head 0 (384×32)", "W_K of head 0 (384×32)", "W_V of head 0 (384×32)"]
    assert "QKᵀ ÷ √32" in names and "softmax: layer 0, head 0" in names
    assert specs[0]["layout"]["yaxis"]["ticktext"][:3] == ["[CLS]", "The", "animal"]  # tokens on the token axis
    captions = " ".join(c.value for c in at.caption)
    assert "X (16×384) · W_Q (384×32) + b_Q = Q (16×32)" in captions
    assert "Concat (16×384) · W_O (384×384) + b_O = output (16×384)" in captions
    assert any("Mask: none" in i.value for i in at.info)
    assert at.query_params["view"] in (["inside"], "inside")


def test_inside_scaling_switch_shows_the_saturation(hand_computations, forwards):
    at = app(view="inside", text="Scaling switch sentence for the inside page.", layer="2", head="5")
    ok(at)
    assert at.slider(key="inside_layer").value == 2 and at.select_slider(key="inside_head").value == 5
    assert hand_computations == [(2, 5, True)]
    at.toggle(key="inside_scale").set_value(False).run()
    ok(at)
    names = titles(at)
    assert len(names) == INSIDE_CHARTS + 2  # both patterns, and the row max / entropy chart
    assert "QKᵀ, not scaled (the switch is off)" in names and "softmax(QKᵀ): not scaled" in names
    saturation = next(s for s in charts(at)
                      if s["layout"].get("annotations", [{}])[0].get("text") == "largest weight in the row")
    by_name = {t["name"]: t for t in saturation["data"] if t["xaxis"] == "x"}
    assert set(by_name) == {"÷√32 (the model)", "not scaled"}
    at.toggle(key="inside_scale").set_value(True).run()  # back: served from the cache
    at.slider(key="inside_layer").set_value(4).run()
    at.select_slider(key="inside_head").set_value(1).run()
    at.slider(key="inside_layer").set_value(2).run()
    at.select_slider(key="inside_head").set_value(5).run()
    ok(at)
    assert hand_computations == [(2, 5, True), (2, 5, False), (4, 5, True), (4, 1, True), (2, 1, True)]
    assert len(forwards) <= 1  # the model run itself is never repeated


def test_inside_whole_w_o_on_demand():
    at = app(view="inside")
    assert titles(at)[12] == "the 32 rows of W_O that head 0 feeds (32×384)"
    at.toggle(key="inside_full_w_o").set_value(True).run()
    ok(at)
    spec = charts(at)[12]
    assert spec["layout"]["title"]["text"].startswith("W_O (384×384)")
    assert spec["data"][0]["z"]["shape"] in ("384, 384", [384, 384])


def test_inside_on_a_long_input_draws_a_window_of_tokens():
    at = app(view="inside", text=" ".join(f"w{i}" for i in range(150)))
    ok(at)
    spec = charts(at)[0]
    assert spec["data"][0]["z"]["shape"] in ("96, 384", [96, 384])  # 96 of the tokens, all 384 dimensions
    at.slider(key="inside_window").set_value(40).run()
    ok(at)
    assert charts(at)[0]["layout"]["yaxis"]["ticktext"][0] != spec["layout"]["yaxis"]["ticktext"][0]
    assert any("Long input" in c.value for c in at.caption)
    at.slider(key="inside_window").set_value(54).run()
    at.sidebar.text_area(key="text").set_value(" ".join(["word"] * 100)).run()  # 102 tokens
    ok(at)
    assert at.slider(key="inside_window").value == 102 - 96


# ---------------------------------------------------------------- positional encoding


def test_positional_page_and_its_controls(forwards):
    at = app(view="positional", text="Positions matter: dog bites man, man bites dog.")
    ok(at)
    assert len(at.get("plotly_chart")) == POSITIONAL_CHARTS
    assert len(forwards) == 2  # the sentence, and once more with positions switched off
    assert [kw.get("use_positions") for _, kw in forwards] == [None, False]
    names = titles(at)
    assert names[0] == "sinusoidal code: 128 positions × 128 dimensions"
    assert "with positions: layer 0, head 0" in names and "positions switched off: layer 0, head 0" in names
    # "dog", "bites" and "man" repeat: without positions the twins' rows are identical
    assert any("Without positions their rows are identical (largest difference 0.0e+00)" in c.value for c in at.caption)

    at.slider(key="positional_n").set_value(64).run()
    at.select_slider(key="positional_d").set_value(32).run()
    ok(at)
    assert charts(at)[0]["data"][0]["z"]["shape"] in ("64, 32", [64, 32])
    assert at.multiselect(key="positional_dims").value == [0, 1, 10, 11]  # 40, 41 dropped at d = 32
    at.multiselect(key="positional_dims").set_value([2, 3, 30]).run()
    at.slider(key="positional_pair").set_value(15).run()
    at.slider(key="positional_shift").set_value(7).run()
    at.select_slider(key="positional_d").set_value(16).run()  # pair 15 no longer exists: clamped
    ok(at)
    assert at.slider(key="positional_pair").value == 7
    at.slider(key="positional_learned_n").set_value(64).run()
    at.slider(key="positional_layer").set_value(3).run()
    at.select_slider(key="positional_head").set_value(4).run()
    ok(at)
    assert "positions switched off: layer 3, head 4" in titles(at)
    assert len(forwards) == 2  # no widget re-ran the model


# ---------------------------------------------------------------- basics


def test_basics_page_and_its_sliders(forwards):
    at = app(view="basics")
    ok(at)
    assert len(at.get("plotly_chart")) == BASICS_CHARTS
    assert "query waist 57 cm → predicted 45.50 kg" in titles(at)
    assert any("random and fixed, not trained" in c.value for c in at.caption)
    runs = len(forwards)
    at.slider(key="basics_waist").set_value(66.0).run()
    at.slider(key="basics_sigma").set_value(4.0).run()
    at.select_slider(key="basics_dk").set_value(1024).run()
    at.slider(key="basics_draw").set_value(3).run()
    ok(at)
    assert any(t.startswith("query waist 66 cm") for t in titles(at))
    assert "one query, 8 random keys, d_k = 1024" in titles(at)
    at.slider(key="basics_k_size").set_value(7).run()  # keys of another size: additive only
    ok(at)
    assert len(at.get("plotly_chart")) == BASICS_CHARTS - 2
    assert any("a dot product needs equal sizes" in i.value for i in at.info)
    assert len(forwards) == runs  # synthetic data only


# ---------------------------------------------------------------- other backends


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    from test_hf_backend import save_bert

    folder = tmp_path_factory.mktemp("tiny-bert")
    save_bert(folder)
    with pytest.MonkeyPatch.context() as patch:  # the operator allows hf: to load from there
        patch.setenv("ATTENTION_VIZ_MODEL_ROOTS", str(folder))
        yield folder


@pytest.mark.parametrize("view", ["inside", "positional"])
def test_other_backends_get_an_explanation_not_an_error(tiny_bert, view):
    at = app(view=view, model=f"hf:{tiny_bert}", text="the cat sat on the mat")
    ok(at)
    infos = " ".join(i.value for i in at.info)
    if view == "inside":  # minilm on the same sentence, said so; its figures name minilm
        assert "This view runs minilm" in infos and "recomputes a head by hand" in infos
        assert at.get("plotly_chart") and all("minilm" in chart.proto.spec for chart in at.get("plotly_chart"))
    else:  # the sinusoid sections still work; the model-specific ones explain themselves
        assert "needs our own encoder" in infos and len(at.get("plotly_chart")) == 12  # sinusoids, rotary


def test_basics_needs_no_sentence():
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["view"] = "basics"
    at.query_params["text"] = ""
    at.run()
    assert not at.exception and not at.error
    assert len(at.get("plotly_chart")) >= 7
