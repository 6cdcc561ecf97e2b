"""The Head detector page: layers × heads maps per score over the probes plus the user's text, on
minilm, toy-translate, induction (the detector finds its previous-token head in layer 0 and its
induction head in layer 1, unaided) and the RNN (told what the page needs); the user's pattern and
the random repeated sequence; its plain data and figures."""

from __future__ import annotations

import numpy as np
import pytest

from single_view import array, figures, link, open_view, problems

from attention_viz.analysis.detector import MASKS, detect, offset_mask
from attention_viz.analysis.detector_view import (
    OFFSET,
    detector_scores,
    format_pairs,
    parse_pairs,
    pattern_scores,
    repeated_sequence_of,
)
from attention_viz.backends.induction import InductionBackend
from attention_viz.figures.detector import pairs_figure, score_heatmap
from attention_viz.core.names import DECODER_SELF
from attention_viz.ui import cache

REPEATED = "a q 7 m z 3 k b a q 7 m z 3 k b"


def by_title(at) -> dict[str, np.ndarray]:
    return {f["layout"]["title"]["text"]: array(f["data"][0]["z"]) for f in figures(at) if f["layout"].get("title")}


def test_induction_model_heads_are_found_in_their_layers():
    at = open_view("detector", model="induction", text=REPEATED)
    assert problems(at) == []
    maps = by_title(at)
    assert set(maps) >= {"previous token", "duplicate token", "induction", "self", "fixed offset -2"}
    assert np.unravel_index(maps["induction"].argmax(), maps["induction"].shape)[0] == 1
    assert np.unravel_index(maps["previous token"].argmax(), maps["previous token"].shape)[0] == 0
    assert all(0.0 <= m.min() and m.max() <= 1.0 for m in maps.values())


def test_offset_and_pairs_rescore_without_running_the_model(monkeypatch):
    at = open_view("detector", model="induction", text=REPEATED, pairs="9-2,10-3")
    assert problems(at) == []
    calls = [0]
    original = InductionBackend.forward

    def forward(self, *args, **kwargs):
        calls[0] += 1
        return original(self, *args, **kwargs)

    monkeypatch.setattr(InductionBackend, "forward", forward)
    assert "your pattern" in by_title(at)  # pairs from the link: "a"(9) → "q"(2), "q"(10) → "7"(3)
    at.slider(key="detector_offset").set_value(-1).run()
    maps = by_title(at)
    assert np.array_equal(maps["fixed offset -1"], maps["previous token"])  # the same targets and rows
    at.selectbox(key="detector_query").set_value(11)
    at.selectbox(key="detector_key").set_value(4)
    at.button(key="detector_mark").click().run()
    assert link(at)["pairs"] == "9-2,10-3,11-4" and problems(at) == []
    assert calls[0] == 0  # probes and the user's run were cached
    at.button(key="detector_clear").click().run()
    assert link(at)["pairs"] == "" and "your pattern" not in by_title(at)


def test_the_random_repeated_sequence_button_fills_the_sentence():
    at = open_view("detector", model="induction", text="a b c")
    at.button(key="detector_repeat").click().run()
    text = at.text_input(key="text").value
    words = text.split()
    assert words[: len(words) // 2] == words[len(words) // 2 :] and len(words) >= 12
    assert problems(at) == [] and link(at)["text"] == text


@pytest.mark.parametrize("model, text, groups", [
    ("minilm", "The animal didn't cross the street because it was too tired.", 1),
    ("toy-translate", "the law was signed .", 2),
])
def test_encoder_and_encoder_decoder_models_draw_every_score(model, text, groups):
    at = open_view("detector", model=model, text=text)
    assert problems(at) == []
    assert len(figures(at)) == 6 and len(at.radio) == (groups > 1)
    if model == "minilm":
        sink = by_title(at)["sink (special / first token)"]
        assert sink.shape == (6, 12) and sink.max() > 0.5  # BERT's heads park attention on [SEP]


def test_the_rnn_is_told_what_the_page_needs_in_one_sentence():
    at = open_view("detector", model="toy-translate-rnn", text="the law was signed .")
    assert problems(at) == [] and not figures(at)
    assert len(at.info) == 1 and "self" in at.info[0].value


# ------------------------------------------------------------------------------------ plain data


def test_scores_over_cached_runs_equal_the_detector_over_the_texts():
    backend = cache.backend("induction")
    texts = backend.probe_texts()[:4]
    probes = [backend.run(t) for t in texts]
    user = backend.run(REPEATED)
    ours = detector_scores(probes, user, DECODER_SELF, 3)
    direct = detect(backend.run, [*texts, REPEATED], DECODER_SELF, {**MASKS, OFFSET: offset_mask(3)})
    assert ours.keys() == direct.keys()
    assert all(np.array_equal(ours[name], direct[name]) for name in ours)
    marked = pattern_scores(user, DECODER_SELF, [(9, 2)])
    assert np.allclose(marked, user.stack("pattern", *DECODER_SELF)[:, :, 9, 2])  # one pair: its weight


def test_pairs_round_trip_through_the_link():
    assert parse_pairs(format_pairs([(5, 2), (7, 1)]), 8) == [(5, 2), (7, 1)]
    assert parse_pairs("5-2,5-2,x-1,9-0,3-,-1", 8) == [(5, 2)]  # repeats, junk and positions past the end dropped
    assert format_pairs([]) == "" and parse_pairs("", 4) == []


def test_a_repeated_sequence_is_picked_from_the_probes():
    assert repeated_sequence_of(["The cat saw the dog.", "a b a b"]) == "a b a b"
    assert repeated_sequence_of(["a b c a b", ""]) is None


# --------------------------------------------------------------------------------------- figures


def test_every_score_map_is_on_the_same_0_to_1_range_with_numbered_axes():
    low, high = score_heatmap(np.full((2, 4), 0.1)), score_heatmap(np.full((2, 4), 0.9))
    for figure in (low, high):
        trace = figure.data[0]
        assert (trace.zmin, trace.zmax) == (0.0, 1.0)
        assert list(trace.x) == [0, 1, 2, 3] and list(figure.layout.yaxis.ticktext) == ["layer 0", "layer 1"]
    with pytest.raises(ValueError):
        score_heatmap(np.zeros(3))


def test_the_marked_pairs_figure_fills_exactly_the_marked_cells():
    figure = pairs_figure(["the", "cat", "the"], [(2, 0)])
    z = np.asarray(figure.data[0].z)
    assert z.sum() == 1 and z[2, 0] == 1
    assert list(figure.layout.xaxis.ticktext) == ["the", "cat", "the"]  # repeated tokens: two positions
