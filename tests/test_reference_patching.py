"""Activation patching against references written here, never against the project's own formula:
the restored fraction (patched − corrupt) / (clean − corrupt) written out for a pair whose clean
metric lies *below* the corrupt one (a sign the fraction must keep: |clean − corrupt| would flip it),
and toy-translate's encoder–decoder metric, log p(answer) − log p(wrong), computed by hand from the
model's logits in float64, with one head patched by a plain torch hook on its output projection."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention_viz.analysis.patching import PRESETS, restored_fraction
from attention_viz.backends.patching import patch
from attention_viz.backends.registry import load_backend
from attention_viz.trained.vocab import Vocab
from test_patching import PAIRS, Theirs, cells, folders  # noqa: F401  (folders: the module's fixture)


def by_hand(patched: np.ndarray, clean: float, corrupt: float) -> np.ndarray:
    """Heimersheim & Nanda's restored fraction, signed: 1 at the clean metric, 0 at the corrupt one."""
    return (np.asarray(patched, np.float64) - corrupt) / (clean - corrupt)


def test_the_fraction_keeps_its_sign_when_the_clean_metric_is_below_the_corrupt_one():
    clean, corrupt = -2.0, 1.0  # clean below corrupt
    patched = np.array([1.0, -2.0, -0.5, 2.5, np.nan])
    # the patched run at the corrupt metric restores 0, at the clean metric 1, halfway 0.5, past corrupt < 0
    expected = np.array([0.0, 1.0, 0.5, -0.5, np.nan])
    np.testing.assert_allclose(restored_fraction(patched, clean, corrupt), expected)
    np.testing.assert_allclose(restored_fraction(patched, clean, corrupt), by_hand(patched, clean, corrupt))


@pytest.mark.parametrize("architecture", ["gpt2", "llama"])
def test_a_pair_whose_clean_metric_is_below_the_corrupt_one_against_transformers_hooks(folders, architecture,
                                                                                         monkeypatch):
    """The answer and the wrong word in whichever order puts the clean metric below the corrupt one;
    every head patched with transformers' own modules and a torch hook, the fraction written out."""
    folder = folders[architecture]
    clean, corrupt, answer, wrong = PAIRS[architecture]
    theirs = Theirs(folder, architecture)
    clean_ids, corrupt_ids = theirs.ids(clean), theirs.ids(corrupt)
    a, w = theirs.token(answer, clean), theirs.token(wrong, clean)
    if theirs.metric(clean_ids, a, w) > theirs.metric(corrupt_ids, a, w):
        (answer, wrong), (a, w) = (wrong, answer), (w, a)
    their_clean, their_corrupt = theirs.metric(clean_ids, a, w), theirs.metric(corrupt_ids, a, w)
    assert their_clean < their_corrupt - 0.1
    ours = patch(load_backend(f"hf:{folder}"), clean, corrupt, answer, wrong, "heads")
    saved = theirs.cache(clean_ids)
    expected = np.empty(ours.patched.shape)
    for layer, head in cells(ours.patched.shape):
        with theirs.patched(saved, "heads", layer, head, None, monkeypatch):
            expected[layer, head] = theirs.metric(corrupt_ids, a, w)
    fractions = by_hand(expected, their_clean, their_corrupt)
    np.testing.assert_allclose(ours.restored, fractions, rtol=0, atol=1e-3)
    np.testing.assert_allclose(ours["heads"], fractions, rtol=0, atol=1e-3)  # what the JSON carries
    assert np.abs(fractions).max() > 0.05


# -- toy-translate: the encoder–decoder metric by hand ---------------------------------------------

CLEAN_TARGET = ("la", "loi", "que", "le", "conseil", "a")  # the words before "signée", teacher-forced
CORRUPT_TARGET = ("le", "traité", "que", "le", "conseil", "a")


@pytest.fixture(scope="module")
def translate():
    return load_backend("toy-translate")


def _ids(backend, text: str, words: tuple[str, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    src = torch.tensor([backend.tokenize(text)[0].ids])
    return src, torch.tensor([[Vocab.BOS, *backend.tgt_vocab.encode(list(words))]])


def log_p_difference(backend, src: torch.Tensor, tgt: torch.Tensor, answer: str, wrong: str) -> float:
    """log p(answer) − log p(wrong) of the next word after ``tgt``: softmax of the last position's
    logits in float64, then each probability's logarithm."""
    with torch.no_grad():
        logits = backend.model.logits(backend.model(src, tgt)[:, -1])[0].double()
    p = torch.exp(logits - logits.max())
    p = p / p.sum()
    vocab = backend.tgt_vocab.stoi
    return float(torch.log(p[vocab[answer]]) - torch.log(p[vocab[wrong]]))


def test_toy_translates_metric_is_the_log_probability_difference_computed_by_hand(translate, monkeypatch):
    clean, corrupt, answer, wrong = PRESETS["toy-translate"].inputs
    ours = patch(translate, clean, corrupt, answer, wrong, "heads")
    clean_src, clean_tgt = _ids(translate, clean, CLEAN_TARGET)
    corrupt_src, corrupt_tgt = _ids(translate, corrupt, CORRUPT_TARGET)
    their_clean = log_p_difference(translate, clean_src, clean_tgt, answer, wrong)
    their_corrupt = log_p_difference(translate, corrupt_src, corrupt_tgt, answer, wrong)
    assert ours.clean == pytest.approx(their_clean, abs=1e-4) and ours.corrupt == pytest.approx(their_corrupt, abs=1e-4)
    assert abs(their_clean - their_corrupt) > 1.0  # a difference the metric's form changes
    # one head of the last cross-attention patched by hand: a pre-hook on its W_O takes the clean
    # run's columns of that head (the heads' contexts side by side), the corrupt run goes on
    attention = translate.model.decoder.layers[-1].cross_attn
    d_k, saved = attention.d_k, {}
    handle = attention.w_o.register_forward_pre_hook(lambda m, args: saved.__setitem__("clean", args[0].clone()))
    try:
        log_p_difference(translate, clean_src, clean_tgt, answer, wrong)
    finally:
        handle.remove()
    row = ours.rows.index(f"cross {len(translate.model.decoder.layers) - 1}")
    for head in range(attention.h):
        columns = slice(head * d_k, (head + 1) * d_k)

        def clean_head(module, args, columns=columns):
            merged = args[0].clone()
            merged[..., columns] = saved["clean"][..., columns]
            return (merged, *args[1:])

        handle = attention.w_o.register_forward_pre_hook(clean_head)
        try:
            patched = log_p_difference(translate, corrupt_src, corrupt_tgt, answer, wrong)
        finally:
            handle.remove()
        assert ours.patched[row, head] == pytest.approx(patched, abs=1e-4)
        assert ours.restored[row, head] == pytest.approx(by_hand(patched, their_clean, their_corrupt), abs=1e-3)
