"""Context mixing where the existing references did not reach, each against a computation written
here: value zeroing under a sliding window (transformers' own Mistral, the value projection's
output zeroed by a torch hook), on the decoder of an encoder–decoder model (the whole model re-run
with a plain torch hook on the decoder layer's W_V, the encoder memory untouched), the cells a query
cannot read exactly 0, the float32 rounding threshold from what float32 can resolve; and ALTI
under a mean ablation (Ferrando et al. 2022's decomposition in float64 with the removed heads'
constant joining the bias, checked against transformers' BERT with the ablation as a hook)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from transformers import AutoModelForCausalLM, MistralConfig, MistralForCausalLM

from attention_viz.analysis import alti as alti_module
from attention_viz.analysis.ablation import Ablation
from attention_viz.analysis.value_zeroing import cosine_distances, value_zeroing_map
from attention_viz.backends import mixing
from attention_viz.backends.mixing import context_mixing, mixing_arrays
from attention_viz.backends.registry import load_backend
from attention_viz.core.model import Transformer
from attention_viz.core.names import DECODER_SELF, ENCODER_SELF, hook_name
from attention_viz.trained.vocab import Vocab
from test_context_mixing import IDS, bert, direct_alti_post_ln  # noqa: F401  (bert: the module's fixture)
from test_ours_decoder import TEXT, save, save_tokenizer

WINDOW = 4


def _output(output) -> torch.Tensor:
    return output[0] if isinstance(output, tuple) else output


def zeroing_by_hand(run, value: torch.nn.Module, layer: torch.nn.Module, length: int) -> np.ndarray:
    """The paper's C_ij before normalization, float64: ``run()`` (a whole forward) once as it is and
    once per token j with row j of ``value``'s output zeroed (bias included, every head) by a forward
    hook; 1 − cos of ``layer``'s output, query by query."""
    seen: list[torch.Tensor] = []
    keep = layer.register_forward_hook(lambda m, a, out: seen.append(_output(out)[0].double()))
    try:
        with torch.no_grad():
            run()
            real = seen[-1]
            scores = np.zeros((length, length))
            for j in range(length):
                def zero(module, args, out, j=j):
                    out = out.clone()
                    out[:, j] = 0.0
                    return out

                handle = value.register_forward_hook(zero)
                try:
                    run()
                finally:
                    handle.remove()
                scores[:, j] = (1.0 - F.cosine_similarity(seen[-1], real, dim=-1)).numpy()
    finally:
        keep.remove()
    return np.clip(scores, 0.0, None)


def normalized(scores: np.ndarray) -> np.ndarray:
    return scores / scores.sum(axis=-1, keepdims=True)


def band(length: int, window: int | None) -> np.ndarray:
    """True where query i reads key j: j ≤ i, and within ``window`` positions (i − j < window)."""
    offset = np.arange(length)[:, None] - np.arange(length)[None, :]
    return (offset >= 0) & (offset < (window or length))


# -- a sliding window (Mistral) -------------------------------------------------------------------


@pytest.fixture(scope="module")
def mistral_folder(tmp_path_factory) -> str:
    folder = tmp_path_factory.mktemp("mistral")
    torch.manual_seed(0)
    n = save_tokenizer(folder)
    config = MistralConfig(vocab_size=n, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                           num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                           sliding_window=WINDOW, initializer_range=0.3)  # peaked patterns, maps far from uniform
    MistralForCausalLM(config).save_pretrained(folder)
    return str(folder)


def test_value_zeroing_under_a_sliding_window_matches_transformers_mistral_with_a_hook(mistral_folder):
    backend = load_backend(f"hf:{mistral_folder}")
    assert isinstance(backend.model, Transformer)  # ours: the maps below come from our runner
    ids = backend.tokenize(TEXT)[0].ids
    length = len(ids)
    assert length > 2 * WINDOW
    theirs = AutoModelForCausalLM.from_pretrained(mistral_folder, attn_implementation="eager").eval()
    inputs = torch.tensor([ids])
    with torch.no_grad():
        patterns = theirs(inputs, output_attentions=True).attentions
    assert not (patterns[0][0].numpy() * ~band(length, WINDOW)).any()  # transformers keeps the window
    maps = context_mixing(backend.model, ids, measures=("value_zeroing",))
    for index, layer in enumerate(theirs.model.layers):
        scores = zeroing_by_hand(lambda: theirs(inputs, use_cache=False), layer.self_attn.v_proj, layer, length)
        got = maps[hook_name(DECODER_SELF, index, "value_zeroing")]
        np.testing.assert_allclose(got, normalized(scores), rtol=0, atol=1e-4)
        assert not got[~band(length, WINDOW)].any()  # keys outside the window or in the future: exactly 0
        assert np.ptp(got) > 0.05


def test_what_rounding_leaves_where_a_query_cannot_read_never_reaches_the_map(mistral_folder, monkeypatch):
    """On a GPU the batched copies and the real run need not round alike, and float32 rounding leaves
    ~1e-8 of 1 − cos where zeroing changed nothing: added here to every cell, it must stay out of the
    cells outside the causal window (0) and change the rest by no more than its size."""
    backend = load_backend(f"hf:{mistral_folder}")
    ids = backend.tokenize(TEXT)[0].ids
    clean = context_mixing(backend.model, ids, measures=("value_zeroing",))
    rounded = lambda output, zeroed: cosine_distances(output, zeroed) + 1e-8  # noqa: E731
    monkeypatch.setattr(mixing, "cosine_distances", rounded)
    noisy = context_mixing(backend.model, ids, measures=("value_zeroing",))
    for name, got in noisy.items():
        assert not got[~band(len(ids), WINDOW)].any()
        np.testing.assert_allclose(got, clean[name], rtol=0, atol=1e-5)


def test_value_zeroing_of_a_decoder_running_in_transformers_reads_no_future_token(tmp_path, monkeypatch):
    """A Llama with dynamic rotary scaling runs in transformers (not ours): value zeroing through its
    v_proj hooks against the hooks written here, future keys exactly 0 even where rounding leaves some."""
    folder = save(tmp_path, "llama")
    config = folder / "config.json"
    config.write_text(config.read_text().replace('"rope_type": "default"', '"rope_type": "dynamic", "factor": 2.0'))
    backend = load_backend(f"hf:{folder}")
    assert backend.implementation == "transformers"
    result = backend.run(TEXT)
    length = len(result.tokens)
    got = mixing_arrays(backend, result, ("value_zeroing",))
    inputs = torch.tensor([result.tokens.ids])
    for index, layer in enumerate(backend.model.base_model.layers):  # the causal LM's decoder stack
        scores = zeroing_by_hand(lambda: backend.model(inputs, use_cache=False), layer.self_attn.v_proj, layer, length)
        np.testing.assert_allclose(got[hook_name(DECODER_SELF, index, "value_zeroing")], normalized(scores),
                                   rtol=0, atol=1e-4)
    monkeypatch.setattr(mixing, "cosine_distances", lambda output, zeroed: cosine_distances(output, zeroed) + 1e-8)
    for array in mixing_arrays(backend, result, ("value_zeroing",)).values():
        assert not np.triu(array, 1).any()


# -- the decoder of an encoder–decoder model ------------------------------------------------------


def test_value_zeroing_on_toy_translates_decoder_keeps_the_encoder_memory():
    """Zeroing a decoder token's values leaves the encoder's output alone: the reference re-runs the
    whole model (encoder included) with only the decoder layer's W_V output changed."""
    backend = load_backend("toy-translate")
    model = backend.model
    src = backend.tokenize("the law that the council signed .")[0].ids
    tgt = [Vocab.BOS, *backend.tgt_vocab.encode("la loi que le conseil a signée".split())]
    maps = context_mixing(model, src, tgt, measures=("value_zeroing",))
    args = (torch.tensor([src]), torch.tensor([tgt]))
    for index, layer in enumerate(model.decoder.layers):
        scores = zeroing_by_hand(lambda: model(*args), layer.self_attn.w_v, layer, len(tgt))
        got = maps[hook_name(DECODER_SELF, index, "value_zeroing")]
        np.testing.assert_allclose(got, normalized(scores), rtol=0, atol=1e-4)
        assert not np.triu(got, 1).any()  # causal: later targets exactly 0
        assert np.ptp(got) > 0.05
    assert hook_name(ENCODER_SELF, 0, "value_zeroing") in maps


# -- the rounding threshold -----------------------------------------------------------------------


def test_float32_rounding_is_zero_and_a_resolved_change_is_kept():
    """A float32 layer output recomputed differs from the first in its last bits: a relative change of
    about 1e-6 (a few units in the last place, 2^-23 ≈ 1.2e-7), 1 − cos ≈ ε²/2 ≈ 5e-13; that is no
    effect. A change of 1e-5 relative (a hundred units in the last place, 1 − cos ≈ 5e-11) is one.
    Query 0's row sees only rounding and stays 0 (not uniform noise); query 1's keeps its one effect."""
    rng = np.random.default_rng(0)
    length, d = 3, 64
    output = rng.normal(size=(length, d)).astype(np.float32)
    zeroed = np.repeat(output[None], length, axis=0).astype(np.float64)  # (J, T, d)

    def perturbed(x: np.ndarray, relative: float) -> np.ndarray:
        noise = rng.normal(size=x.shape)
        return x + relative * np.linalg.norm(x) * noise / np.linalg.norm(noise)

    for j in range(length):
        for i in range(length):
            zeroed[j, i] = perturbed(output[i].astype(np.float64), 1e-6)
    zeroed[2, 1] = perturbed(output[1].astype(np.float64), 1e-5)
    zeroed = zeroed.astype(np.float32)
    x, z = output.astype(np.float64), zeroed.astype(np.float64)
    distances = np.array([[1.0 - z[j, i] @ x[i] / (np.linalg.norm(z[j, i]) * np.linalg.norm(x[i]))
                           for j in range(length)] for i in range(length)])
    effect = np.zeros((length, length), bool)
    effect[1, 2] = True
    assert distances[effect] > 2e-11 and distances[~effect].max() < 1e-12  # ε²/2, as planned
    np.testing.assert_allclose(cosine_distances(output, zeroed), distances, rtol=0, atol=1e-15)
    got = value_zeroing_map(distances)
    assert not got[0].any() and not got[2].any()  # rounding alone: 0, not a uniform row
    np.testing.assert_array_equal(got[1], [0.0, 0.0, 1.0])


# -- ALTI under a mean ablation -------------------------------------------------------------------


def alti_mean_ablated_by_hand(hf, ids: list[int], layer: int, removed: dict[int, torch.Tensor]) -> np.ndarray:
    """ALTI of one post-LN BERT block, float64, with heads ``removed`` (head → its constant context,
    d_k) giving every query that constant instead of their mix: m_h W_O^h joins b_O, no token's share.
    The block's output is also read from transformers' own forward with the ablation as a pre-hook
    on W_O, and the decomposition has to sum to it."""
    hf = hf.double()
    try:
        block = hf.encoder.layer[layer].attention
        wq, wk, wv = block.self.query, block.self.key, block.self.value
        wo, ln = block.output.dense, block.output.LayerNorm
        heads, d = hf.config.num_attention_heads, hf.config.hidden_size
        d_k, length = d // heads, len(ids)
        seen = {}

        def ablate(module, args):
            merged = args[0].clone()
            for head, constant in removed.items():
                merged[..., head * d_k : (head + 1) * d_k] = constant.double()
            return (merged,)

        handles = [wo.register_forward_pre_hook(ablate),
                   block.output.register_forward_hook(lambda m, a, out: seen.__setitem__("y", out[0]))]
        try:
            with torch.no_grad():
                x = hf(torch.tensor([ids]), output_hidden_states=True).hidden_states[layer][0]  # (T, d)
        finally:
            for handle in handles:
                handle.remove()
        with torch.no_grad():
            q, k, v = (w(x).view(length, heads, d_k) for w in (wq, wk, wv))
            alpha = torch.softmax(torch.einsum("ihd,jhd->hij", q, k) / d_k**0.5, dim=-1)
            W_O = wo.weight.T.view(heads, d_k, d)
            f = torch.einsum("jhk,hkd->hjd", v, W_O)
            kept = [h for h in range(heads) if h not in removed]
            bias = wo.bias + sum(removed[h].double() @ W_O[h] for h in removed)
            out = np.zeros((length, length))
            for i in range(length):
                mixed = [sum(alpha[h, i, j] * f[h, j] for h in kept) + (x[i] if j == i else 0.0) for j in range(length)]
                z_tilde = sum(mixed) + bias
                sigma = torch.sqrt(z_tilde.var(unbiased=False) + ln.eps)
                y = F.layer_norm(z_tilde, (d,), ln.weight, ln.bias, ln.eps)
                torch.testing.assert_close(y, seen["y"][i])  # the decomposition is transformers' ablated output

                def L(u: torch.Tensor) -> torch.Tensor:
                    return (u - u.mean()) / sigma * ln.weight

                for j in range(length):
                    out[i, j] = max(0.0, float(y.abs().sum() - (y - L(mixed[j])).abs().sum()))
        return normalized(out)
    finally:
        hf.float()


def test_alti_under_a_mean_ablation_matches_the_papers_decomposition(bert):
    hf, ours = bert
    layer, heads, d_k = 1, (0, 2), hf.config.hidden_size // hf.config.num_attention_heads
    means = np.random.default_rng(0).normal(0.0, 1.0, (hf.config.num_attention_heads, d_k)).astype(np.float32)
    ablation = Ablation(tuple((ENCODER_SELF, layer, h) for h in heads), mode="mean",
                        means={hook_name(ENCODER_SELF, layer, "context"): means})
    got = context_mixing(ours, IDS, measures=("alti",), ablation=ablation)[hook_name(ENCODER_SELF, layer, "alti")]
    expected = alti_mean_ablated_by_hand(hf, IDS, layer, {h: torch.from_numpy(means[h]) for h in heads})
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-4)
    zero = context_mixing(ours, IDS, measures=("alti",), ablation=Ablation(ablation.heads))
    assert np.abs(zero[hook_name(ENCODER_SELF, layer, "alti")] - got).max() > 1e-3  # the constant matters here


def test_alti_a_few_queries_at_a_time_is_the_papers_alti(bert, monkeypatch):
    """Long inputs are decomposed in blocks of query rows: with two rows a block (a block boundary
    inside every text) each layer is still the paper's formulas, written out in float64."""
    hf, ours = bert
    monkeypatch.setattr(alti_module, "BLOCK_ELEMENTS", 2 * len(IDS) * hf.config.hidden_size)
    maps = context_mixing(ours, IDS, measures=("alti",))
    for layer in range(hf.config.num_hidden_layers):
        expected = direct_alti_post_ln(hf, IDS, layer)
        np.testing.assert_allclose(maps[hook_name(ENCODER_SELF, layer, "alti")], expected, rtol=0, atol=1e-4)
