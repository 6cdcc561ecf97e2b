"""The Streamlit app, run headless by AppTest on the real default model."""

import subprocess
import sys
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest
from apphelpers import app, charts, messages, switch_view

from attention_viz.backends.scratch import ScratchEncoderBackend
from attention_viz.backends.registry import load_backend
from attention_viz.ui.state import DEFAULT_TEXT

ROOT = Path(__file__).resolve().parents[1]


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
    switch_view(at, "grid")
    switch_view(at, "head")
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


def test_compare_two_heads_one_above_the_other():
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
    specs = charts(at)  # "it"'s row in A and B, the two patterns, their difference
    assert len(specs) == 5 and specs[4]["data"][0]["colorscale"][0][1] != specs[2]["data"][0]["colorscale"][0][1]
    assert "tired/wide" in axis_labels(specs[4])


def test_coreference_preset_finds_the_heads_where_it_moved():
    at = app(view="compare")
    at.radio(key="compare_mode").set_value("coreference").run()
    assert not at.exception
    table = at.dataframe[0].value
    assert list(table["move"]) == sorted(table["move"], reverse=True)
    assert table["move"].iloc[0] > 0.2  # a real head moves "it" between the two sentences


def test_token_focus_defaults_to_it_and_animal():
    at = app(view="focus")
    assert not at.exception
    assert "attention from it to animal" in charts(at)[0]["layout"]["title"]["text"]
    html_blocks = [el for el in at.main if type(el).__name__ == "Html"]
    assert any(">animal</span>" in block.proto.body for block in html_blocks)  # among the page's other HTML


def test_across_layers_shows_rollout_and_flow():
    at = app(view="layers")
    assert not at.exception and not at.error
    titles = [c["layout"]["title"]["text"] for c in charts(at)]
    assert any("rollout" in t for t in titles) and "attention flow" in titles


def test_flow_on_a_long_input_explains_instead_of_hanging():
    at = app(view="layers", text=" ".join(["word"] * 120))
    assert not at.exception
    assert any("attention flow solves one max-flow" in m for m in messages(at))


# ---------------------------------------------------------------- links


def test_head_mean_or_max_and_the_attention_choice_round_trip_in_a_link():
    at = app(model="toy-translate", text="the law was signed .", view="head", group="cross", layer="1", head="max")
    assert not at.exception and not at.error
    assert at.radio(key="head_group").value == ("decoder", "cross_attn")
    assert at.select_slider(key="head_head").value == "max" and at.slider(key="head_layer").value == 1
    assert charts(at)[0]["layout"]["title"]["text"] == "layer 1, max of heads"
    link = {k: (v[0] if isinstance(v, list) else v) for k, v in at.query_params.items()}
    assert {"group": "cross", "head": "max", "layer": "1", "view": "head"}.items() <= link.items()
    at.select_slider(key="head_head").set_value("mean").run()
    assert at.query_params["head"] in ("mean", ["mean"])


def test_link_values_a_view_does_not_offer_fall_back_or_are_clamped():
    at = app(view="grid", head="mean", group="nonsense", layer="-4")
    assert not at.exception and not at.error
    assert at.select_slider(key="grid_head").value == 0  # the grid's enlarged head has no mean
    assert at.slider(key="grid_layer").value == 0
    at = app(view="head", threshold="9", hide_special="maybe", head="99")
    assert at.slider(key="head_threshold").value == 0.5 and at.checkbox(key="head_hide_special").value is False
    assert at.select_slider(key="head_head").value == 11  # the last head


# ---------------------------------------------------------------- token focus


def test_token_focus_survives_a_choice_made_on_another_sentence():
    at = app(view="focus", text="One sentence about a cat.")
    at.selectbox(key="focus_query").set_value(3).run()
    at.sidebar.text_area(key="text").set_value("Another sentence, rather longer, about the animal.").run()
    at.sidebar.text_area(key="text").set_value("Short.").run()
    assert not at.exception and not at.error
    assert at.selectbox(key="focus_query").value < 4  # "Short." has [CLS] Short . [SEP]


def _stale_token_choice() -> None:
    import streamlit as st

    from attention_viz.ui.controls import token_picker

    st.session_state.setdefault("_url_shown", {})
    if "stale" not in st.session_state:
        # What Streamlit hands back when the browser's label ("3: cat", from the previous sentence)
        # is not among the new options: the raw string (the page used to compare it with an int).
        st.session_state["focus_query"] = st.session_state["stale"] = "3: cat"
    st.write(token_picker("Query", ["[CLS]", "a", "dog", "[SEP]"], "focus_query", default=1))


def test_a_token_choice_the_browser_left_as_a_label_falls_back_to_the_default():
    at = AppTest.from_function(_stale_token_choice, default_timeout=30).run()
    assert not at.exception
    assert at.selectbox(key="focus_query").value == 1


def test_token_focus_on_a_translation_model_through_every_attention_choice():
    at = app(view="focus", model="toy-translate", text="the law was signed .")
    for group in [("decoder", "self_attn"), ("decoder", "cross_attn"), ("encoder", "self_attn"),
                  ("decoder", "cross_attn")]:
        at.radio(key="focus_group").set_value(group).run()
        assert not at.exception and not at.error


# ---------------------------------------------------------------- all heads


def test_all_heads_of_a_cross_attention_leave_out_the_square_only_statistics():
    at = app(view="grid", model="toy-translate", text="the law was signed .", group="cross")
    assert not at.exception and not at.error
    table = at.dataframe[0].value
    assert {"entropy", "top_weight", "role"} <= set(table.columns)
    assert not {"previous", "self", "next", "offset"} & set(table.columns)
    assert len(table) == 3 * 4


def test_the_rnn_all_heads_view_opens_on_its_only_attention():
    at = app(view="grid", model="toy-translate-rnn", text="the law was signed .")
    assert not at.exception and not at.error
    assert len(at.dataframe[0].value) == 1  # one layer, one head of additive attention


# ---------------------------------------------------------------- server settings

SETTINGS = ("server.headless", "server.fileWatcherType", "browser.gatherUsageStats", "client.toolbarMode")


def test_plain_streamlit_run_gets_the_settings_make_run_uses():
    """`streamlit run app.py` without flags, from the project folder: no file watcher (it would watch
    the virtual environment too, overflow inotify and re-run pages on its own), no usage statistics."""
    read = ("from streamlit import config; config.get_config_options(force_reparse=True); "
            f"print([config.get_option(k) for k in {SETTINGS!r}])")
    out = subprocess.run([sys.executable, "-c", read], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == str([True, "none", False, "viewer"])


def test_picking_hf_says_what_a_folder_needs_and_shows_no_error_before_anything_is_typed():
    at = app()
    at.sidebar.selectbox(key="model_choice").set_value("hf: (any transformers model)").run()
    assert not at.exception and not at.error
    assert any("Type a transformers model" in m for m in messages(at))
    hint = " ".join(c.value for c in at.sidebar.caption)
    assert "config.json" in hint and "tokenizer.json" in hint and "ATTENTION_VIZ_MODEL_ROOTS" in hint


def test_a_long_input_gets_a_window_with_every_tick_and_positions_in_hover():
    """Every query of the 64-token window labelled (the figure grows a line a row), and every key too:
    upright at 7 px or more, the colour bar under the plot giving them its width (the page's script fits
    them again to the width drawn: tests/test_browser_labels.py)."""
    text = " ".join(f"word{i % 7} the" for i in range(60))  # > 64 tokens, many "the"
    at = app(text=text, query_from="10", key_from="20")
    assert not at.exception and not at.error
    spec = charts(at)[0]
    assert len(spec["layout"]["yaxis"]["ticktext"]) == 64
    keys = spec["layout"]["xaxis"]
    assert len(keys["ticktext"]) == 64 and keys["tickfont"]["size"] >= 7 and keys["tickangle"] == -90
    assert spec["data"][0]["colorbar"]["orientation"] == "h"
    assert spec["data"][0]["x"][0].startswith("20: ") and spec["data"][0]["y"][0].startswith("10: ")
    assert at.query_params["key_from"] in ("20", ["20"])


def test_colour_scales_per_row_and_log():
    row = charts(app(scale="row"))[0]["data"][0]
    assert row["zmax"] == 1.0 and row["colorbar"]["title"]["text"] == "÷ row's largest"
    log = charts(app(scale="log"))[0]["data"][0]
    assert (log["zmin"], log["zmax"]) == (-4.0, 0.0)


def test_a_views_choices_survive_a_visit_to_another_view():
    """Streamlit drops a widget's state after a run that does not draw it: back on the head view, the
    layer, head and options are those the user left, not the defaults (ui/widgets.py keeps them)."""
    at = app(view="head")
    at.slider(key="head_layer").set_value(2).run()
    at.select_slider(key="head_head").set_value(5).run()
    at.checkbox(key="head_hide_special").check().run()
    at.radio(key="head_scale").set_value("log").run()
    switch_view(at, "grid")
    assert "head_layer" not in at.session_state  # what Streamlit does to a widget it did not draw
    switch_view(at, "focus")
    switch_view(at, "head")
    assert not at.exception
    assert (at.slider(key="head_layer").value, at.select_slider(key="head_head").value) == (2, 5)
    assert at.checkbox(key="head_hide_special").value and at.radio(key="head_scale").value == "log"
    assert "layer 2, head 5" in charts(at)[0]["layout"]["title"]["text"]


TROPHY = "The trophy didn't fit in the suitcase because it was too big."


def test_a_model_switch_never_loses_the_sentence():
    """induction reads only its symbols: its example, and the page says so; back on minilm the box, the
    run and the link hold the user's sentence again, and the notice is gone."""
    at = app(text=TROPHY)
    at.sidebar.selectbox(key="model_choice").set_value("induction").run()
    assert not at.exception
    example = next(iter(load_backend("induction").examples().values()))
    assert at.sidebar.text_area(key="text").value == example
    assert any("now holds its example" in m for m in messages(at))
    at.sidebar.selectbox(key="model_choice").set_value("minilm").run()
    assert not at.exception and not at.error
    assert at.sidebar.text_area(key="text").value == TROPHY
    assert not any("now holds its example" in m for m in messages(at))
    assert at.query_params["text"] in (TROPHY, [TROPHY])
    assert "trophy" in charts(at)[0]["layout"]["xaxis"]["ticktext"]


def test_words_toy_translate_does_not_know_are_marked_and_named():
    """toy-translate's vocabulary (its vocab.json) against the trophy sentence: every word it lacks is
    marked on the axes (hover reads the axis values) and named in one line; known words are not."""
    backend = load_backend("toy-translate")
    vocabulary = set(backend.src_vocab.itos)
    at = app(model="toy-translate", view="encdec", text=TROPHY)
    assert not at.exception and not at.error
    words = TROPHY.lower().replace(".", " .").split()
    lacking = [w for w in words if w not in vocabulary]
    line = next(m for m in messages(at) if "does not know" in m)
    assert line.startswith(f"toy-translate does not know {len(lacking)} of these {len(words)} words")
    assert line.endswith(": " + ", ".join(dict.fromkeys(lacking)) + ".")
    labels = [label for chart in charts(at) for label in chart["layout"]["xaxis"].get("ticktext", [])]
    assert "trophy ⟨unk⟩" in labels and "suitcase ⟨unk⟩" in labels and "because" in labels


def test_the_landing_line_names_the_head_it_shows_and_only_when_the_sentence_has_both_words():
    """The reference: every head's it → animal weight from a plain run (attention_viz.run), the largest."""
    import numpy as np

    import attention_viz as av

    at = app()
    result = av.run("minilm", "The animal didn't cross the street because it was too tired.")
    labels = list(result.tokens.labels)
    cells = np.array([result.pattern(result.attentions()[0], layer)[:, labels.index("it"), labels.index("animal")]
                      for layer in range(result.n_layers(*result.attentions()[0]))])
    layer, head = np.unravel_index(cells.argmax(), cells.shape)
    said = [c.value for c in at.caption if "attends most" in c.value]
    assert said == [f"Opened on layer {layer}, head {head}: of all heads, the one where “it” attends most to "
                    "“animal” in this sentence."]
    assert f"layer {layer}, head {head}" in charts(at)[0]["layout"]["title"]["text"]
    assert not any("attends most" in c.value for c in app(text=TROPHY).caption)  # no "animal": nothing claimed
    assert not any("attends most" in c.value for c in app(layer="0", head="0").caption)  # another head shown


def test_copy_link_says_what_the_link_carries_after_a_file_upload():
    at = app()
    promise = [c.value for c in at.caption if "puts it on the clipboard" in c.value]
    assert promise and promise[0].endswith("it reopens exactly this view:")
    at.file_uploader(key="text_file").set_value(("story.txt", b"The cat sat on the mat.", "text/plain")).run()
    assert not at.exception
    promise = [c.value for c in at.caption if "puts it on the clipboard" in c.value]
    assert "exactly" not in promise[0] and "not on story.txt" in promise[0]
    assert at.query_params["text"] in (DEFAULT_TEXT, [DEFAULT_TEXT])  # what it said: the box's sentence


def test_the_head_views_layer_and_head_come_before_its_heatmap_and_the_other_choices_after():
    """In the page's order (a phone stacks it so): the layer and head above the heatmap; weighting, special
    tokens, words, colours, threshold under it."""
    at = app()

    def walk(node, out: list) -> list:
        for child in getattr(node, "children", {}).values():
            out.append(getattr(child, "key", None) or child.type)
            walk(child, out)
        return out
    order = [k for k in walk(at.main, []) if isinstance(k, str) and k.startswith(("head_", "weighting"))]
    chart = order.index("head_chart")
    assert order.index("head_layer") < chart and order.index("head_head") < chart
    assert all(order.index(k) > chart for k in ("weighting", "head_hide_special", "head_words", "head_scale",
                                                 "head_threshold"))
