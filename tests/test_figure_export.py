"""Figures leave the app paper-ready: the camera button saves PNG at 3× (or SVG), under one naming
scheme, with a subtitle saying model, sentence and settings; the HTML download is built for the
figure on screen."""

import json

from apphelpers import app, switch_view

import plotly.graph_objects as go

from attention_viz.core.provenance import Provenance
from attention_viz.figures.export import SUBTITLE_ROOM, camera_config, download_name, subtitle, with_subtitle

VIEWS = ["head", "grid", "focus", "layers", "compare", "inside", "positional", "causal", "basics"]
# figures of numbers made by a formula, not by a model: no model in their file names
SYNTHETIC = ("basics_", "positional_pe", "positional_curves", "positional_similarity", "positional_shift_chart",
             "positional_alt_", "positional_rope_pairs_chart", "positional_rope_decay")


def configs(at) -> dict[str, dict]:
    return {chart.key: json.loads(chart.proto.config) for chart in at.get("plotly_chart")}


def test_every_figure_of_every_view_saves_at_scale_3_under_one_naming_scheme():
    at = app()
    seen = 0
    for view in VIEWS:
        switch_view(at, view)
        assert not at.exception, view
        for key, config in configs(at).items():
            options = config["toImageButtonOptions"]
            assert options["scale"] == 3 and options["format"] == "png", (view, key)
            model = "" if key.startswith(SYNTHETIC) else "toy-translate_" if view == "causal" else "minilm_"
            assert options["filename"].startswith(f"attention-viz_{model}{view}_"), (view, key, options)
            seen += 1
        for chart in at.get("plotly_chart"):  # our one look (figures/style.py) styles every trace it carries
            spec = json.loads(chart.proto.spec)
            template = spec["layout"].get("template", {})
            if template.get("layout", {}).get("plot_bgcolor") == "white":
                assert not {trace["type"] for trace in spec["data"]} - set(template.get("data", {})), view
    assert seen >= 20


def test_the_svg_choice_reaches_every_camera_button_and_the_link():
    at = app(view="grid", image_format="svg")
    formats = {c["toImageButtonOptions"]["format"] for c in configs(at).values()}
    assert formats == {"svg"}
    assert at.query_params["image_format"] in ("svg", ["svg"])


def test_the_head_figure_names_model_sentence_and_settings():
    at = app(layer="2", head="4", threshold="0.05")
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    title, under = spec["layout"]["title"]["text"], spec["layout"]["title"]["subtitle"]["text"]
    assert "layer 2, head 4" in title
    assert under.startswith("minilm · “The animal didn't cross") and "threshold 0.05" in under
    name = configs(at)["head_chart"]["toImageButtonOptions"]["filename"]
    assert name == "attention-viz_minilm_head_chart_L2H4"
    assert not [b for b in at.get("download_button") if b.proto.label.startswith("Download figure")]  # on request
    at.button(key="head_chart_html_prepare").click().run()
    html = [b for b in at.get("download_button") if b.proto.label.startswith("Download figure")]
    assert len(html) == 1  # built now (bytes), not a callable that a later run can lose
    at.slider(key="head_layer").set_value(3).run()  # a slider move: no file kept, "Prepare" again
    assert not [b for b in at.get("download_button") if b.proto.label.startswith("Download figure")]
    assert at.button(key="head_chart_html_prepare")


def test_names_and_subtitles_keep_user_text_harmless():
    assert download_name("hf:/models/../x y", "head", "L1H2") == "attention-viz_hf-models-..-x-y_head_L1H2"
    line = subtitle(Provenance("minilm", "ours", "<b>bold</b> " + "word " * 40), "layer 1")
    assert "<b>" not in line and "&lt;b&gt;" in line and line.endswith("· layer 1") and "…" in line
    assert camera_config("n", "gif")["toImageButtonOptions"]["format"] == "png"


def test_a_subtitle_adds_room_without_shrinking_the_plot():
    fixed = go.Figure(layout=dict(height=300, margin=dict(t=50)))
    with_subtitle(fixed, "minilm")
    assert (fixed.layout.height, fixed.layout.margin.t) == (300 + SUBTITLE_ROOM, 50 + SUBTITLE_ROOM)
    free = with_subtitle(go.Figure(), "minilm")  # Streamlit sizes it: only the margin grows
    assert free.layout.height is None and free.layout.margin.t == 100 + SUBTITLE_ROOM
