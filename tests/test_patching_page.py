"""The Patching page (Explore): the preset pair drawn as a heatmap of restored fractions on a scale
centred at 0, the inputs, words, site and mode in the link, and one-line refusals."""

from __future__ import annotations

import json

import numpy as np
from apphelpers import app, charts, messages, plain
from single_view import array, figures, link, open_view, problems

from attention_viz.analysis.patching import PRESETS
from attention_viz.backends.patching import patch
from attention_viz.backends.registry import load_backend
from attention_viz.figures.patching import patching_heatmap


def heatmap(at) -> dict:
    (figure,) = figures(at)
    return figure["data"][0]


def test_the_preset_pair_is_drawn_and_kept_in_the_link():
    at = open_view("patching", model="induction", text="a b c a b")
    assert not problems(at)
    trace = heatmap(at)
    expected = patch(load_backend("induction"), *PRESETS["induction"].inputs, "heads").restored
    np.testing.assert_allclose(array(trace["z"]).reshape(expected.shape), expected, atol=1e-6)
    assert trace["zmid"] == 0 and trace["zmin"] == -trace["zmax"] and trace["zmax"] >= 1
    shown = link(at)
    for key, value in (("clean", PRESETS["induction"].clean), ("corrupt", PRESETS["induction"].corrupt),
                       ("answer", "a"), ("wrong", "x"), ("site", "heads")):
        assert shown.get(key) == value, (key, shown)


def test_a_link_opens_its_site_and_mode():
    clean, corrupt, answer, wrong = PRESETS["minilm"].inputs
    at = open_view("patching", model="minilm", clean=clean, corrupt=corrupt, answer=answer, wrong=wrong,
                   site="resid", noising="true")
    assert not problems(at)
    trace = heatmap(at)
    expected = patch(load_backend("minilm"), clean, corrupt, answer, wrong, "resid", noising=True).restored
    assert array(trace["z"]).size == expected.size == 6 * 16
    np.testing.assert_allclose(array(trace["z"]).reshape(expected.shape), expected, atol=1e-6)
    assert link(at)["site"] == "resid" and link(at)["noising"] in ("true", "True", "1")


def test_inputs_of_different_lengths_are_one_line():
    at = open_view("patching", model="induction", text="a b c a b", clean="a b c a b", corrupt="a b c d a b", answer="c", wrong="d")
    (message,) = problems(at)  # a ModelError: the app's page edge shows it as one error line
    assert "has 6 tokens and the corrupt 7" in message and "\n" not in message
    assert not figures(at)


def test_a_model_without_heads_to_patch_says_so():
    at = open_view("patching", model="toy-translate-rnn", text="the law was signed .")
    assert not figures(at) and any("cannot be patched" in plain(i.value) for i in at.info)


def test_every_site_draws_one_row_per_layer_or_per_layer_and_head():
    result = patch(load_backend("induction"), *PRESETS["induction"].inputs, "head_positions")
    figure = patching_heatmap(result)
    assert list(figure.data[0].y) == list(range(2 * 4))  # layer × head rows
    assert figure.layout.yaxis.ticktext[5] == "layer 1 head 1"
    assert len(figure.data[0].x) == len(result.tokens)


def test_the_app_lists_the_page_under_explore_and_shows_refusals_in_one_line():
    at = app(view="patching", model="induction", text="a b c a b", clean="a b c a b", corrupt="a b c d a b",
             answer="c", wrong="d")
    assert not at.exception
    assert [m for m in messages(at) if "patching needs the same number" in m] == [
        "the clean text has 6 tokens and the corrupt 7; patching needs the same number (they first differ at "
        "token 4 ('a' vs 'd'))"]
    at = app(view="patching", model="induction", text="a b c a b")
    assert not at.exception and len(charts(at)) == 1


def test_long_inputs_are_left_to_the_command_line():
    long_text = " ".join(["a b c d"] * 8)  # 33 tokens with <bos>
    at = open_view("patching", model="induction", text="a b c a b", clean=long_text, corrupt=long_text,
                   answer="a", wrong="b", site="head_positions")
    assert not figures(at) and not problems(at)
    assert any("33 tokens: this page patches head_positions on inputs of up to 24" in plain(i.value) for i in at.info)


def test_a_tiny_gap_is_warned_above_the_map_and_the_hover_names_the_head_once():
    clean, corrupt = ("The trophy didn't fit in the suitcase because it was too big.",
                      "The trophy didn't fit in the suitcase because it was too small.")
    at = open_view("patching", model="minilm", clean=clean, corrupt=corrupt, answer="trophy", wrong="suitcase")
    assert not problems(at)
    warnings = [plain(w.value) for w in at.warning]
    assert any(w.startswith("The clean and corrupt inputs differ by only") for w in warnings), warnings
    hover = heatmap(at)
    assert "head head" not in json.dumps(hover) and hover["customdata"][0][1][1] == "head 1"
    quiet = open_view("patching", model="minilm")  # the preset: a gap that means something
    assert not [w for w in quiet.warning if "differ by only" in w.value]


def test_the_preset_follows_the_model_and_typed_text_stays():
    at = open_view("patching", model="minilm")
    assert at.text_input(key="patching_answer").value == PRESETS["minilm"].answer
    at.session_state["model"] = "toy-translate"
    at.run()
    assert not problems(at)
    assert [at.text_input(key=k).value for k in ("patching_clean", "patching_corrupt", "patching_answer",
                                                   "patching_wrong")] == list(PRESETS["toy-translate"].inputs)
    typed = open_view("patching", model="minilm")
    typed.text_input(key="patching_clean").set_value("The animal didn't cross the road because it was too tired.").run()
    typed.session_state["model"] = "toy-translate"
    typed.run()  # the patch itself may refuse the pair: the boxes are drawn before it
    assert typed.text_input(key="patching_clean").value.endswith("the road because it was too tired.")  # typed: kept
    assert typed.text_input(key="patching_answer").value == PRESETS["toy-translate"].answer
