"""The causal-mask and encoder–decoder pages on the shipped demo models, headless (AppTest)."""

from apphelpers import app, charts, messages

from attention_viz.backends.translation import TranslationBackend


def titles(at) -> list[str]:
    return [spec["layout"].get("title", {}).get("text", "") for spec in charts(at)]


def captions(at) -> str:
    return " ".join(c.value for c in at.caption)


def test_causal_page_falls_back_to_the_demo_decoder_and_shows_every_step():
    at = app(view="causal")
    assert not at.exception and not at.error
    assert any("This view runs toy-translate: minilm has no decoder" in m for m in messages(at))
    shown = titles(at)
    assert shown[0].startswith("causal mask") and "before the mask" in shown[1] and "−∞" in shown[2]
    after = charts(at)[2]["data"][0]
    assert "−∞" in str(after["text"])  # masked cells are labelled
    assert "Largest weight above the diagonal: 0 (exactly)" in captions(at)
    assert "Largest weight on a padding key: 0 (exactly)" in captions(at)


def test_editing_a_later_word_leaves_earlier_rows_exactly_unchanged():
    at = app(view="causal")
    at.slider(key="causal_edit_at").set_value(3).run()
    at.text_input(key="causal_edit_word").set_value("conseil").run()
    assert not at.exception and not at.error
    assert "rows 0..2 changed by at most 0 (exactly)" in captions(at)


def test_causal_page_on_the_translation_model_itself():
    at = app(view="causal", model="toy-translate", text="the law was signed .")
    assert not at.exception and not at.error
    assert not any("has no decoder" in i.value for i in at.info)


def test_encoder_decoder_page_translates_and_compares_flows_and_models():
    at = app(view="encdec", model="toy-translate", text="the european economic area was signed .")
    assert not at.exception and not at.error
    assert "la zone économique européenne a été signée" in " ".join(m.value for m in at.markdown)
    shown = titles(at)
    assert any("teacher forcing" in t for t in shown) and any("inference" in t for t in shown)
    assert any("toy-translate-rnn" in t for t in shown)
    at.slider(key="encdec_step").set_value(2).run()
    assert not at.exception


def test_rnn_cross_attention_is_viewable_like_the_transformers():
    at = app(view="head", model="toy-translate-rnn", text="the law was signed .")
    assert not at.exception and not at.error
    spec = charts(at)[0]  # its only attention is the cross-attention, so no picker is needed
    assert spec["layout"]["xaxis"]["ticktext"][:3] == ["the", "law", "was"]


def test_the_causal_page_never_calls_the_rnn_an_encoder():
    at = app(view="causal", model="toy-translate-rnn", text="the law was signed .")
    assert not at.exception and not at.error
    said = " ".join(messages(at))
    assert "toy-translate-rnn has no decoder self-attention" in said and "encoder" not in said.split("so this")[0]


def test_causal_page_widgets_never_rerun_the_model(monkeypatch):
    runs, batches = [], []
    run, batch = TranslationBackend.run, TranslationBackend.padded_batch
    monkeypatch.setattr(TranslationBackend, "run", lambda self, *a, **k: runs.append(a) or run(self, *a, **k))
    monkeypatch.setattr(TranslationBackend, "padded_batch",
                        lambda self, *a, **k: batches.append(a) or batch(self, *a, **k))
    at = app(view="causal", model="toy-translate", text="the treaty was signed in may .")
    assert not at.exception and not at.error and batches
    first = (len(runs), len(batches))
    at.select_slider(key="causal_head").set_value(2).run()
    at.slider(key="causal_edit_at").set_value(2).run()
    at.slider(key="causal_edit_at").set_value(3).run()
    at.select_slider(key="causal_head").set_value(0).run()
    assert not at.exception and not at.error
    assert len(batches) == first[1]  # the padded batch: computed once
    assert len(runs) <= first[0] + 2  # only the two new edits ran (each is a different target)
