"""The Streamlit app, run headless by AppTest on the real default model."""

import pytest
from apphelpers import app, charts, messages

from attention_viz.backends.scratch import ScratchEncoderBackend


def axis_labels(spec: dict, axis: str = "xaxis") -> list[str]:
    return spec["layout"][axis]["ticktext"]


@pytest.fixture
def forwards(monkeypatch):
    """Counts real model forwards (cache misses) during a test."""
    calls = []
    original = ScratchEncoderBackend.run

    def counting(self, *args, **kwargs):
        calls.append(args)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(ScratchEncoderBackend, "run", counting)
    return calls


def test_default_page_shows_the_head_heatmap_of_the_example():
    at = app()
    assert not at.exception and not at.error
    spec = charts(at)[0]
    labels = axis_labels(spec)
    assert labels[:3] == ["[CLS]", "The", "animal"] and labels[-1] == "[SEP]"
    assert labels.count("the") == 1 and "street" in labels  # "The" keeps its case; "the" once


def test_shared_url_opens_that_exact_view():
    at = app(model="minilm", text="The cat sat on the mat.", view="head", layer="3", head="1")
    assert not at.exception
    assert at.slider(key="head_layer").value == 3 and at.select_slider(key="head_head").value == 1
    assert "layer 3, head 1" in charts(at)[0]["layout"]["title"]["text"]
    assert axis_labels(charts(at)[0])[1:4] == ["The", "cat", "sat"]
    assert at.query_params["layer"] == ["3"] or at.query_params["layer"] == "3"


def test_bad_url_values_fall_back_instead_of_failing():
    at = app(view="nonsense", layer="99", head="x")
    assert not at.exception and not at.error
    assert at.slider(key="head_layer").value == 5  # clamped to the last layer


def test_moving_sliders_and_switching_views_never_reruns_the_model(forwards):
    at = app(text="A sentence nobody else in the test suite uses, about moving sliders.")
    first = len(forwards)
    assert first <= 1
    at.slider(key="head_layer").set_value(4).run()
    at.select_slider(key="head_head").set_value("mean").run()
    at.checkbox(key="head_hide_special").check().run()
    at.checkbox(key="head_words").check().run()
    at.sidebar.radio(key="view").set_value("grid").run()
    at.sidebar.radio(key="view").set_value("head").run()
    assert not at.exception
    assert len(forwards) == first


def test_hide_special_tokens_renormalizes_and_says_so():
    at = app(text="Hello world")
    at.checkbox(key="head_hide_special").check().run()
    spec = charts(at)[0]
    assert "[CLS]" not in axis_labels(spec)
    assert any("renormalized" in c.value for c in at.caption)


def test_word_level_groups_pieces():
    at = app(text="Tokenization is unbelievably subtle.")
    at.checkbox(key="head_words").check().run()
    labels = axis_labels(charts(at)[0])
    assert "unbelievably" in labels and "Tokenization" in labels


def test_all_heads_grid_and_statistics():
    at = app(view="grid")
    assert not at.exception
    grid, enlarged = charts(at)[:2]
    assert [t for t in grid["layout"]["xaxis"]["ticktext"]][:2] == ["head 0", "head 1"]
    assert len(grid["layout"]["yaxis"]["ticktext"]) == 6
    table = at.dataframe[0].value
    assert len(table) == 6 * 12 and {"entropy", "role"} <= set(table.columns)


def test_empty_text_gets_a_message_not_an_error():
    at = app(text="   ")
    assert not at.exception and not at.error
    assert "Type a sentence" in at.info[0].value


def test_unknown_model_in_the_url_gets_a_clear_message():
    at = app(model="hf:/no/such/folder")
    assert not at.exception
    assert at.error and "does not exist" in at.error[0].value


def test_compare_two_heads_side_by_side():
    at = app(view="compare")
    assert not at.exception
    titles = [c["layout"]["title"]["text"] for c in charts(at)]
    assert len(titles) == 2 and titles[0].startswith("layer 0") and titles[1].startswith("layer 5")
    at.slider(key="compare_b_layer").set_value(2).run()
    assert charts(at)[1]["layout"]["title"]["text"].startswith("layer 2")


def test_compare_two_sentences_shows_their_difference():
    at = app(view="compare")
    at.radio(key="compare_mode").set_value("sentences").run()
    assert not at.exception
    specs = charts(at)
    assert len(specs) == 3 and specs[2]["data"][0]["colorscale"][0][1] != specs[0]["data"][0]["colorscale"][0][1]
    assert "tired/wide" in axis_labels(specs[2])


def test_coreference_preset_finds_it_to_animal_heads():
    at = app(view="compare")
    at.radio(key="compare_mode").set_value("coreference").run()
    assert not at.exception
    table = at.dataframe[0].value
    assert list(table["tired: it→animal"]) == sorted(table["tired: it→animal"], reverse=True)
    assert table["tired: it→animal"].iloc[0] > 0.2  # a real head links "it" to "animal"


def test_token_focus_defaults_to_it_and_animal():
    at = app(view="focus")
    assert not at.exception
    assert "attention from it to animal" in charts(at)[0]["layout"]["title"]["text"]
    html_blocks = [el for el in at.main if type(el).__name__ == "Html"]
    assert html_blocks and ">animal</span>" in html_blocks[0].proto.body


def test_across_layers_shows_rollout_and_flow():
    at = app(view="layers")
    assert not at.exception and not at.error
    titles = [c["layout"]["title"]["text"] for c in charts(at)]
    assert any("rollout" in t for t in titles) and "attention flow" in titles


def test_flow_on_a_long_input_explains_instead_of_hanging():
    at = app(view="layers", text=" ".join(["word"] * 120))
    assert not at.exception
    assert any("attention flow solves one max-flow" in m for m in messages(at))
