"""Value-weighted norms (Kobayashi et al. 2020) equal a brute-force ‖α_ij (x_j W_V^h + b_V^h) W_O^h‖."""

import numpy as np
import pytest
import torch

from attention_viz.analysis.value_norms import normalized_rows, transformed_norms, value_norm_arrays, value_norms
from attention_viz.backends.ours import output_projection
from attention_viz.backends.registry import load_backend
from attention_viz.core.hooks import capture
from attention_viz.core.model import Transformer, TransformerConfig
from attention_viz.core.names import DECODER_SELF, ENCODER_SELF, hook_name


def brute_force(x: torch.Tensor, attn, pattern: np.ndarray) -> np.ndarray:
    """Per (head, i, j), straight from the formula, in float64, one pair at a time."""
    h, d_k = attn.h, attn.d_k
    W_V, b_V = attn.w_v.weight.double().T, attn.w_v.bias.double()  # x W_V + b_V
    W_O = attn.w_o.weight.double().T  # (h·d_k, d_model)
    x = x.double()
    out = np.zeros(pattern.shape)
    for head in range(h):
        cols = slice(head * d_k, (head + 1) * d_k)
        for j in range(x.shape[0]):
            f = (x[j] @ W_V[:, cols] + b_V[cols]) @ W_O[cols]
            for i in range(pattern.shape[1]):
                out[head, i, j] = torch.linalg.vector_norm(float(pattern[head, i, j]) * f).item()
    return out


@pytest.mark.parametrize("shape", ["encoder-only", "decoder-only"])
def test_equals_brute_force_on_our_attention(shape):
    torch.manual_seed(0)
    config = TransformerConfig(shape=shape, vocab_size=30, d_model=24, h=3, d_ff=32, N=2, dropout=0.0)
    model = Transformer(config).eval()
    ids = torch.randint(0, 30, (1, 9))
    part = "encoder" if shape == "encoder-only" else "decoder"
    group = ENCODER_SELF if part == "encoder" else DECODER_SELF
    stack = getattr(model, part)
    with torch.no_grad(), capture(kinds=("v", "pattern")) as rec:
        model(ids)
        x = stack.embed(ids)[0]
    for layer in range(2):
        attn = stack.layers[layer].self_attn
        pattern = rec[hook_name(group, layer, "pattern")][0].numpy()
        v = rec[hook_name(group, layer, "v")][0].numpy()
        got = value_norms(pattern, v, output_projection(model, group, layer))
        if layer == 0:  # the first layer reads the embeddings, which we have here
            np.testing.assert_allclose(got, brute_force(x, attn, pattern), atol=1e-5, rtol=1e-5)
        assert got.shape == pattern.shape and got.dtype == np.float32
        if shape == "decoder-only":  # causal: exactly 0 where the weight is exactly 0
            assert not np.triu(got, 1).any()


def test_minilm_layers_equal_brute_force():
    backend = load_backend("minilm")
    text = "The animal didn't cross the street because it was too tired."
    result = backend.run(text, kinds=("v", "pattern"))
    arrays = value_norm_arrays(result, backend.output_projection)
    assert set(arrays) == {hook_name(ENCODER_SELF, i, "value_norm") for i in range(6)}
    model = backend.model
    ids = torch.tensor([result.tokens.ids])
    with torch.no_grad():
        x = model.encoder.embed(ids)
        for layer in range(3):  # layer inputs: the embeddings, then each layer's output
            expected = brute_force(x[0], model.encoder.layers[layer].self_attn, result.pattern(ENCODER_SELF, layer))
            np.testing.assert_allclose(arrays[hook_name(ENCODER_SELF, layer, "value_norm")], expected, atol=1e-5, rtol=1e-5)
            x = model.encoder.layers[layer](x, None)


def test_cls_gets_much_weight_but_little_norm_on_minilm():
    """The finding of Kobayashi et al. on BERT, here on MiniLM's sink ([CLS]): much weight, small vectors."""
    backend = load_backend("minilm")
    result = backend.run("The cat sat on the mat because it was warm.", kinds=("v", "pattern"))
    arrays = value_norm_arrays(result, backend.output_projection)
    weight_share = np.mean([result.pattern(ENCODER_SELF, i)[:, 1:-1, 0].mean() for i in range(6)])
    norm_share = np.mean(
        [normalized_rows(arrays[hook_name(ENCODER_SELF, i, "value_norm")])[:, 1:-1, 0].mean() for i in range(6)]
    )
    assert norm_share < weight_share / 2, (weight_share, norm_share)


def test_refuses_what_does_not_fit():
    with pytest.raises(ValueError):
        transformed_norms(np.zeros((2, 3, 4)), np.zeros((6, 5)))
    with pytest.raises(ValueError):
        value_norms(np.zeros((2, 3, 4)), np.zeros((2, 3, 4)), np.zeros((8, 5)))


def test_unknown_output_projection_is_refused():
    backend = load_backend("minilm")
    result = backend.run("a short text", kinds=("v", "pattern"))
    with pytest.raises(ValueError, match="output projection"):
        value_norm_arrays(result, lambda group, layer: None)
    without_v = backend.run("a short text")
    with pytest.raises(ValueError, match="values"):
        value_norm_arrays(without_v, backend.output_projection)


def test_normalized_rows_sum_to_one_or_stay_zero():
    norms = np.array([[[1.0, 3.0], [0.0, 0.0]]], np.float32)
    out = normalized_rows(norms)
    np.testing.assert_allclose(out[0, 0], [0.25, 0.75])
    assert not out[0, 1].any()
