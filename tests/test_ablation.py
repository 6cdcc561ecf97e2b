"""Head ablation inside the forward: per call, exact, and measured."""

import threading

import numpy as np
import pytest
import torch

from attention_viz.analysis.ablation import (
    Ablation,
    embedding_cosine,
    loss_change,
    mean_contexts,
    parse_heads,
    random_head_sets,
    token_movement,
)
from attention_viz.backends.base import Backend
from attention_viz.backends.ours import removals
from attention_viz.backends.registry import load_backend
from attention_viz.errors import ModelError
from attention_viz.backends.head_effects import compare, coreference_study, make_ablation
from attention_viz.core.hooks import HeadRemoval, ablate, capture
from attention_viz.core.model import Transformer, TransformerConfig
from attention_viz.core.names import CROSS, DECODER_SELF, ENCODER_SELF, hook_name

TEXT = "The animal didn't cross the street because it was too tired."


@pytest.fixture(scope="module")
def minilm():
    return load_backend("minilm")


@pytest.fixture(scope="module")
def translate():
    return load_backend("toy-translate")


def test_removing_no_head_changes_nothing_bit_for_bit(minilm):
    plain, out = minilm.forward(TEXT, kinds=("pattern", "context"))
    for ablation in (Ablation(()), Ablation(((DECODER_SELF, 0, 0),))):  # a removal for an attention this encoder lacks
        if ablation.heads:
            with ablate(removals_for_other_model(ablation)):
                again, out_again = minilm.forward(TEXT, kinds=("pattern", "context"))
        else:
            again, out_again = minilm.forward(TEXT, kinds=("pattern", "context"), ablation=ablation)
        assert np.array_equal(out.hidden, out_again.hidden)
        for name, array in plain.arrays.items():
            assert np.array_equal(array, again.arrays[name]), name


def removals_for_other_model(ablation: Ablation) -> dict:
    """A removal keyed by a name this encoder has no attention for: must be ignored."""
    return {name: HeadRemoval(heads) for name, heads in ablation.by_context().items()}


def test_all_heads_of_a_layer_leave_only_the_output_bias(minilm):
    attn = minilm.model.encoder.layers[2].self_attn
    x = torch.randn(1, 7, 384, generator=torch.Generator().manual_seed(0))
    name = hook_name(ENCODER_SELF, 2, "context")
    with torch.no_grad(), ablate({name: HeadRemoval(range(attn.h))}):
        out = attn(x, x, x)
    assert torch.equal(out, attn.w_o.bias.expand_as(out))
    # in the whole model: the attention sublayer of layer 2 adds only b_O to its input
    ids = torch.tensor([minilm.tokenize(TEXT)[0].ids])
    layer = minilm.model.encoder.layers[2]
    with torch.no_grad():
        x = minilm.model.encoder.embed(ids)
        for earlier in minilm.model.encoder.layers[:2]:
            x = earlier(x, None)
        with ablate({name: HeadRemoval(range(attn.h))}):
            after_attention = layer.sublayers[0](x, lambda y: layer.self_attn(y, y, y, None))
    expected = layer.sublayers[0].norm(x + attn.w_o.bias)  # post-LN: Norm(x + Attention(x)) with Attention = b_O
    assert torch.equal(after_attention, expected)


def test_captured_context_is_what_the_output_projection_received():
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(shape="encoder-only", vocab_size=20, d_model=16, h=4, d_ff=16, N=1, dropout=0.0)).eval()
    attn = model.encoder.layers[0].self_attn
    x = torch.randn(1, 5, 16)
    name = hook_name(ENCODER_SELF, 0, "context")
    with torch.no_grad(), capture(kinds=("context",)) as plain:
        attn(x, x, x)
    mean_rows = torch.randn(2, 4)
    for removal in (HeadRemoval([1, 3]), HeadRemoval([1, 3], mean_rows)):
        with torch.no_grad(), ablate({name: removal}), capture(kinds=("context",)) as rec:
            out = attn(x, x, x)
        context = rec[name]
        expected_removed = torch.zeros(1, 2, 5, 4) if removal.replacement is None else mean_rows[None, :, None, :].expand(1, 2, 5, 4)
        assert torch.equal(context[:, [1, 3]], expected_removed)
        assert torch.equal(context[:, [0, 2]], plain[name][:, [0, 2]])
        concat = context.transpose(1, 2).reshape(1, 5, 16)
        assert torch.equal(out, attn.w_o(concat))


def test_concurrent_calls_with_different_ablations_never_mix(minilm):
    ablations = [None, Ablation(parse_heads("0.0,1.1", ENCODER_SELF)), Ablation(parse_heads("2.5,3.1,4.4", ENCODER_SELF))]
    serial = [minilm.forward(TEXT, kinds=("context",), ablation=a) for a in ablations]
    barrier = threading.Barrier(len(ablations) * 2)
    results: dict[int, list] = {}
    errors = []

    def work(slot: int) -> None:
        try:
            barrier.wait()
            results[slot] = [minilm.forward(TEXT, kinds=("context",), ablation=ablations[slot % 3]) for _ in range(3)]
        except Exception as error:  # pragma: no cover - reported below
            errors.append(error)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(ablations) * 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for slot, runs in results.items():
        expected_result, expected_out = serial[slot % 3]
        for result, out in runs:
            assert np.array_equal(out.hidden, expected_out.hidden)
            for name, array in expected_result.arrays.items():
                assert np.array_equal(array, result.arrays[name])
    # and the three really differ
    assert not np.array_equal(serial[0][1].hidden, serial[1][1].hidden)


def test_zero_ablation_zeroes_context_and_moves_the_embedding(minilm):
    ablation = Ablation(parse_heads("2.5,3.1", ENCODER_SELF))
    result, _ = minilm.forward(TEXT, kinds=("context",), ablation=ablation)
    assert not result.array(ENCODER_SELF, 2, "context")[5].any()
    assert result.array(ENCODER_SELF, 2, "context")[4].any()
    summary = compare(minilm, TEXT, ablation).summary()
    assert 0.9 < summary["embedding_cosine"] < 1.0
    assert len(summary["token_movement_list"]) == len(result.tokens)
    assert summary["ablation"]["heads"] == ["encoder 2.5", "encoder 3.1"]
    assert compare(minilm, TEXT, Ablation(())).summary()["embedding_cosine"] == pytest.approx(1.0, abs=1e-12)


def test_mean_ablation_uses_the_probe_mean(minilm):
    probes = minilm.probe_texts(4)
    ablation = make_ablation(minilm, parse_heads("1.2", ENCODER_SELF), "mean", probes)
    means = mean_contexts(minilm.run(t, kinds=("context",)) for t in probes)
    name = hook_name(ENCODER_SELF, 1, "context")
    np.testing.assert_array_equal(ablation.means[name], means[name])
    result, _ = minilm.forward(TEXT, kinds=("context",), ablation=ablation)
    context = result.array(ENCODER_SELF, 1, "context")
    np.testing.assert_array_equal(context[2], np.broadcast_to(means[name][2], context[2].shape))
    with pytest.raises(ValueError, match="mean context"):
        Ablation(parse_heads("1.2", ENCODER_SELF), "mean")


def test_bad_heads_are_refused(minilm):
    with pytest.raises(ModelError, match="no head encoder 6.0"):
        minilm.forward(TEXT, ablation=Ablation(parse_heads("6.0", ENCODER_SELF)))
    with pytest.raises(ModelError, match="no head encoder 0.12"):
        removals(minilm.model, Ablation(parse_heads("0.12", ENCODER_SELF)))
    for spec in ("2", "a.b", "2.5.1", "", "nowhere:1.1"):
        with pytest.raises(ValueError):
            parse_heads(spec, ENCODER_SELF)
    assert parse_heads("2.5, cross:1.0,decoder:0.3", ENCODER_SELF) == (
        (ENCODER_SELF, 2, 5), (CROSS, 1, 0), (DECODER_SELF, 0, 3)
    )
    with pytest.raises(ValueError, match="ablation must be"):
        Ablation((), "half")


def test_a_backend_that_cannot_ablate_says_so():
    class Other(Backend):
        name, shape, max_tokens, kinds = "other", "encoder-only", 8, ("pattern",)

        def tokenize(self, text):
            raise NotImplementedError

        def run(self, text, target=None, kinds=("pattern",)):
            raise NotImplementedError

    with pytest.raises(ModelError, match="cannot remove heads"):
        Other().forward("x", ablation=Ablation(()))
    assert Other().output_projection(ENCODER_SELF, 0) is None


def test_translation_before_and_after(translate):
    text = "the global public principle will be reduced ."
    cross_last = Ablation(tuple((CROSS, 2, h) for h in range(4)) + tuple((CROSS, 1, h) for h in range(4)))
    summary = compare(translate, text, cross_last).summary()
    assert summary["translation_before"] == "le principe public mondial sera réduit ."
    assert len(summary["log_prob_before"]) == len(summary["log_prob_after"]) == len(summary["words"])
    assert summary["loss_after"] > summary["loss_before"]
    assert all(p <= 0 for p in summary["log_prob_before"] + summary["log_prob_after"])
    # no head removed: the same numbers, exactly
    same = compare(translate, text, Ablation(())).summary()
    assert same["log_prob_before"] == same["log_prob_after"] and same["change"] == 0.0


def test_the_rnn_has_no_heads_to_remove():
    rnn = load_backend("toy-translate-rnn")
    assert not rnn.can_ablate and rnn.output_projection(CROSS, 0) is None
    with pytest.raises(ModelError, match="no heads to remove"):
        rnn.forward("the global public principle will be reduced .", ablation=Ablation(()))


def test_it_animal_heads_matter_more_than_random_heads(minilm):
    labels = minilm.run(TEXT).tokens.labels
    study = coreference_study(minilm, TEXT, labels.index("it"), labels.index("animal"), k=3, draws=6)
    assert study["top_heads"][0] == "encoder 3.1"
    assert study["top_movement"] > max(study["random_movements"])


def test_measures():
    a = np.array([[1.0, 0.0], [0.0, 2.0]])
    assert embedding_cosine(a, a) == pytest.approx(1.0)
    np.testing.assert_allclose(token_movement(a, np.array([[0.0, 1.0], [0.0, 5.0]])), [1.0, 0.0])
    assert loss_change(np.log([0.5, 0.5]), np.log([0.25, 0.25]))["change"] == pytest.approx(np.log(2))
    heads = [(ENCODER_SELF, 0, h) for h in range(6)]
    sets = random_head_sets(heads, 2, 10, seed=1, exclude=heads[:2])
    assert len(sets) == 10 and all(len(s) == 2 and not set(s) & set(heads[:2]) for s in sets)
    with pytest.raises(ValueError):
        random_head_sets(heads, 5, 1, exclude=heads[:2])
