"""The shipped demo translation models: they load from the repo, meet their bars on held-out
sentences, decode deterministically and causally, and speak the same hook/.npz language as the
other models."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from attention_viz.cli import main
from attention_viz.errors import ModelError
from attention_viz.backends.registry import MODELS, availability, load_backend
from attention_viz.trained import checkpoint, report
from attention_viz.trained.decoding import greedy, translate
from attention_viz.trained.evaluate import MODEL_NAMES, alignment_accuracy, exact_match, held_out_pairs
from attention_viz.core.hooks import capture

SAMPLE = 300  # held-out test pairs scored inside the tests (the model card uses all 2000)
SENTENCE = "The european economic area was signed in august 1992 ."
TARGET = "la zone économique européenne a été signée en août 1992 ."


@pytest.fixture(scope="module")
def sample():
    return held_out_pairs(SAMPLE)


@pytest.fixture(scope="module")
def transformer():
    return load_backend("toy-translate")


@pytest.fixture(scope="module")
def rnn():
    return load_backend("toy-translate-rnn")


def test_shipped_models_are_registered_available_and_small():
    for name in ("toy-translate", "toy-translate-rnn"):
        assert MODELS[name].shape == "encoder-decoder"
        ok, where = availability(name)
        assert ok, where
    for name in MODEL_NAMES:
        folder = checkpoint.MODELS_DIR / name
        assert checkpoint.missing_files(folder) == []
        assert (folder / "model.safetensors").stat().st_size <= 10_000_000
    assert (checkpoint.MODELS_DIR / "MODEL_CARD.md").is_file()


def test_model_card_is_what_the_evaluation_scores_say():
    # The card is generated from scores.json (the evaluation's output): no number typed by hand.
    result = json.loads((checkpoint.MODELS_DIR / "scores.json").read_text(encoding="utf-8"))
    assert report.model_card(result) == (checkpoint.MODELS_DIR / "MODEL_CARD.md").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    "name, exact_bar, alignment_bar", [("toy-translate", 0.95, 0.80), ("toy-translate-rnn", 0.90, 0.80)]
)
def test_meets_the_bars_on_held_out_sentences(name, exact_bar, alignment_bar, sample):
    dm = load_backend(name).trained
    em = exact_match(dm, sample)
    assert em["n"] == SAMPLE
    assert em["overall"] >= exact_bar, em
    best = alignment_accuracy(dm, sample)["content"]["best"]
    assert best["accuracy"] >= alignment_bar, best


def test_attention_beats_no_attention_on_long_sentences(sample):
    long = [p for p in sample if len(p.source) >= 16]
    with_attention = exact_match(load_backend("toy-translate-rnn").trained, long)["overall"]
    without = exact_match(checkpoint.load(checkpoint.MODELS_DIR / "gru-no-attention"), long)["overall"]
    assert with_attention > without


@pytest.mark.parametrize("name", ["toy-translate", "toy-translate-rnn"])
def test_greedy_decoding_is_deterministic_and_matches_the_batched_decoder(name, sample):
    backend = load_backend(name)
    first, second = backend.run(SENTENCE), backend.run(SENTENCE)
    assert first.meta["translation"] == second.meta["translation"]
    assert first.arrays.keys() == second.arrays.keys()
    for key in first.arrays:
        assert np.array_equal(first.arrays[key], second.arrays[key])
    sources = [p.source for p in sample[:8]]
    batched = translate(backend.trained, sources)
    for source, words in zip(sources, batched):
        assert backend.run(" ".join(source)).meta["translation"] == " ".join(words)


def test_greedy_result_shapes_and_labels(transformer):
    result = transformer.run(SENTENCE)
    assert result.meta["translation"] == TARGET  # the sentence of seed 003's figure
    n_src, n_tgt = len(result.tokens), len(result.target_tokens)
    assert list(result.tokens.labels) == SENTENCE.lower().split()
    assert result.target_tokens.labels[0] == "<bos>" and result.target_tokens.special[0]
    assert list(result.target_tokens.labels[1:]) == TARGET.split()
    assert result.meta["predicted"] == [*TARGET.split(), "<eos>"]
    h = transformer.model.config.h
    for layer in range(3):
        enc = result.arrays[f"encoder.layers.{layer}.self_attn.pattern"]
        dec = result.arrays[f"decoder.layers.{layer}.self_attn.pattern"]
        cross = result.arrays[f"decoder.layers.{layer}.cross_attn.pattern"]
        assert enc.shape == (h, n_src, n_src)
        assert dec.shape == (h, n_tgt, n_tgt)
        assert cross.shape == (h, n_tgt, n_src)
        assert np.allclose(cross.sum(-1), 1, atol=1e-5)
        assert np.all(dec[:, np.triu_indices(n_tgt, 1)[0], np.triu_indices(n_tgt, 1)[1]] == 0)


def test_every_greedy_step_is_captured_and_causal(transformer):
    tokens, _ = transformer.tokenize(SENTENCE)
    with torch.inference_mode(), capture() as recorded:
        greedy(transformer.model, torch.tensor([tokens.ids]), None, transformer.max_tokens)
    for layer in range(3):
        for attn in ("self_attn", "cross_attn"):
            steps = recorded.steps(f"decoder.layers.{layer}.{attn}.pattern")
            assert len(steps) == len(TARGET.split()) + 1  # one per generated word, <eos> included
            last = steps[-1][0]
            for k, step in enumerate(steps):
                assert step.shape[-2] == k + 1  # step k reads <bos> + k words
                expected = last[:, : k + 1, : k + 1] if attn == "self_attn" else last[:, : k + 1]
                assert torch.allclose(step[0], expected, atol=1e-5)
        assert len(recorded.steps(f"encoder.layers.{layer}.self_attn.pattern")) == 1  # encoded once


def test_teacher_forcing_reads_bos_and_the_target(transformer, rnn):
    for backend in (transformer, rnn):
        result = backend.run(SENTENCE, target=TARGET)
        assert list(result.target_tokens.labels) == ["<bos>", *TARGET.split()]
        assert result.meta["predicted"] == [*TARGET.split(), "<eos>"]
        cross = result.arrays["decoder.layers.0.cross_attn.pattern"]
        assert cross.shape[1:] == (len(TARGET.split()) + 1, len(SENTENCE.split()))
        assert np.allclose(cross.sum(-1), 1, atol=1e-5)


def test_rnn_attention_is_one_head_under_the_transformer_hook_name(rnn):
    result = rnn.run(SENTENCE, kinds=("pattern", "scores"))
    assert sorted(result.arrays) == ["decoder.layers.0.cross_attn.pattern", "decoder.layers.0.cross_attn.scores"]
    pattern = result.arrays["decoder.layers.0.cross_attn.pattern"]
    assert pattern.shape == (1, len(result.target_tokens), len(result.tokens))
    assert result.meta["translation"] == TARGET
    # the alignment of seed 003's figure: "européenne" looks at "european", "zone" at "area"
    src, tgt = list(result.tokens.labels), list(result.target_tokens.labels)
    row = {w: pattern[0, i] for i, w in enumerate(result.meta["predicted"])}
    assert src[int(row["européenne"].argmax())] == "european"
    assert src[int(row["zone"].argmax())] == "area"
    assert tgt[0] == "<bos>"
    with pytest.raises(ModelError, match="pattern"):
        rnn.run(SENTENCE, kinds=("q",))


def test_inputs_outside_the_grammar_do_not_crash(transformer, rnn):
    for backend in (transformer, rnn):
        result = backend.run("The zorblax council signed the treaty")  # unknown word, no final "."
        assert result.tokens.labels == ("the", "zorblax ⟨unk⟩", "council", "signed", "the", "treaty", ".")
        assert result.tokens.unknown == (False, True, False, False, False, False, False)
        assert result.tokens.special == (False,) * 6 + (True,)  # the "." was added, not typed
        assert result.tokens.text == "the zorblax council signed the treaty"
        assert result.meta["dropped"] == 0 and result.meta["finished"]
        with pytest.raises(ModelError, match="empty"):
            backend.run("   ")
        long = backend.run(" ".join(["the council signed the treaty and"] * 20) + " .")
        assert long.meta["dropped"] == 121 - backend.max_tokens and len(long.tokens) == backend.max_tokens
        assert long.tokens.labels[-1] == "." and long.tokens.special[-1]
        forced = backend.run(SENTENCE, target="la zone bizarre .")
        assert forced.target_tokens.unknown == (False, False, False, True, False)


def test_cli_writes_tokens_target_tokens_and_all_three_attentions(tmp_path):
    """The command line's ``main`` in this process (test_cli.py runs ``run`` as a real process)."""
    greedy_out, forced_out = tmp_path / "greedy.npz", tmp_path / "forced.npz"
    assert main(["run", "--model", "toy-translate", "--text", SENTENCE, "--out", str(greedy_out)]) == 0
    assert main(["run", "--model", "toy-translate", "--text", SENTENCE, "--target", TARGET, "--out", str(forced_out)]) == 0
    for path in (greedy_out, forced_out):
        data = np.load(path, allow_pickle=False)
        assert list(data["tokens"]) == SENTENCE.lower().split()
        assert list(data["target_tokens"]) == ["<bos>", *TARGET.split()]
        for name in ("encoder.layers.2.self_attn", "decoder.layers.2.self_attn", "decoder.layers.2.cross_attn"):
            assert f"{name}.pattern" in data.files
        assert data["decoder.layers.0.cross_attn.pattern"].shape == (4, len(TARGET.split()) + 1, len(SENTENCE.split()))
