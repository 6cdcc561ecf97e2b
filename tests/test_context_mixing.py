"""Value zeroing (Mohebbi et al. 2023) and ALTI (Ferrando et al. 2022) against independent
computations: value zeroing against transformers' BertModel with the value projection's output
zeroed one token at a time by a forward hook, ALTI against the paper's formulas written out here in
float64 with explicit loops; the command line and the notebook API save them under their names."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from attention_viz.analysis.alti import rollout_maps
from attention_viz.backends.mixing import context_mixing, mixing_arrays
from attention_viz.cli import main
from attention_viz.errors import ModelError
from attention_viz.core.hooks import capture, intervene
from attention_viz.core.model import Transformer, TransformerConfig
from attention_viz.core.names import DECODER_SELF, ENCODER_SELF, hook_name, layer_hook_name
from attention_viz.weights.bert import build_bert

transformers = pytest.importorskip("transformers")

IDS = [2, 17, 5, 33, 8, 41, 12, 9, 3]
SENTENCE = "The animal didn't cross the street because it was too tired."


@pytest.fixture(scope="module")
def bert():
    """A tiny random BertModel (eager attention) and the same weights in our encoder."""
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                                     intermediate_size=64, max_position_embeddings=32, attn_implementation="eager")
    hf = transformers.BertModel(config).eval()
    with torch.no_grad():  # the default init (std 0.02) mixes almost uniformly: give the weights some spread
        for name, parameter in hf.named_parameters():
            if "LayerNorm" not in name:
                parameter.normal_(0.0, 0.3)
            else:
                parameter.add_(0.2 * torch.randn_like(parameter))
    ours = build_bert(config.to_dict(), {k: v.clone() for k, v in hf.state_dict().items()}).eval()
    return hf, ours


def brute_force_value_zeroing(hf, ids: list[int], layer: int) -> np.ndarray:
    """C of one layer: the whole BertModel re-run once per token j, j's row of the value projection's
    output (bias included) zeroed by a forward hook; 1 − cos of layer l's output, rows normalized."""
    inputs = torch.tensor([ids])
    with torch.no_grad():
        real = hf(inputs, output_hidden_states=True).hidden_states[layer + 1][0].double()
    value = hf.encoder.layer[layer].attention.self.value
    scores = np.zeros((len(ids), len(ids)))
    for j in range(len(ids)):
        def zero(module, args, output, j=j):
            output = output.clone()
            output[:, j] = 0.0
            return output

        handle = value.register_forward_hook(zero)
        try:
            with torch.no_grad():
                zeroed = hf(inputs, output_hidden_states=True).hidden_states[layer + 1][0].double()
        finally:
            handle.remove()
        scores[:, j] = (1.0 - F.cosine_similarity(zeroed, real, dim=-1)).numpy()
    scores = np.clip(scores, 0.0, None)
    return scores / scores.sum(axis=-1, keepdims=True)


def test_value_zeroing_matches_transformers_with_the_value_zeroed_by_a_hook(bert):
    hf, ours = bert
    maps = context_mixing(ours, IDS, measures=("value_zeroing",))
    assert sorted(maps) == [hook_name(ENCODER_SELF, layer, "value_zeroing") for layer in range(3)]
    for layer in range(3):
        got = maps[hook_name(ENCODER_SELF, layer, "value_zeroing")]
        expected = brute_force_value_zeroing(hf, IDS, layer)
        assert got.shape == (len(IDS), len(IDS)) and got.dtype == np.float32
        np.testing.assert_allclose(got, expected, atol=1e-4)
        np.testing.assert_allclose(got.sum(axis=-1), 1.0, atol=1e-5)
        assert np.ptp(got) > 0.05  # not uniform: the comparison above can fail


def direct_alti_post_ln(hf, ids: list[int], layer: int) -> np.ndarray:
    """The paper's formulas for one post-LN BERT block, float64, one (i, j) at a time."""
    hf = hf.double()
    try:
        with torch.no_grad():
            x = hf(torch.tensor([ids]), output_hidden_states=True).hidden_states[layer][0]  # (T, d)
            block = hf.encoder.layer[layer].attention
            wq, wk, wv = block.self.query, block.self.key, block.self.value
            wo, ln = block.output.dense, block.output.LayerNorm
            heads, d = hf.config.num_attention_heads, hf.config.hidden_size
            d_k = d // heads
            T = len(ids)
            q, k, v = wq(x).view(T, heads, d_k), wk(x).view(T, heads, d_k), wv(x).view(T, heads, d_k)
            alpha = torch.softmax(torch.einsum("ihd,jhd->hij", q, k) / d_k**0.5, dim=-1)
            W_O = wo.weight.T.view(heads, d_k, d)  # x W_O, head h's rows
            f = torch.einsum("jhk,hkd->hjd", v, W_O)  # f^h(x_j) = (x_j W_V^h + b_V^h) W_O^h
            contributions = np.zeros((T, T))
            for i in range(T):
                z_tilde = sum(alpha[h, i, j] * f[h, j] for h in range(heads) for j in range(T)) + wo.bias + x[i]
                sigma = torch.sqrt(z_tilde.var(unbiased=False) + ln.eps)

                def L(u: torch.Tensor) -> torch.Tensor:
                    return (u - u.mean()) / sigma * ln.weight

                y = F.layer_norm(z_tilde, (d,), ln.weight, ln.bias, ln.eps)  # x̃_i, the block's output
                transformed = [L(sum(alpha[h, i, j] * f[h, j] for h in range(heads)) + (x[i] if j == i else 0.0))
                               for j in range(T)]
                # the decomposition holds: x̃_i = Σ_j T_i(x_j) + L_i(b_O) + β
                torch.testing.assert_close(sum(transformed) + L(wo.bias) + ln.bias, y)
                for j in range(T):
                    contributions[i, j] = max(0.0, float(-(y - transformed[j]).abs().sum() + y.abs().sum()))
            return contributions / contributions.sum(axis=-1, keepdims=True)
    finally:
        hf.float()


def test_alti_of_a_post_ln_encoder_matches_the_papers_formulas(bert):
    hf, ours = bert
    maps = context_mixing(ours, IDS, measures=("alti",))
    for layer in range(3):
        got = maps[hook_name(ENCODER_SELF, layer, "alti")]
        np.testing.assert_allclose(got, direct_alti_post_ln(hf, IDS, layer), atol=1e-4)
        np.testing.assert_allclose(got.sum(axis=-1), 1.0, atol=1e-5)
        assert (got >= 0).all() and np.ptp(got) > 0.05


DECODERS = {  # pre-LN decoder-only layouts of ours: GPT-2's, and Llama's (RMSNorm, grouped-query values, SwiGLU)
    "gpt2": dict(norm_type="layer", activation="gelu_tanh"),
    "llama": dict(norm_type="rms", n_kv_heads=2, activation="silu", gated_ffn=True, qkv_bias=False, out_bias=False,
                  ffn_bias=False),
}


@pytest.fixture(scope="module", params=list(DECODERS))
def decoder(request):
    """A tiny pre-LN decoder-only model of ours, seeded."""
    torch.manual_seed(1)
    config = TransformerConfig(shape="decoder-only", vocab_size=50, d_model=24, h=4, d_ff=48, N=2, max_len=32,
                               positional="learned", norm="pre", dropout=0.0, scale_embeddings=False,
                               **DECODERS[request.param])
    model = Transformer(config).eval()
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "norm" in name:
                parameter.add_(0.2 * torch.randn_like(parameter))
            else:
                parameter.normal_(0.0, 0.4)
    return model


def direct_alti_pre_ln(model: Transformer, ids: list[int], layer: int) -> np.ndarray:
    """ALTI of a pre-LN causal block, float64: x̃_i = x_i + Σ_j Σ_h α^h_ij f^h(LN(x_j)) + b_O, the norm
    inside each f; T_i(x_j) = Σ_h α^h_ij f^h(LN(x_j)) (+ x_i for j = i). Query head h reads value head
    h // (h / h_kv)."""
    wide = Transformer(model.config).double().eval()
    wide.load_state_dict(model.state_dict())
    with torch.no_grad(), capture(kinds=("resid_pre",)) as recorded:
        wide(torch.tensor([ids]))
    x = recorded[layer_hook_name("decoder", layer)][0]  # (T, d), float64
    block = wide.decoder.layers[layer]
    attn, ln = block.self_attn, block.sublayers[0].norm
    T, heads, kv_heads, d_k = len(ids), attn.h, attn.h_kv, attn.d_k
    with torch.no_grad():
        if isinstance(ln, torch.nn.RMSNorm):
            n = F.rms_norm(x, (x.size(-1),), ln.weight, ln.eps)
        else:
            n = F.layer_norm(x, (x.size(-1),), ln.weight, ln.bias, ln.eps)
        q = attn.w_q(n).view(T, heads, d_k)
        k = attn.w_k(n).view(T, kv_heads, d_k).repeat_interleave(heads // kv_heads, dim=1)
        v = attn.w_v(n).view(T, kv_heads, d_k).repeat_interleave(heads // kv_heads, dim=1)
        logits = torch.einsum("ihd,jhd->hij", q, k) / d_k**0.5
        logits = logits.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
        alpha = torch.softmax(logits, dim=-1)
        f = torch.einsum("jhk,hkd->hjd", v, attn.w_o.weight.T.view(heads, d_k, -1))
        b_o = 0.0 if attn.w_o.bias is None else attn.w_o.bias
        contributions = np.zeros((T, T))
        for i in range(T):
            transformed = [sum(alpha[h, i, j] * f[h, j] for h in range(heads)) + (x[i] if j == i else 0.0)
                           for j in range(T)]
            y = sum(transformed) + b_o
            for j in range(T):
                contributions[i, j] = max(0.0, float(-(y - transformed[j]).abs().sum() + y.abs().sum()))
    return contributions / contributions.sum(axis=-1, keepdims=True)


def test_alti_of_a_pre_ln_decoder_matches_the_papers_formulas(decoder):
    maps = context_mixing(decoder, IDS, measures=("alti",))
    for layer in range(2):
        got = maps[hook_name(DECODER_SELF, layer, "alti")]
        np.testing.assert_allclose(got, direct_alti_pre_ln(decoder, IDS, layer), atol=1e-4)
        assert not np.triu(got, 1).any()  # a causal block: nothing from later tokens


def test_value_zeroing_of_a_decoder_matches_one_zeroed_token_per_forward(decoder):
    """Brute force through the whole model of ours, one token zeroed per forward; the layer's output
    is the residual stream entering the next layer (the last layer's: the output before the final norm)."""
    maps = context_mixing(decoder, IDS, measures=("value_zeroing",))
    ids = torch.tensor([IDS])
    layer = 0
    with torch.no_grad(), capture(kinds=("resid_pre",)) as recorded:
        decoder(ids)
    real = recorded[layer_hook_name("decoder", layer + 1)][0].double()
    expected = np.zeros((len(IDS), len(IDS)))
    for j in range(len(IDS)):
        def zero(v, hook, j=j):
            v = v.clone()
            v[:, :, j] = 0.0
            return v

        with torch.no_grad(), intervene([(hook_name(DECODER_SELF, layer, "v"), zero)]), \
                capture(kinds=("resid_pre",)) as zeroed:
            decoder(ids)
        out = zeroed[layer_hook_name("decoder", layer + 1)][0].double()
        expected[:, j] = (1.0 - F.cosine_similarity(out, real, dim=-1)).numpy()
    expected = np.where(np.tril(np.ones_like(expected)) > 0, np.clip(expected, 0, None), 0.0)
    expected /= expected.sum(axis=-1, keepdims=True)
    got = maps[hook_name(DECODER_SELF, layer, "value_zeroing")]
    np.testing.assert_allclose(got, expected, atol=1e-4)
    assert not np.triu(got, 1).any()
    np.testing.assert_allclose(maps[hook_name(DECODER_SELF, 1, "value_zeroing")].sum(axis=-1), 1.0, atol=1e-5)


def test_rollout_multiplies_the_layers_and_keeps_rows_summing_to_one():
    rng = np.random.default_rng(0)
    maps = rng.random((3, 5, 5))
    maps /= maps.sum(axis=-1, keepdims=True)
    rolled = rollout_maps(maps)
    np.testing.assert_allclose(rolled[0], maps[0])
    np.testing.assert_allclose(rolled[2], maps[2] @ maps[1] @ maps[0])
    np.testing.assert_allclose(rolled.sum(axis=-1), 1.0)


def test_cli_flags_write_the_maps(tmp_path):
    out = tmp_path / "mixing.npz"
    assert main(["run", "--model", "minilm", "--text", SENTENCE, "--value-zeroing", "--alti", "--out", str(out)]) == 0
    data = np.load(out, allow_pickle=False)
    tokens = len(data["tokens"])
    for layer in range(6):
        for kind in ("value_zeroing", "alti"):
            array = data[hook_name(ENCODER_SELF, layer, kind)]
            assert array.shape == (tokens, tokens) and array.dtype == np.float32
            np.testing.assert_allclose(array.sum(axis=-1), 1.0, atol=1e-5)
    assert hook_name(ENCODER_SELF, 0, "pattern") in data.files
    assert not any(name.endswith((".v", "resid_pre")) for name in data.files)  # means, not results


def test_notebook_api_takes_the_measures():
    import attention_viz as av

    result = av.run("minilm", SENTENCE, mixing=("alti",))
    assert result.has(ENCODER_SELF, 5, "alti") and not result.has(ENCODER_SELF, 5, "value_zeroing")
    with pytest.raises(ModelError, match="unknown context-mixing measure"):
        av.run("minilm", SENTENCE, mixing=("attention_flow",))


@pytest.fixture(scope="module")
def hf_bert(tmp_path_factory):
    """A tiny BERT folder that ``hf:`` runs in transformers."""
    folder = tmp_path_factory.mktemp("bert")
    words = sorted(set(SENTENCE.lower().replace(".", " .").replace("'", " ' ").split()))
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]
    transformers.BertTokenizer(vocab={w: i for i, w in enumerate(vocab)}).save_pretrained(folder)
    torch.manual_seed(2)
    config = transformers.BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=64, max_position_embeddings=64, initializer_range=0.5)
    transformers.BertModel(config).save_pretrained(folder)
    return folder


def test_value_zeroing_through_transformers_hooks_matches_the_brute_force(hf_bert):
    from attention_viz.backends.registry import load_backend

    backend = load_backend(f"hf:{hf_bert}")
    assert backend.implementation == "transformers"
    result = backend.run(SENTENCE)
    maps = mixing_arrays(backend, result, ("value_zeroing",))
    for layer in range(2):
        got = maps[hook_name(ENCODER_SELF, layer, "value_zeroing")]
        np.testing.assert_allclose(got, brute_force_value_zeroing(backend.model, result.tokens.ids, layer), atol=1e-5)
        assert np.ptp(got) > 0.05
    # two sessions at once on the one shared model: each call's hooks act for that call only
    other = backend.run("the street was tired .")
    with ThreadPoolExecutor(2) as pool:
        both = list(pool.map(lambda r: mixing_arrays(backend, r, ("value_zeroing",)), [result, other] * 2))
    for name, array in maps.items():
        np.testing.assert_allclose(both[0][name], array, atol=1e-6)
        np.testing.assert_allclose(both[2][name], array, atol=1e-6)
    assert both[1][name].shape == (len(other.tokens), len(other.tokens))
    assert not backend.model.encoder.layer[0].attention.self.value._forward_hooks  # nothing left on the shared model
    # ALTI through our hook points in transformers' BERT equals ALTI of our own encoder on the same weights
    from attention_viz.backends.scratch import ScratchEncoderBackend

    ours = ScratchEncoderBackend.from_bert_folder("ours", hf_bert)
    alti_maps = mixing_arrays(backend, result, ("alti",))
    expected = context_mixing(ours.model, result.tokens.ids, measures=("alti",))
    assert sorted(alti_maps) == sorted(expected)
    for name, array in expected.items():
        np.testing.assert_allclose(alti_maps[name], array, atol=1e-5)


def test_a_model_without_our_attention_is_refused_in_one_sentence():
    from attention_viz.backends.registry import load_backend

    backend = load_backend("toy-translate-rnn")
    result = backend.run("the cat sleeps .")
    with pytest.raises(ModelError, match="toy-translate-rnn cannot give value zeroing or ALTI"):
        mixing_arrays(backend, result, ("alti",))


def test_the_views_draw_alti_and_value_zeroing_layer_by_layer():
    """The weighting choice offers both; every head of a layer draws its layer's map (and the page says
    so); the layers view composes them by plain products; a model without them falls back to weights."""
    from apphelpers import app, charts, switch_view
    from single_view import array

    from attention_viz.backends.registry import load_backend

    backend = load_backend("minilm")
    result = backend.run(SENTENCE)
    maps = mixing_arrays(backend, result, ("alti", "value_zeroing"))
    labels = [label.lower() for label in result.tokens.labels]
    it = labels.index("it")

    def z(figure: dict) -> np.ndarray:
        return array(figure["data"][0]["z"]).astype(np.float64)

    at = app(model="minilm", text=SENTENCE, view="head", weighting="alti", layer="3", head="1")
    assert not at.exception and at.radio(key="weighting").value == "alti"
    head, weights, beside = charts(at)  # the view, then the head's weights and ALTI side by side
    assert "ALTI" in head["layout"]["title"]["text"] and "attention weights" in weights["layout"]["title"]["text"]
    # a layer's map names the layer, never the head picked; the weights beside it are that head's
    assert head["layout"]["title"]["text"] == beside["layout"]["title"]["text"] == "layer 3 (the whole layer) · ALTI"
    assert weights["layout"]["title"]["text"] == "layer 3, head 1 · attention weights"
    np.testing.assert_allclose(z(head), maps[hook_name(ENCODER_SELF, 3, "alti")], rtol=1e-6, atol=1e-7)
    assert any("measures a whole layer, not a head" in c.value for c in at.caption)

    at.radio(key="weighting").set_value("value_zeroing").run()
    switch_view(at, "layers")
    rows, rolled, *_ = charts(at)
    assert not at.exception
    zeroing = np.stack([maps[hook_name(ENCODER_SELF, layer, "value_zeroing")] for layer in range(6)])
    np.testing.assert_allclose(z(rows), zeroing[:, it, :], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(z(rolled), rollout_maps(zeroing)[-1], rtol=1e-5, atol=1e-6)

    toy = app(model="toy-translate", text="the law was signed .", view="head", group="cross", weighting="alti")
    [cross] = charts(toy)  # cross-attention has no layer-level maps: its weights, said so
    assert not toy.exception and cross["data"][0]["colorbar"]["title"]["text"] == "attention weight"
    assert any("measures self" in c.value and "cross" in c.value for c in toy.caption)

    rnn = app(model="toy-translate-rnn", text="the law was signed .", view="head", group="cross", weighting="alti")
    assert not rnn.exception and rnn.radio(key="weighting").value == "alti"
    assert any("cannot give value zeroing or ALTI" in c.value for c in rnn.caption)


def test_the_views_stop_value_zeroing_past_their_token_limit():
    from attention_viz.analysis.weighting import ZEROING_TOKENS, mixing_or_reason, weighted
    from attention_viz.core.result import AttentionResult
    from attention_viz.inputs.tokens import from_words

    words = ["w"] * (ZEROING_TOKENS + 1)
    long = AttentionResult("minilm", from_words(words, list(range(len(words))), [False] * len(words)), {})

    def never(result, measures):
        raise AssertionError("value zeroing ran past the views' limit")

    reason = mixing_or_reason(long, never, "value_zeroing")
    assert reason.startswith("value zeroing re-runs every layer once per token") and str(len(words)) in reason
    shown = weighted(long, "value_zeroing", reason)
    assert shown.weighting == "weights" and shown.note == reason
    assert list(mixing_or_reason(long, lambda r, m: {"x": np.eye(2)}, "alti")) == ["x"]  # ALTI has no limit


def test_alti_under_an_ablation_leaves_the_removed_heads_out(bert):
    """Every head of layer 1 removed: the block's output is LN(x_i + b_O), so each token's
    contribution is its own (the identity); layer 0 is untouched; and zeroing layer 1's values
    changes nothing, so its value-zeroing map is 0 (not rounding noise normalized into rows)."""
    from attention_viz.analysis.ablation import Ablation

    _, ours = bert
    ablation = Ablation(tuple((ENCODER_SELF, 1, head) for head in range(4)))
    plain = context_mixing(ours, IDS)
    ablated = context_mixing(ours, IDS, ablation=ablation)
    np.testing.assert_allclose(ablated[hook_name(ENCODER_SELF, 1, "alti")], np.eye(len(IDS)), atol=1e-6)
    first = hook_name(ENCODER_SELF, 0, "alti")
    np.testing.assert_array_equal(ablated[first], plain[first])
    assert not np.allclose(ablated[hook_name(ENCODER_SELF, 2, "alti")], plain[hook_name(ENCODER_SELF, 2, "alti")])
    assert not ablated[hook_name(ENCODER_SELF, 1, "value_zeroing")].any()
    np.testing.assert_allclose(ablated[hook_name(ENCODER_SELF, 2, "value_zeroing")].sum(axis=-1), 1.0, atol=1e-5)
