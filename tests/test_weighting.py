"""The weighting choice (attention weights / value-weighted norms, Kobayashi et al. 2020) on every
view that draws patterns: what each figure shows equals the analysis' norms, the figures say which
weighting they show, pairs keep one colour range, the choice is in the link, and a model without
values or W_O falls back to the weights with a sentence saying so."""

from __future__ import annotations

import numpy as np
import pytest

from apphelpers import app, charts, switch_view
from single_view import array, link

from attention_viz.analysis.checks import normalize_rows
from attention_viz.analysis.rollout import rollout
from attention_viz.analysis.value_norms import value_norm_arrays
from attention_viz.analysis.weighting import Weighted, value_norms_or_reason, weighted
from attention_viz.backends.registry import load_backend
from attention_viz.core.names import CROSS, ENCODER_SELF, hook_name
from attention_viz.core.result import AttentionResult
from attention_viz.analysis.selection import Choice, displayed, log_range, rescaled
from attention_viz.inputs.tokens import Tokens

TIRED = "The animal didn't cross the street because it was too tired."
WIDE = "The animal didn't cross the street because it was too wide."
TOY = "the law was signed ."


def norms_of(model: str, text: str, group=ENCODER_SELF) -> tuple[AttentionResult, np.ndarray]:
    """The run and the analysis' value-weighted norms ``[layers, heads, q, k]``, straight from the backend."""
    backend = load_backend(model)
    result = backend.run(text, kinds=("v", "pattern"))
    arrays = value_norm_arrays(result, backend.output_projection)
    return result, np.stack([arrays[hook_name(group, i, "value_norm")] for i in range(result.n_layers(*group))])


def z(figure: dict, trace: int = 0) -> np.ndarray:
    return array(figure["data"][trace]["z"]).astype(np.float64)


def title(figure: dict) -> str:
    return figure["layout"]["title"]["text"]


def colour_bar(figure: dict) -> str:
    return figure["data"][0]["colorbar"]["title"]["text"]


@pytest.fixture(scope="module")
def minilm_norms():
    return norms_of("minilm", TIRED)


def test_every_pattern_view_draws_the_norms_the_analysis_computes(minilm_norms):
    result, norms = minilm_norms
    labels = [label.lower() for label in result.tokens.labels]
    it, animal = labels.index("it"), labels.index("animal")
    at = app(model="minilm", text=TIRED, view="head", weighting="norms", layer="3", head="1")
    assert not at.exception and at.radio(key="weighting").value == "norms"
    head, *_beside = charts(at)  # then the head's weights and norms side by side
    assert "value-weighted norms" in title(head) and colour_bar(head) == "value-weighted norm"
    np.testing.assert_allclose(z(head), norms[3, 1], rtol=1e-6, atol=1e-7)
    assert np.abs(z(head).sum(axis=1) - 1).max() > 0.1  # not the weights: norms' rows do not sum to 1

    switch_view(at, "grid")
    assert not at.exception and at.radio(key="weighting").value == "norms"  # one choice for every view
    grid, enlarged = charts(at)
    assert "value-weighted norms" in title(grid) and colour_bar(grid) == "value-weighted norm"
    assert "value-weighted norms" in title(enlarged) and colour_bar(enlarged) == "value-weighted norm"
    np.testing.assert_allclose(z(enlarged), norms[0, 0], rtol=1e-6, atol=1e-7)
    assert np.nanmax(z(grid)) == pytest.approx(float(norms.max()), rel=0.5)  # thumbnails block-average
    assert any("statistics are those of the attention weights" in c.value for c in at.caption)

    switch_view(at, "focus")
    [focus] = charts(at)
    assert not at.exception and title(focus).startswith("value-weighted norm from it to animal")
    np.testing.assert_allclose(z(focus), norms[:, :, it, animal], rtol=1e-6, atol=1e-7)

    switch_view(at, "layers")
    rows, rolled, *flow = charts(at)
    assert not at.exception and all("value-weighted norms" in title(f) for f in (rows, rolled, *flow))
    np.testing.assert_allclose(z(rows), norms.mean(axis=1)[:, it, :], rtol=1e-5, atol=1e-6)
    shares = normalize_rows(norms)
    np.testing.assert_allclose(z(rolled), rollout(shares)[-1], rtol=1e-5, atol=1e-6)

    switch_view(at, "compare")
    a, b = charts(at)
    assert not at.exception and all("value-weighted norms" in title(f) for f in (a, b))
    np.testing.assert_allclose(z(a), norms[0, 0], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(z(b), norms[-1, 0], rtol=1e-6, atol=1e-7)
    top = max(norms[0, 0].max(), norms[-1, 0].max())  # one colour range for the pair, of the norms
    assert a["data"][0]["zmax"] == b["data"][0]["zmax"] == pytest.approx(top, rel=1e-6)


def test_two_sentences_and_the_coreference_preset_compare_norms_on_one_colour_range(minilm_norms):
    _, tired = minilm_norms
    wide_result, wide = norms_of("minilm", WIDE)
    at = app(model="minilm", text=TIRED, view="compare", mode="sentences", text_b=WIDE, weighting="norms")
    row_a, row_b, a, b, diff = charts(at)
    assert not at.exception and all("value-weighted norms" in title(f) for f in (row_a, row_b, a, b, diff))
    it = [label.lower() for label in wide_result.tokens.labels].index("it")
    shares = lambda x: x[:, :, it] / x[:, :, it].sum(-1, keepdims=True)  # noqa: E731
    move = 0.5 * np.abs(shares(tired) - shares(wide)).sum(-1)  # the table ranks the heads by the drawn quantity
    layer, head = divmod(int(np.argmax(move)), move.shape[1])
    assert f"layer {layer}, head {head}" in title(a)  # the page opens on the head that moved most
    np.testing.assert_allclose(z(a), tired[layer, head], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(z(b), wide[layer, head], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(z(row_a)[0], tired[layer, head, it], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(z(diff), tired[layer, head] - wide[layer, head], atol=1e-6)
    assert len({f["data"][0]["zmax"] for f in (row_a, row_b, a, b)}) == 1

    at.radio(key="compare_mode").set_value("coreference").run()
    tired_row, wide_row, *_ = charts(at)
    assert not at.exception and "value-weighted norms" in title(tired_row)
    assert f"layer {layer}, head {head}" in title(tired_row)  # the preset fills the same two sentences
    np.testing.assert_allclose(z(wide_row)[0], wide[layer, head, it], rtol=1e-6, atol=1e-7)


def test_cross_attention_of_toy_translate_draws_its_norms():
    backend = load_backend("toy-translate")
    at = app(model="toy-translate", text=TOY, view="head", group="cross", weighting="norms", layer="0", head="2")
    assert not at.exception and not at.error
    head, *_beside = charts(at)
    # the page's run is greedy on the same text: the same translation, so the same arrays
    result = backend.run(TOY, kinds=("v", "pattern"))
    expected = value_norm_arrays(result, backend.output_projection)[hook_name(CROSS, 0, "value_norm")][2]
    assert colour_bar(head) == "value-weighted norm"
    np.testing.assert_allclose(z(head), expected, rtol=1e-6, atol=1e-7)


def test_the_choice_is_in_the_link_and_a_link_reopens_it():
    at = app(model="minilm", text=TIRED, view="grid")
    assert at.radio(key="weighting").value == "weights" and link(at)["weighting"] == "weights"
    assert colour_bar(charts(at)[0]) == "attention weight" and "value-weighted" not in title(charts(at)[1])
    at.radio(key="weighting").set_value("norms").run()
    assert link(at)["weighting"] == "norms"
    reopened = app(**link(at))
    assert reopened.radio(key="weighting").value == "norms" and "value-weighted norms" in title(charts(reopened)[1])
    assert app(model="minilm", text=TIRED, view="head", weighting="bogus").radio(key="weighting").value == "weights"


@pytest.mark.parametrize("view", ["head", "grid", "focus", "layers", "compare"])
def test_a_model_without_values_or_w_o_says_so_and_draws_the_weights(view):
    at = app(model="toy-translate-rnn", text=TOY, view=view, weighting="norms")
    assert not at.exception and not at.error
    said = " ".join(c.value for c in at.caption)
    assert "does not give the values and the output projection" in said and "showing attention weights" in said
    shown = charts(at)
    assert shown or at.info  # the RNN has cross-attention only: the layers view says it needs a self-attention
    assert not any("value-weighted" in title(f) for f in shown)
    assert at.radio(key="weighting").value == "norms"  # the choice is kept for the next model


def test_an_hf_model_without_captured_values_falls_back_to_weights(tmp_path, monkeypatch):
    from benchmarks.families import save_family  # DeBERTa-v2: its attention bypasses transformers' registry

    save_family(tmp_path / "deberta", "deberta-v2")
    monkeypatch.setenv("ATTENTION_VIZ_MODEL_ROOTS", str(tmp_path))
    at = app(model=f"hf:{tmp_path / 'deberta'}", text="the cat sat on the mat", view="head", weighting="norms")
    assert not at.exception and not at.error
    assert any("showing attention weights" in c.value for c in at.caption)
    assert colour_bar(charts(at)[0]) == "attention weight"


# ------------------------------------------------------------------------------ plain functions


def tiny_result() -> tuple[AttentionResult, dict[str, np.ndarray]]:
    """Two heads over [CLS] a b [SEP], with made-up norms that are not a distribution."""
    tokens = Tokens(text="a b", ids=(1, 2, 3, 4), labels=("[CLS]", "a", "b", "[SEP]"),
                    offsets=(None, (0, 1), (2, 3), None), special=(True, False, False, True),
                    unknown=(False,) * 4, word_ids=(None, 0, 1, None))
    rng = np.random.default_rng(0)
    pattern = rng.dirichlet(np.ones(4), size=(2, 4)).astype(np.float32)
    norms = (pattern * rng.uniform(0.5, 3.0, size=(2, 1, 4))).astype(np.float32)
    result = AttentionResult("tiny", tokens, {hook_name(ENCODER_SELF, 0, "pattern"): pattern})
    return result, {hook_name(ENCODER_SELF, 0, "value_norm"): norms}


def test_hiding_special_tokens_keeps_norms_as_they_are_but_renormalizes_weights():
    result, norms = tiny_result()
    shown = weighted(result, "norms", norms)
    plain = displayed(shown.result, Choice(hide_special=True, kind=shown.kind))
    np.testing.assert_array_equal(plain.matrix, norms[hook_name(ENCODER_SELF, 0, "value_norm")][0][1:3, 1:3])
    assert plain.query_labels == ["a", "b"] and "unchanged" in plain.notes[0]
    weights = displayed(result, Choice(hide_special=True))
    np.testing.assert_allclose(weights.matrix.sum(axis=1), 1.0, rtol=1e-6)


def test_weighted_falls_back_with_the_reason_and_shares_sum_to_one():
    result, norms = tiny_result()
    fallback = weighted(result, "norms", "no W_O here")
    assert fallback.weighting == "weights" and fallback.note == "no W_O here" and fallback.kind == "pattern"
    assert fallback.suffix == "" and fallback.quantity == "attention weight"
    shown = weighted(result, "norms", norms)
    assert isinstance(shown, Weighted) and shown.quantity == "value-weighted norm"
    np.testing.assert_allclose(shown.shares(ENCODER_SELF).sum(axis=-1), 1.0, rtol=1e-6)
    assert shown.result.arrays[hook_name(ENCODER_SELF, 0, "pattern")] is result.arrays[hook_name(ENCODER_SELF, 0, "pattern")]
    assert "does not give the values" in value_norms_or_reason(result, lambda group, layer: None)  # no v captured


def test_colour_scales_name_the_quantity_and_the_log_range_reaches_norms_above_one():
    matrix = np.array([[0.5, 2.0], [1e-6, 0.1]], np.float32)
    assert rescaled(matrix, "linear", "value-weighted norm")[1] == "value-weighted norm"
    assert rescaled(matrix, "log", "value-weighted norm")[1] == "log10 value-weighted norm"
    assert log_range(matrix) == pytest.approx((-4.0, np.log10(2.0)))
    assert log_range(matrix / 4) == (-4.0, 0.0)  # weights keep their fixed 10⁻⁴ … 1 range


def test_the_page_explains_the_weighting_and_sets_the_head_beside_its_weights(minilm_norms):
    result, norms = minilm_norms
    at = app(model="minilm", text=TIRED, view="head", weighting="norms", layer="3", head="1")
    said = " ".join(c.value.replace("\\", "") for c in at.caption)
    assert "‖α_ij f(x_j)‖" in said and "no longer sum to 1" in said
    main, weights, beside = charts(at)
    assert title(weights).endswith("attention weights") and title(beside).endswith("value-weighted norms")
    np.testing.assert_allclose(z(weights).sum(axis=1), 1.0, atol=1e-5)  # the weights' rows sum to 1
    np.testing.assert_allclose(z(beside), norms[3, 1], rtol=1e-4, atol=1e-6)  # the norms' do not
    assert np.ptp(z(beside).sum(axis=1)) > 0.1
    np.testing.assert_allclose(z(beside), z(main), rtol=1e-6)  # the same head as the main figure

    plain = app(model="minilm", text=TIRED, view="head", layer="3", head="1")
    assert len(charts(plain)) == 1  # the weights alone: nothing to set beside them
    assert "Each row sums to 1" in " ".join(c.value.replace("\\", "") for c in plain.caption)
