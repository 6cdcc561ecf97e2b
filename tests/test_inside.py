"""inside_head: the hand computation of one head equals what the real model computes (minilm)."""

import numpy as np
import pytest
import torch

from attention_viz.backends.registry import load_backend
from attention_viz.figures.inside import row_entropy, row_max
from attention_viz.core.hooks import capture
from attention_viz.backends.inside import inside_head, layer_input

TEXT = "The animal didn't cross the street because it was too tired."
KINDS = ("q", "k", "v", "scores", "pattern", "context")


@pytest.fixture(scope="module")
def minilm():
    return load_backend("minilm")


@pytest.fixture(scope="module")
def ids(minilm):
    tokens, _ = minilm.tokenize(TEXT)
    return list(tokens.ids)


def reference(model, ids, layer):
    """Hook captures of one layer, and the attention sublayer's output (a forward hook, test only)."""
    outputs = []
    attn = model.encoder.layers[layer].self_attn
    handle = attn.register_forward_hook(lambda module, args, out: outputs.append(out.detach().clone()))
    try:
        with torch.inference_mode(), capture(kinds=None, names=[f"encoder.layers.{layer}.self_attn.*"]) as rec:
            model(torch.tensor([ids]))
    finally:
        handle.remove()
    arrays = {kind: rec[f"encoder.layers.{layer}.self_attn.{kind}"][0].numpy() for kind in KINDS}
    return arrays, outputs[0][0].numpy()


@pytest.mark.parametrize("layer,head", [(0, 0), (2, 7), (5, 11)])
def test_hand_computation_equals_the_hooks_and_the_layer_output(minilm, ids, layer, head):
    captured, output = reference(minilm.model, ids, layer)
    ih = inside_head(minilm.model, ids, layer, head)
    for kind in KINDS:
        np.testing.assert_allclose(getattr(ih, kind), captured[kind][head], atol=1e-5, err_msg=kind)
    np.testing.assert_allclose(ih.output, output, atol=1e-5)
    # every head's context, side by side, is the concatenation
    for h in range(ih.h):
        np.testing.assert_allclose(ih.concat[:, h * ih.d_k:(h + 1) * ih.d_k], captured["context"][h], atol=1e-5)


def test_weights_are_the_heads_slices_in_paper_orientation(minilm, ids):
    ih = inside_head(minilm.model, ids, 1, 4)
    x = ih.x.astype(np.float64)
    np.testing.assert_allclose(x @ ih.w_q + ih.b_q, ih.q, atol=1e-4)
    np.testing.assert_allclose(x @ ih.w_k + ih.b_k, ih.k, atol=1e-4)
    np.testing.assert_allclose(x @ ih.w_v + ih.b_v, ih.v, atol=1e-4)
    np.testing.assert_allclose(ih.concat.astype(np.float64) @ ih.w_o + ih.b_o, ih.output, atol=1e-4)
    np.testing.assert_allclose(ih.scores, ih.scores_raw / np.sqrt(ih.d_k), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ih.pattern.sum(-1), 1.0, atol=1e-5)
    assert ih.mask.all() and ih.mask.shape == (ih.n, ih.n)  # one sentence: nothing masked


def test_layer_input_is_the_previous_layers_output(minilm, ids):
    model = minilm.model
    x0 = layer_input(model, torch.tensor([ids]), 0)
    with torch.inference_mode():
        x1 = model.encoder.layers[0](x0, None)
    torch.testing.assert_close(layer_input(model, torch.tensor([ids]), 1), x1)


def test_without_scaling_scores_are_qkt_and_the_pattern_is_more_peaked(minilm, ids):
    for layer, head in [(0, 0), (3, 5), (5, 2)]:
        scaled = inside_head(minilm.model, ids, layer, head, scale=True)
        raw = inside_head(minilm.model, ids, layer, head, scale=False)
        assert not raw.scale
        # unscaled scores are q·kᵀ itself, computed here from the head's own q and k
        np.testing.assert_allclose(raw.scores, raw.q.astype(np.float64) @ raw.k.astype(np.float64).T, rtol=1e-5, atol=1e-4)
        np.testing.assert_allclose(scaled.scores * np.sqrt(scaled.d_k), raw.scores, rtol=1e-5, atol=1e-4)
        np.testing.assert_allclose(raw.scores_raw, scaled.scores_raw, atol=1e-6)
        np.testing.assert_allclose(raw.q, scaled.q, atol=0)
        # softmax(√d·s) is at least as peaked as softmax(s), row by row
        assert np.all(row_max(raw.pattern) >= row_max(scaled.pattern) - 1e-6)
        assert np.all(row_entropy(raw.pattern) <= row_entropy(scaled.pattern) + 1e-6)


def test_shapes_and_annotations(minilm, ids):
    ih = inside_head(minilm.model, torch.tensor(ids), 3, 1)
    n = len(ids)
    assert (ih.d_model, ih.h, ih.d_k) == (384, 12, 32)
    assert ih.x.shape == (n, 384) and ih.w_q.shape == ih.w_k.shape == ih.w_v.shape == (384, 32)
    assert ih.q.shape == ih.k.shape == ih.v.shape == ih.context.shape == (n, 32)
    assert ih.scores.shape == ih.pattern.shape == ih.raw_pattern.shape == (n, n)
    assert ih.concat.shape == ih.output.shape == ih.raw_context.shape == (n, 384)
    assert ih.w_o.shape == (384, 384) and ih.columns == slice(32, 64)
    eq = ih.equations()
    assert eq["q"] == f"X ({n}×384) · W_Q (384×32) + b_Q = Q ({n}×32)"
    assert "÷ √32" in eq["scores"] and f"({n}×{n})" in eq["scores_raw"]
    assert eq["output"] == f"Concat ({n}×384) · W_O (384×384) + b_O = output ({n}×384)"
    assert "not scaled" in inside_head(minilm.model, ids, 3, 1, scale=False).equations()["scores"]


def test_raw_self_attention_is_softmax_of_x_xt(minilm, ids):
    ih = inside_head(minilm.model, ids, 2, 0)
    x = ih.x.astype(np.float64)
    logits = x @ x.T
    expected = np.exp(logits - logits.max(-1, keepdims=True))
    expected /= expected.sum(-1, keepdims=True)
    np.testing.assert_allclose(ih.raw_pattern, expected, atol=1e-4)
    np.testing.assert_allclose(ih.raw_context, expected @ x, atol=1e-3)


def test_bad_arguments_are_refused(minilm, ids):
    with pytest.raises(ValueError, match="layer"):
        inside_head(minilm.model, ids, 6, 0)
    with pytest.raises(ValueError, match="head"):
        inside_head(minilm.model, ids, 0, 12)
