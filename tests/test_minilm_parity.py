"""all-MiniLM-L6-v2 in our encoder equals transformers' BertModel (eager attention)."""

import pytest
import torch
from transformers import BertModel

from attention_viz.backends.registry import load_backend

SENTENCES = [
    "The animal didn't cross the street because it was too tired.",
    "The animal didn't cross the street because it was too wide.",
    "我喜欢吃苹果",
    "Attention is all you need 🤖 — even for Ünïcödé.",
    " ".join(["the quick brown fox jumps over the lazy dog"] * 14),  # 128 tokens after truncation
    " ".join(["attention heads look at tokens"] * 120),  # truncated to 512
]


@pytest.fixture(scope="module")
def minilm():
    return load_backend("minilm")


@pytest.fixture(scope="module")
def reference(minilm):
    from attention_viz.backends.registry import MODELS

    folder = MODELS["minilm"].locate()
    return BertModel.from_pretrained(folder, attn_implementation="eager", add_pooling_layer=False).eval()


def test_lengths_cover_128_and_512(minilm):
    lengths = [len(minilm.tokenize(s)[0]) for s in SENTENCES]
    assert 128 in lengths and 512 in lengths, lengths


@pytest.mark.parametrize("sentence", SENTENCES, ids=lambda s: f"{len(s)}chars")
def test_patterns_and_hidden_state_match_transformers(minilm, reference, sentence):
    tokens, _ = minilm.tokenize(sentence)
    ids = torch.tensor([tokens.ids])
    result = minilm.run(sentence)
    with torch.inference_mode():
        theirs = reference(input_ids=ids, output_attentions=True)
        ours_hidden = minilm.model(ids)
    patterns = result.stack("pattern")  # (layers, heads, q, k)
    assert patterns.shape == (6, 12, len(tokens), len(tokens))
    for layer, attention in enumerate(theirs.attentions):
        diff = abs(patterns[layer] - attention[0].numpy()).max()
        assert diff <= 1e-5, f"layer {layer}: {diff}"
    assert (ours_hidden - theirs.last_hidden_state).abs().max() <= 1e-4


def test_tokenization_matches_the_reference_tokenizer(minilm):
    from transformers import BertTokenizerFast

    from attention_viz.backends.registry import MODELS

    reference = BertTokenizerFast.from_pretrained(MODELS["minilm"].locate())
    for sentence in SENTENCES[:4]:
        assert list(minilm.tokenize(sentence)[0].ids) == reference(sentence)["input_ids"]
