"""The Head ablation page on every kind of model we ship (encoder minilm, encoder–decoder
toy-translate, decoder induction, RNN toy-translate-rnn), its figures and plain data, and its
caching: a new set of heads runs one forward (the ablated one), a set seen before runs none."""

from __future__ import annotations

import json

import numpy as np
import pytest

from single_view import figures, link, open_view, problems

from attention_viz.analysis.ablation import parse_heads
from attention_viz.analysis.ablation_view import (chosen_heads, following_labels, head_item, head_options, marked,
                                                   shipped_importance, toggled)
from attention_viz.backends.scratch import ScratchEncoderBackend
from attention_viz.figures.ablation import log_prob_bars, movement_bars, pattern_pair, study_bars
from attention_viz.core.names import CROSS, DECODER_SELF, ENCODER_SELF
from attention_viz.trained import induction
from attention_viz.ui import cache

TIRED = "The animal didn't cross the street because it was too tired."
TOY = "the law was signed ."
REPEATED = "a q 7 m z 3 k b a q 7 m z 3 k b"


def counting(monkeypatch, backend_class) -> list[int]:
    """Count every forward of ``backend_class`` (its run() goes through forward())."""
    calls = [0]
    original = backend_class.forward

    def forward(self, *args, **kwargs):
        calls[0] += 1
        return original(self, *args, **kwargs)

    monkeypatch.setattr(backend_class, "forward", forward)
    return calls


def metric(at, label_start: str) -> float:
    return float(next(m.value for m in at.metric if m.label.startswith(label_start)))


# ------------------------------------------------------------------------------------- the page


def test_minilm_without_head_3_1_moves_the_sentence_embedding():
    at = open_view("ablation", model="minilm", text=TIRED, ablate="3.1")
    assert problems(at) == []
    cosine = metric(at, "Cosine")
    assert 0.0 < cosine < 1.0
    assert at.multiselect(key="ablation_ablate").value == ["3.1"]  # the choice came from the link
    shown = figures(at)
    movement = next(f for f in shown if f["data"][0]["type"] == "bar")
    n_tokens = len(cache.run("minilm", TIRED).tokens)
    assert len(movement["data"][0]["x"]) == n_tokens and movement["layout"]["xaxis"]["ticktext"][0] == "[CLS]"
    assert any(len(f["data"]) == 2 and f["data"][0]["type"] == "heatmap" for f in shown)  # before / after
    # the coreference study ran on the example: the top "it → animal" heads against random heads
    study = next(f for f in shown if f["layout"]["xaxis"].get("ticktext", [None])[0] == "top heads")
    assert len(study["data"][0]["y"]) == 21
    assert link(at)["ablate"] == "3.1" and link(at)["ablation"] == "zero"


def test_switching_the_ablated_set_runs_only_forwards_not_made_before(monkeypatch):
    at = open_view("ablation", model="minilm", text=TIRED, ablate="4.7", study="0")
    assert problems(at) == []
    calls = counting(monkeypatch, ScratchEncoderBackend)
    heads = at.multiselect(key="ablation_ablate")
    heads.set_value(["4.7", "1.2"]).run()
    assert problems(at) == [] and calls[0] == 1  # the ablated forward only; the plain one is cached
    first = metric(at, "Cosine")
    at.multiselect(key="ablation_ablate").set_value(["4.7"]).run()
    at.multiselect(key="ablation_ablate").set_value(["4.7", "1.2"]).run()
    assert calls[0] == 1  # both sets were seen before: nothing runs again
    assert metric(at, "Cosine") == first
    at.radio(key="ablation_ablation").set_value("mean").run()  # the probe means come once per model
    after_mean = calls[0]
    at.multiselect(key="ablation_ablate").set_value(["4.7"]).run()
    assert calls[0] == after_mean + 1 and problems(at) == []


def test_toy_translate_translation_log_probs_and_the_head_importance_table():
    at = open_view("ablation", model="toy-translate", text=TOY, ablate="cross:1.1")
    assert problems(at) == []
    texts = [t.value for t in at.text]
    assert len(texts) == 2 and all(texts)  # translation before and after
    assert {m.label for m in at.metric} >= {"Loss before (nats per token)", "Loss after", "Change"}
    bars = next(f for f in figures(at) if f["data"][0]["type"] == "bar")
    assert [trace["name"] for trace in bars["data"]] == ["before", "after"]
    assert bars["layout"]["xaxis"]["ticktext"][-1] == "&lt;eos&gt;"  # the end marker is scored too
    table = at.dataframe[0].value
    assert len(table) == 36 and list(table["head"]).count("cross 1.1") == 1


def test_induction_next_token_loss_rises_without_the_previous_token_head():
    card = json.loads((induction.FOLDER / "evaluation.json").read_text())
    previous = card["detector"]["previous_token_head"]  # the model card's, found by the detector unaided
    at = open_view("ablation", model="induction", text=REPEATED, ablate=f"{previous['layer']}.{previous['head']}")
    assert problems(at) == []
    assert metric(at, "Change") > 0  # without it the induction head has no previous token to match on
    at.radio(key="ablation_ablation").set_value("mean").run()
    assert problems(at) == [] and link(at)["ablation"] == "mean"


def test_the_rnn_is_told_what_the_page_needs_in_one_sentence():
    at = open_view("ablation", model="toy-translate-rnn", text=TOY)
    assert problems(at) == [] and not figures(at)
    assert len(at.info) == 1 and "needs a multi" in at.info[0].value.replace("\\", "")


# ------------------------------------------------------------------------------------ plain data


def test_head_options_are_the_cli_spelling_of_every_head():
    result = cache.run("toy-translate", TOY)
    options = head_options(result)
    assert len(options) == 36 and options[0] == "0.0" and "decoder:2.3" in options and "cross:1.1" in options
    heads = chosen_heads(options, result)
    assert heads == parse_heads(",".join(options), ENCODER_SELF)
    assert {group for group, _, _ in heads} == {ENCODER_SELF, DECODER_SELF, CROSS}
    assert chosen_heads([], result) == ()


def test_following_labels_name_the_token_each_log_probability_is_about():
    result = cache.run("induction", "a b c")
    assert following_labels(result, 3) == ["a", "b", "c"]  # <bos> → a, a → b, b → c
    translated = cache.run("toy-translate", TOY)
    predicted = translated.meta["predicted"]  # every generated word, the end marker last
    assert following_labels(translated, len(predicted)) == [*predicted[:-1], "<eos>"]


def test_the_shipped_importance_table_is_sorted_by_drop():
    table = shipped_importance("toy-translate")
    drops = [row["exact-match drop (points)"] for row in table.rows]
    assert drops == sorted(drops, reverse=True)
    assert 0 < table.baseline["exact_match"] <= 1 and table.pairs > 0
    assert shipped_importance("minilm") is None


# --------------------------------------------------------------------------------------- figures


def test_the_before_after_pair_shares_one_colour_range():
    before = np.array([[1.0, 0.0], [0.3, 0.7]])
    after = np.array([[0.2, 0.8, 0.0], [0.9, 0.05, 0.05]])  # another shape: an ablated translation
    figure = pattern_pair(before, after, (["the", "the"], ["the", "the"]), (["a", "b"], ["x", "y", "z"]))
    traces = figure.data
    assert [t.coloraxis for t in traces] == ["coloraxis", "coloraxis"]
    assert figure.layout.coloraxis.cmin == 0.0 and figure.layout.coloraxis.cmax == 1.0
    scaled = pattern_pair(before * 0.5, after * 0.25, (["a", "b"],) * 2, (["a", "b"], ["x", "y", "z"]))
    assert scaled.layout.coloraxis.cmax == 0.5  # the larger of the two maps' maxima
    assert list(traces[0].x) == [0, 1] and list(figure.layout.xaxis.ticktext) == ["the", "the"]  # no merging
    with pytest.raises(ValueError):
        pattern_pair(before, after, (["a"], ["b"]), (["a", "b"], ["x", "y", "z"]))


def test_bars_put_positions_on_the_axis_and_escape_tokens():
    figure = log_prob_bars(["<b>", "the", "the"], [-0.1, -0.2, -0.3], [-0.5, -0.2, -0.1])
    assert [list(t.x) for t in figure.data] == [[0, 1, 2], [0, 1, 2]]
    assert list(figure.layout.xaxis.ticktext) == ["&lt;b&gt;", "the", "the"]
    assert list(movement_bars(["a", "b"], [0.0, 0.5]).data[0].y) == [0.0, 0.5]
    study = study_bars(["encoder 3.1"], 0.2, [0.1, 0.3])
    assert list(study.data[0].y) == [0.2, 0.3, 0.1]
    with pytest.raises(ValueError):
        log_prob_bars(["a"], [0.0], [0.0, 1.0])



def test_a_head_clicked_in_the_grid_is_spelled_as_the_picker_spells_it_and_toggles():
    result = cache.run("toy-translate", TOY)
    options = head_options(result)
    for group in result.attentions():
        for layer in range(result.n_layers(*group)):
            for head in range(result.pattern(group, layer).shape[0]):
                assert head_item(result, group, layer, head) in options
    assert head_item(result, CROSS, 1, 2) == "cross:1.2" and head_item(result, ENCODER_SELF, 1, 2) == "1.2"
    items = toggled(toggled(["1.2"], "cross:1.2"), "decoder:0.0")
    assert items == ["1.2", "cross:1.2", "decoder:0.0"] and toggled(items, "1.2") == ["cross:1.2", "decoder:0.0"]
    assert toggled(items, None) == items
    assert marked(items, result, CROSS) == {(1, 2)} and marked(items, result, ENCODER_SELF) == {(1, 2)}


def test_a_click_in_the_grid_is_applied_to_the_set_and_the_link_and_the_grid_marks_it():
    at = open_view("ablation", model="minilm", text=TIRED, ablate="3.1", study="0")
    at.session_state["_ablation_ablate_toggle"] = "2.5"  # what a click on layer 2, head 5 leaves for the next run
    at.run()
    assert problems(at) == [] and at.multiselect(key="ablation_ablate").value == ["3.1", "2.5"]
    assert link(at)["ablate"] == "3.1,2.5"
    grid = next(f for f in figures(at) if f["layout"]["title"]["text"].startswith("or click heads"))
    frames = [shape for shape in grid["layout"]["shapes"] if shape["line"]["color"] == "rgb(214,39,40)"]
    assert [frame["name"] for frame in frames] == ["removed 2.5", "removed 3.1"]  # outlined, not filled
    assert all(frame["fillcolor"] == "rgba(0,0,0,0)" for frame in frames)
    assert grid["data"][1]["marker"]["color"] == "rgba(0,0,0,0.01)"  # the click targets stay clear
    at.session_state["_ablation_ablate_toggle"] = "3.1"  # clicked again: put back
    at.run()
    assert at.multiselect(key="ablation_ablate").value == ["2.5"] and link(at)["ablate"] == "2.5"


def test_typing_a_head_and_enter_takes_that_head_alone():
    """Enter takes the first visible row: with no "Select all matches" row (select_all 0) and options
    matched by prefix, typing "3.1" leaves 3.1, 3.10, 3.11 in the options' order, 3.1 first
    (tests/test_browser_choices.py types it in Chromium)."""
    from streamlit.proto.SelectWidgetFilterMode_pb2 import SelectWidgetFilterMode

    at = open_view("ablation", model="minilm", text=TIRED, study="0")
    widget = at.multiselect(key="ablation_ablate").proto
    assert widget.select_all == 0 and widget.filter_mode == SelectWidgetFilterMode.FILTER_MODE_PREFIX
    assert [o for o in widget.options if o.startswith("3.1")] == ["3.1", "3.10", "3.11"]
