"""Every figure knows where it came from: a result carries its provenance (model, implementation,
source, target, settings) from the backend that made it, through .npz and back; a figure's subtitle
and file name are made from the provenance it was drawn from, never from the sidebar; a figure drawn
with no provenance is an error."""

from __future__ import annotations

import json

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from apphelpers import TIMEOUT
from attention_viz.core.caption_result import CaptionResult
from attention_viz.core.names import ENCODER_SELF, hook_name
from attention_viz.core.provenance import Provenance, image_of, run_of
from attention_viz.core.result import AttentionResult
from attention_viz.figures.export import subtitle, subtitle_words
from attention_viz.inputs.tokens import from_words

TRANSLATED = Provenance("toy-translate", "ours", "the law was signed .", "la loi a été signée .")


def small_result(meta: dict) -> AttentionResult:
    tokens = from_words(["the", "law"], [4, 5], [False, False])
    pattern = np.array([[[1.0, 0.0], [0.25, 0.75]]], dtype=np.float32)
    return AttentionResult("minilm", tokens, {hook_name(ENCODER_SELF, 0, "pattern"): pattern}, meta=meta)


def test_a_provenance_is_frozen_and_round_trips_through_plain_data():
    drawn = Provenance("minilm", "ours", "a b", None, ("positions off",))
    assert Provenance.from_dict(json.loads(json.dumps(drawn.to_dict()))) == drawn
    assert Provenance.from_dict(run_of("minilm", "ours", "a b", None, None, "positions off")) == drawn  # None: no setting
    with pytest.raises(AttributeError):
        drawn.model = "other"  # type: ignore[misc]
    assert drawn.from_file("notes.txt").source == "file: notes.txt" and drawn.source == "a b"
    assert image_of(7) == "image: scene 7" and not Provenance("m", source=image_of(None)).is_text


def test_a_result_keeps_its_provenance_through_npz(tmp_path):
    result = small_result({"provenance": TRANSLATED.to_dict(), "dropped": 0})
    result.save_npz(tmp_path / "r.npz")
    assert AttentionResult.load_npz(tmp_path / "r.npz").provenance == TRANSLATED
    named = result.with_provenance(result.provenance.from_file("long.txt"))
    assert named.provenance.source == "file: long.txt" and result.provenance == TRANSLATED  # the original untouched
    assert named.arrays is result.arrays  # shared, not copied


def test_a_result_saved_without_one_is_told_from_its_model_text_and_target():
    old = small_result({"implementation": "ours", "target": "x y"})
    assert old.provenance == Provenance("minilm", "ours", "the law", "x y")


def test_the_subtitle_names_the_source_the_target_and_the_settings():
    assert subtitle_words(TRANSLATED, "layer 1") == ("toy-translate · “the law was signed .” → “la loi a été signée .” "
                                                     "· layer 1")
    upload = Provenance("minilm", "ours", "file: my notes.txt", None, ("zero ablation of encoder 0.1",))
    assert subtitle_words(upload, "") == "minilm · file: my notes.txt · zero ablation of encoder 0.1"  # a name: no quotes
    assert subtitle_words(Provenance("show-attend-tell", "ours", image_of(7)), "") == "show-attend-tell · image: scene 7"
    long = subtitle(Provenance("minilm", "ours", "<b>x</b> " + "word " * 40), "")
    assert "<b>" not in long and "&lt;b&gt;" in long and long.endswith("…”")


@pytest.mark.slow  # loads three models
def test_backends_say_where_their_results_came_from():
    from attention_viz.analysis.ablation import Ablation
    from attention_viz.backends.registry import load_backend

    text = "the law was signed ."
    translated = load_backend("toy-translate")
    assert translated.run(text).provenance == Provenance("toy-translate", "ours", text)
    assert translated.run(text, "la loi").provenance.target == "la loi"
    minilm = load_backend("minilm")
    assert minilm.run_without_positions(text).provenance.settings == ("positions off",)
    removed = Ablation(((ENCODER_SELF, 0, 1),))
    assert minilm.forward(text, ablation=removed)[0].provenance.settings == (removed.describe(),)
    caption = load_backend("show-attend-tell").caption_scene(7)
    assert caption.provenance == Provenance("show-attend-tell", "ours", "image: scene 7")


def test_a_caption_keeps_its_provenance_through_npz(tmp_path):
    maps = np.full((1, 2, 2), 0.25, dtype=np.float32)
    caption = CaptionResult("show-attend-tell", ("a",), maps, np.zeros((4, 4, 3), np.uint8), seed=3,
                            meta={"provenance": run_of("show-attend-tell", "ours", image_of(3))})
    caption.save_npz(tmp_path / "c.npz")
    assert CaptionResult.load_npz(tmp_path / "c.npz").provenance.source == "image: scene 3"


def _figures(where: str) -> None:
    """The sidebar says minilm and its sentence; the figure comes from toy-translate's run."""
    import plotly.graph_objects as go
    import streamlit as st

    from attention_viz.core.provenance import Provenance
    from attention_viz.ui.export import SYNTHETIC, chart, drawn_from, saved_as

    st.session_state.update(model="minilm", text="The sidebar's sentence.", view="encdec")
    figure = go.Figure(go.Heatmap(z=[[1, 2]]), layout=dict(title=dict(text="cross-attention")))
    if where == "nowhere":
        chart(st, figure, key="encdec_cross")
        return
    drawn = SYNTHETIC if where == "synthetic" else Provenance("toy-translate", "ours", "the law was signed .")
    with drawn_from(drawn):
        chart(st, figure, key="encdec_cross")
        st.json(saved_as("encdec_levels"))


def _page(where: str) -> tuple[dict, dict, dict]:
    at = AppTest.from_function(_figures, args=(where,), default_timeout=TIMEOUT).run()
    assert not at.exception, at.exception
    chart = at.get("plotly_chart")[0]
    return json.loads(chart.proto.spec), json.loads(chart.proto.config), json.loads(at.json[0].value)


def test_a_figure_is_named_from_what_it_was_drawn_from_not_the_sidebar():
    spec, config, levels = _page("toy-translate")
    under = spec["layout"]["title"]["subtitle"]["text"]
    assert under == "toy-translate · “the law was signed .”" and "minilm" not in under
    assert config["toImageButtonOptions"]["filename"] == "attention-viz_toy-translate_encdec_cross"
    assert levels["subtitle"] == under and levels["file_name"] == "attention-viz_toy-translate_encdec_levels"


def test_synthetic_numbers_get_no_subtitle_and_no_model_in_their_name():
    spec, config, levels = _page("synthetic")
    assert "subtitle" not in spec["layout"]["title"] and levels["subtitle"] == ""
    assert config["toImageButtonOptions"]["filename"] == "attention-viz_encdec_cross"


def test_a_figure_drawn_from_nowhere_fails_loudly():
    at = AppTest.from_function(_figures, args=("nowhere",), default_timeout=TIMEOUT).run()
    (error,) = at.exception
    assert "drawn outside `with drawn_from(...)`" in error.message and "RuntimeError" in "".join(error.stack_trace)
    assert not at.get("plotly_chart")

