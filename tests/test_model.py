"""The from-scratch Transformer: parity with torch's MultiheadAttention, the three shapes, and the
invariants of attention (rows sum to 1, causality, padding, permutation equivariance)."""

import pytest
import torch
from torch import nn

from attention_viz.core.hooks import capture, name_hook_points
from attention_viz.core.model import MultiHeadAttention, Transformer, TransformerConfig

SMALL = dict(vocab_size=50, d_model=32, h=4, d_ff=64, N=2, max_len=64, dropout=0.0)


def build(shape: str, seed: int = 0, **overrides) -> Transformer:
    torch.manual_seed(seed)
    return Transformer(TransformerConfig(shape=shape, **{**SMALL, **overrides})).eval()


def ids(*rows: list[int]) -> torch.Tensor:
    return torch.tensor(rows)


def test_multi_head_attention_equals_torch_multihead_attention():
    torch.manual_seed(1)
    ours = MultiHeadAttention(32, 4).eval()
    name_hook_points(ours)  # a standalone module: its hook points are named "q", ..., "pattern"
    theirs = nn.MultiheadAttention(32, 4, batch_first=True).eval()
    with torch.no_grad():
        theirs.in_proj_weight.copy_(torch.cat([ours.w_q.weight, ours.w_k.weight, ours.w_v.weight]))
        theirs.in_proj_bias.copy_(torch.cat([ours.w_q.bias, ours.w_k.bias, ours.w_v.bias]))
        theirs.out_proj.weight.copy_(ours.w_o.weight)
        theirs.out_proj.bias.copy_(ours.w_o.bias)
    query, memory = torch.randn(2, 5, 32), torch.randn(2, 7, 32)
    allowed = torch.tensor([[True] * 7, [True] * 4 + [False] * 3])
    with torch.no_grad(), capture() as cap:
        out = ours(query, memory, memory, allowed[:, None, None, :])
    expected, weights = theirs(query, memory, memory, key_padding_mask=~allowed, average_attn_weights=False)
    assert (out - expected).abs().max() <= 1e-6
    assert (cap["pattern"] - weights).abs().max() <= 1e-6


@pytest.mark.parametrize(
    "bad, message",
    [
        (dict(d_model=30, h=4), "divisible"),
        (dict(shape="decoder-only-ish"), "shape"),
        (dict(dropout=1.5), "dropout"),
        (dict(N=0), "N must be positive"),
        (dict(activation="swish"), "activation"),
        (dict(norm="middle"), "norm"),
    ],
)
def test_config_is_validated(bad, message):
    with pytest.raises(ValueError, match=message):
        TransformerConfig(**{**SMALL, **bad})


def test_config_is_frozen():
    with pytest.raises(AttributeError):
        TransformerConfig(**SMALL).d_model = 64


def test_three_shapes_have_the_right_hook_points():
    enc = build("encoder-only").hook_names
    dec = build("decoder-only").hook_names
    encdec = build("encoder-decoder").hook_names
    assert "encoder.layers.1.self_attn.pattern" in enc and not any(n.startswith("decoder") for n in enc)
    assert "decoder.layers.1.self_attn.q" in dec and not any("cross_attn" in n or "encoder" in n for n in dec)
    assert {"encoder.layers.0.self_attn.k", "decoder.layers.1.cross_attn.scores"} <= set(encdec)
    # six kinds × (2 encoder + 2 decoder self + 2 cross), the residual stream entering each of the 4 layers,
    # and in the 2 decoder layers the stream entering the feed-forward sublayer and leaving the layer
    assert len(encdec) == 6 * (2 + 2 * 2) + 4 + 2 * 2
    assert {"encoder.layers.1.resid_pre", "decoder.layers.0.resid_pre"} <= set(encdec)


@pytest.mark.parametrize("shape", ["encoder-only", "decoder-only", "encoder-decoder"])
@pytest.mark.parametrize("norm", ["post", "pre"])
def test_every_pattern_row_sums_to_one(shape, norm):
    model = build(shape, norm=norm, positional="learned" if norm == "pre" else "sinusoidal")
    src = torch.randint(0, 50, (2, 9))
    with torch.no_grad(), capture() as cap:
        model(src, src[:, :6] if shape == "encoder-decoder" else None)
    assert cap.names_recorded()
    for name in cap.names_recorded():
        torch.testing.assert_close(cap[name].sum(-1), torch.ones(cap[name].shape[:-1]))


@pytest.mark.parametrize("shape", ["decoder-only", "encoder-decoder"])
def test_causal_upper_triangle_is_exactly_zero(shape):
    model = build(shape)
    src = torch.randint(0, 50, (1, 8))
    with torch.no_grad(), capture(kinds=("pattern", "scores")) as cap:
        model(src, src)
    upper = torch.ones(8, 8, dtype=torch.bool).triu(1)
    for i in range(2):
        assert (cap[f"decoder.layers.{i}.self_attn.pattern"][..., upper] == 0).all()
        assert torch.isneginf(cap[f"decoder.layers.{i}.self_attn.scores"][..., upper]).all()


@pytest.mark.parametrize("shape", ["decoder-only", "encoder-decoder"])
def test_future_tokens_change_nothing_before_them(shape):
    model = build(shape)
    src = torch.randint(4, 50, (1, 10))
    tgt_a = torch.randint(4, 50, (1, 10))
    t = 5
    tgt_b = tgt_a.clone()
    tgt_b[0, t + 1 :] = (tgt_a[0, t + 1 :] + 7) % 50  # change only what comes after position t
    outputs, patterns = [], []
    for tgt in (tgt_a, tgt_b):
        with torch.no_grad(), capture(kinds=("pattern",), names=["decoder.*"]) as cap:
            outputs.append(model(src, tgt))
        patterns.append(cap)
    assert (outputs[0][:, : t + 1] == outputs[1][:, : t + 1]).all()
    assert not torch.allclose(outputs[0][:, t + 1 :], outputs[1][:, t + 1 :])
    for name in patterns[0].names_recorded():
        a, b = patterns[0][name], patterns[1][name]
        if "self_attn" in name:
            assert (a[..., : t + 1, :] == b[..., : t + 1, :]).all(), name
        else:  # cross-attention: rows of the unchanged prefix are unchanged
            assert (a[..., : t + 1, :] == b[..., : t + 1, :]).all(), name


def test_padded_keys_receive_exactly_zero_and_padding_does_not_change_real_tokens():
    model = build("encoder-decoder")
    src = torch.randint(4, 50, (2, 7))
    src[1, 4:] = 0
    tgt = torch.randint(4, 50, (2, 5))
    src_padding = torch.tensor([[True] * 7, [True] * 4 + [False] * 3])
    with torch.no_grad(), capture() as cap:
        padded_out = model(src, tgt, src_padding=src_padding)
    for name in ("encoder.layers.0.self_attn.pattern", "decoder.layers.1.cross_attn.pattern"):
        assert (cap[name][1, :, :, 4:] == 0).all()
        assert (cap[name][0, :, :, 4:] > 0).all()
    with torch.no_grad():
        alone = model(src[1:, :4], tgt[1:])
    assert (padded_out[1] - alone[0]).abs().max() < 1e-5


def test_encoder_without_positions_is_permutation_equivariant_and_with_them_is_not():
    model = build("encoder-only", positional="sinusoidal")
    x = torch.randint(0, 50, (1, 8))
    perm = torch.tensor([3, 0, 7, 1, 6, 2, 5, 4])
    for use_positions, equivariant in ((False, True), (True, False)):
        with torch.no_grad(), capture() as cap_a:
            out_a = model(x, use_positions=use_positions)
        with torch.no_grad(), capture() as cap_b:
            out_b = model(x[:, perm], use_positions=use_positions)
        name = "encoder.layers.1.self_attn.pattern"
        permuted_pattern = cap_a[name][..., perm, :][..., :, perm]
        assert torch.allclose(out_a[:, perm], out_b, atol=1e-5) is equivariant
        assert torch.allclose(permuted_pattern, cap_b[name], atol=1e-6) is equivariant


def test_learned_positions_break_equivariance_too():
    model = build("encoder-only", positional="learned")
    x = torch.randint(0, 50, (1, 6))
    perm = torch.tensor([5, 4, 3, 2, 1, 0])
    with torch.no_grad():
        assert not torch.allclose(model(x)[:, perm], model(x[:, perm]), atol=1e-4)
        assert torch.allclose(
            model(x, use_positions=False)[:, perm], model(x[:, perm], use_positions=False), atol=1e-5
        )


def test_too_long_input_is_refused_with_a_message():
    model = build("encoder-only")
    with pytest.raises(ValueError, match="exceed the model's maximum of 64"):
        model(torch.zeros(1, 65, dtype=torch.long))


def test_greedy_decoding_is_deterministic_and_matches_teacher_forcing():
    model = build("encoder-decoder")
    src = torch.randint(4, 50, (1, 6))
    start = torch.tensor([[1]])
    first = model.greedy_decode(start, 8, eos_id=2, src=src)
    second = model.greedy_decode(start, 8, eos_id=2, src=src)
    assert torch.equal(first, second) and first.shape[1] > 1
    # teacher-forcing the generated sequence predicts the same tokens at every step
    with torch.no_grad():
        logits = model.logits(model(src, first[:, :-1]))
    assert torch.equal(logits.argmax(-1), first[:, 1:])


def test_decoder_only_generation_continues_the_prompt():
    model = build("decoder-only", positional="learned", norm="pre", tie_embeddings=True)
    prompt = torch.tensor([[5, 6, 7]])
    out = model.greedy_decode(prompt, 4)
    assert out.shape == (1, 7) and torch.equal(out[:, :3], prompt)
    assert model.decoder.generator.weight is model.decoder.embed.tokens.weight


@pytest.mark.parametrize("shape", ["encoder-only", "decoder-only", "encoder-decoder"])
def test_layers_nobody_looks_at_run_the_fused_kernel_and_make_no_weights(shape, monkeypatch):
    """Without a capture (or for the layers a capture leaves out) the forward runs PyTorch's fused
    attention: no (T, T) weights; the outputs are those of a forward that captures every pattern."""
    from attention_viz.core import attention, model as model_module

    model = build(shape).eval()
    src, tgt = ids([5, 6, 7, 8, 9, 10, 11]), ids([1, 2, 3, 4])
    run = (lambda: model(src)) if shape != "encoder-decoder" else (lambda: model(src, tgt))
    eager, weights = [], attention.scaled_dot_product_attention
    monkeypatch.setattr(model_module, "scaled_dot_product_attention",
                        lambda *a, **k: eager.append(1) or weights(*a, **k))
    with torch.inference_mode(), capture(kinds=("pattern",)) as recorded:
        everything = run()
    every_layer = len(eager)
    assert every_layer == len(recorded.names_recorded()) > 0
    eager.clear()
    with torch.inference_mode():
        fused = run()
    assert eager == []  # no weights made at all
    assert (fused - everything).abs().max() <= 1e-5
    with torch.inference_mode(), capture(kinds=("pattern",), names=["*layers.0.*"]) as recorded:
        run()
    assert len(eager) == len(recorded.names_recorded()) < every_layer  # only the layers asked for
    with torch.enable_grad():
        eager.clear()
        run()
        assert len(eager) == every_layer  # with gradients: the weights' own path, as training runs it
