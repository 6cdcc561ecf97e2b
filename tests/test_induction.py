"""The shipped ``induction`` model: attention-only, and its two heads found by the detector alone."""

import json

import numpy as np
import pytest
import torch

from apphelpers import app, messages

from attention_viz.analysis.ablation import Ablation
from attention_viz.analysis.detector import detect, top
from attention_viz.backends.registry import load_backend
from attention_viz.errors import ModelError
from attention_viz.backends.head_effects import compare
from attention_viz.core.model import Transformer, TransformerConfig
from attention_viz.core.names import DECODER_SELF
from attention_viz.cards import induction as induction_card
from attention_viz.trained import induction


@pytest.fixture(scope="module")
def backend():
    return load_backend("induction")


@pytest.fixture(scope="module")
def scores(backend):
    return detect(backend.run, backend.probe_texts(24, seed=1), DECODER_SELF)


def test_attention_only_layers_have_no_feed_forward():
    config = TransformerConfig(shape="decoder-only", vocab_size=10, d_model=8, h=2, N=2, d_ff=1, dropout=0.0,
                               norm="pre", feed_forward=False)
    torch.manual_seed(0)
    model = Transformer(config).eval()
    assert not any("feed_forward" in name for name in model.state_dict())
    layer = model.decoder.layers[0]
    x = torch.randn(1, 5, 8)
    mask = torch.ones(5, 5, dtype=torch.bool).tril()
    with torch.no_grad():
        expected = x + layer.self_attn(layer.sublayers[0].norm(x), layer.sublayers[0].norm(x), layer.sublayers[0].norm(x), mask)
        assert torch.allclose(layer(x, mask), expected)
    with pytest.raises(ValueError, match="feed-forward"):
        TransformerConfig(shape="decoder-only", norm="pre", parallel_residual=True, feed_forward=False)


def test_the_shipped_model_is_attention_only(backend):
    config = backend.model.config
    assert (config.shape, config.N, config.feed_forward) == ("decoder-only", 2, False)


def test_detector_finds_previous_token_head_in_layer_0_and_induction_head_in_layer_1(scores):
    layer, head, score = top(scores["previous_token"], 1)[0]
    assert layer == 0 and score > 0.4, scores["previous_token"]
    layer, head, score = top(scores["induction"], 1)[0]
    assert layer == 1 and score > 0.5, scores["induction"]
    assert scores["induction"][0].max() < 0.1  # layer 0 cannot do induction: it has no previous-token info yet
    for values in scores.values():
        assert (values >= 0).all() and (values <= 1).all()


def test_repeated_half_is_predicted_through_the_detected_heads(backend, scores):
    sequences = induction_card.eval_sequences(30)
    plain = induction_card.half_losses(backend, sequences)
    assert plain["first_half"] > 3.0  # random symbols: about ln 36 = 3.58
    assert plain["repeated_half"] < 0.2 * plain["first_half"]

    def repeated_without(*heads):
        return induction_card.half_losses(backend, sequences, Ablation(tuple((DECODER_SELF, l, h) for l, h in heads)))["repeated_half"]

    # the heads the detector calls induction heads back each other up (the model card's reading): any
    # one removed costs little, all of them removed take the repeated copy back to guessing
    induction_heads = [(1, h) for h in range(backend.model.config.h) if scores["induction"][1, h] > 0.5]
    assert len(induction_heads) >= 2, scores["induction"]
    assert max(repeated_without(head) for head in induction_heads) < plain["repeated_half"] + 0.5
    assert repeated_without(*induction_heads) > 0.8 * plain["first_half"]
    prev_layer, prev_head, _ = top(scores["previous_token"], 1)[0]
    assert repeated_without((prev_layer, prev_head)) > plain["repeated_half"] + 1.0


def test_typed_sequences(backend):
    result, outputs = backend.forward("a 7 Q a 7")
    assert result.tokens.labels == ("<bos>", "a", "7", "q", "a", "7") and result.tokens.special[0]
    assert len(outputs.log_probs) == 5 and len(result.meta["predicted"]) == 6
    assert result.meta["predicted"][-1] == "q"  # after "a 7 q a 7" comes q again
    pattern = result.pattern(DECODER_SELF, 0)
    assert not np.triu(pattern, 1).any() and np.allclose(pattern.sum(-1), 1, atol=1e-5)
    for bad in ("ab c", "a ! b", "<bos> a"):
        with pytest.raises(ModelError, match="single lowercase letters and digits"):
            backend.tokenize(bad)
    with pytest.raises(ModelError, match="no target"):
        backend.forward("a b", target="c")


@pytest.mark.parametrize("length", [6, 13, 24, 30, 31])
def test_induction_on_every_segment_length_that_fits(backend, length):
    # scored as the detector scores one typed text; 6–31 is every segment whose two copies fit after
    # <bos> (the model trained on 6–20 scored 0.27 at 24 and 0.10 at 30)
    assert (induction.MIN_SEGMENT, induction.MAX_SEGMENT) == (6, 31)
    for text in induction_card.typed_texts(length, 2, seed=1):
        scores = induction_card.typed_induction(backend, text)
        assert scores.max() >= 0.6 and scores[0].max() < 0.1, (text, scores)


def test_a_text_past_the_context_is_cut_and_the_page_says_so(backend):
    segment = induction_card.typed_texts(33, 1)[0].split()[:33]  # 66 symbols: 3 past the 63 after <bos>
    result = backend.run(" ".join(segment + segment))
    assert len(result.tokens.ids) == backend.max_tokens == 64 and result.meta["dropped"] == 3
    at = app(model="induction", text=" ".join(segment + segment))
    assert not at.exception and not at.error
    assert [m for m in messages(at) if "longer than" in m] == [
        "The text is longer than the model's 64 tokens: the last 3 tokens were dropped."]


def test_decoder_ablation_changes_the_loss(backend, scores):
    # the previous-token head: the induction heads all read it, so nothing stands in for it
    layer, head, _ = top(scores["previous_token"], 1)[0]
    summary = compare(backend, "k 3 z 9 w k 3 z 9 w", Ablation(((DECODER_SELF, layer, head),))).summary()
    assert summary["change"] > 0 and len(summary["log_prob_after"]) == 10
    same = compare(backend, "k 3 z 9 w k 3 z 9 w", Ablation(())).summary()
    assert same["change"] == 0.0


def test_training_smoke(tmp_path):
    record = induction.train(tmp_path, steps=3, log=lambda _: None)
    assert record["hyperparameters"]["steps"] == 3
    assert {"config.json", "model.safetensors", "training.json"} <= {p.name for p in tmp_path.iterdir()}
    config = json.loads((tmp_path / "config.json").read_text())["config"]
    assert config["feed_forward"] is False


def test_model_card_numbers_come_from_the_evaluation():
    folder = induction.FOLDER
    evaluation = json.loads((folder / "evaluation.json").read_text())
    training = json.loads((folder / "training.json").read_text())
    config = json.loads((folder / "config.json").read_text())["config"]
    card = induction_card.model_card(evaluation, training, config)
    assert card == (folder / "MODEL_CARD.md").read_text()
    assert f"{evaluation['loss']['repeated_half']:.3f}" in card
    assert evaluation["detector"]["previous_token_head"]["layer"] == 0
    assert evaluation["detector"]["induction_head"]["layer"] == 1
    lengths = evaluation["by_length"]
    assert [row["segment_length"] for row in lengths["rows"]] == list(range(6, 32))  # every length that fits
    assert lengths["lowest_induction_score"] == min(row["induction_score"] for row in lengths["rows"]) >= 0.6
    assert all(row["layer"] == 1 and row["repeated_half_loss"] < 0.5 for row in lengths["rows"])
    assert f"| 31 | layer {lengths['rows'][-1]['layer']} head {lengths['rows'][-1]['head']} |" in card
