"""Attribution patching (attention_viz/backends/attribution_patching.py) against autograd written
here on transformers' own modules: for every site alone, a zero added at that site's slice of the
corrupt run (through test_patching's torch forward hooks on the output projection's input, on a
decoder layer's input, and in the eager attention function's weights), one backward, and the
clean − corrupt difference there times the gradient; on a tiny GPT-2 and a tiny grouped-query Llama. Also: agreement with activation
patching on the induction model, the CLI's --method, gradients under an outer inference mode, and
the Patching page's attribution heatmap beside activation patching's with their correlation."""

from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pytest
import torch

from attention_viz import cli
from attention_viz.analysis.attribution_patching import agreement
from attention_viz.analysis.patching import PRESETS, Patching
from attention_viz.backends.attribution_patching import attribution_patch
from attention_viz.backends.patching import patch
from attention_viz.backends.registry import load_backend
from single_view import array, figures, open_view, problems
from test_patching import PAIRS, SITES, Theirs, cells, folders  # noqa: F401 (folders: a fixture)


def site_slice(site: str, layer: int, head: int | None, position: int | None, d_k: int) -> tuple:
    """Where one site lies in a run cached by ``Theirs.cache``: (key, layer, index into its tensor)."""
    if site == "patterns":
        return "patterns", layer, (0, head)
    if site == "resid":
        return "resid", layer, (0, position)
    columns = slice(head * d_k, (head + 1) * d_k)
    return "heads", layer, (0, slice(None) if position is None else position, columns)


def their_estimate(theirs: Theirs, receiver_ids, source: dict, receiver: dict, site: str, cell, a: int, w: int,
                   monkeypatch) -> float:
    """The receiver run with the site's value replaced by itself plus a zero (test_patching's own
    patching hooks: the forward is unchanged), one backward: the difference times the gradient."""
    layer, *rest = cell
    head, position = (None, rest[0]) if site == "resid" else (rest[0], rest[1] if len(rest) > 1 else None)
    key, layer, index = site_slice(site, layer, head, position, theirs.d_k)
    difference = source[key][layer][index] - receiver[key][layer][index]
    zero = torch.zeros_like(difference, requires_grad=True)
    value = receiver[key][layer].clone()
    value[index] = value[index] + zero
    with_zero = {"heads": dict(receiver["heads"]), "resid": dict(receiver["resid"]),
                 "patterns": list(receiver["patterns"])}
    with_zero[key][layer] = value
    with theirs.patched(with_zero, site, layer, head, position, monkeypatch), torch.enable_grad():
        logits = theirs.model(receiver_ids).logits[0, -1]
        gradient, = torch.autograd.grad(logits[a] - logits[w], zero)
    return float((difference.double() * gradient.double()).sum())


@pytest.mark.parametrize("architecture", ["gpt2", "llama"])
@pytest.mark.parametrize("noising", [False, True])
def test_every_site_equals_autograd_on_transformers_modules(folders, architecture, noising, monkeypatch):
    inputs = PAIRS[architecture]
    theirs = Theirs(folders[architecture], architecture)
    a, w = (theirs.token(word, inputs[0]) for word in inputs[2:])
    runs = [(ids, theirs.cache(ids)) for ids in map(theirs.ids, inputs[:2])]  # clean, corrupt
    (_, source), (receiver_ids, receiver) = runs[::-1] if noising else runs
    for site in SITES if not noising else ("heads",):
        ours = attribution_patch(load_backend(f"hf:{folders[architecture]}"), *inputs, site, noising)
        base = ours.clean if noising else ours.corrupt
        expected = np.array([their_estimate(theirs, receiver_ids, source, receiver, site, cell, a, w, monkeypatch)
                             for cell in cells(ours.patched.shape)]).reshape(ours.patched.shape)
        np.testing.assert_allclose(ours.patched - base, expected, rtol=0, atol=1e-4, err_msg=site)
        assert np.abs(expected).max() > 0.05  # some site's estimate is far from 0: not a comparison of zeros


def test_it_ranks_heads_as_activation_patching_does_on_induction():
    """A first-order estimate: on the induction preset (a gap of about 10 logits) it agrees with
    activation patching per head and position, and closely on the patterns."""
    inputs = PRESETS["induction"].inputs
    backend = load_backend("induction")
    for site, floor in (("head_positions", 0.5), ("patterns", 0.9)):
        estimated, measured = attribution_patch(backend, *inputs, site), patch(backend, *inputs, site)
        assert estimated.clean == pytest.approx(measured.clean, abs=1e-4)
        assert estimated.corrupt == pytest.approx(measured.corrupt, abs=1e-4)
        assert np.corrcoef(estimated.restored.ravel(), measured.restored.ravel())[0, 1] > floor, site


def test_gradients_flow_under_an_outer_inference_mode():
    with torch.inference_mode():
        result = attribution_patch(load_backend("induction"), *PRESETS["induction"].inputs, "heads")
    assert np.abs(result.restored).max() > 0.1


def run_cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main(["patch", *args])
        except SystemExit as exit:  # argparse's own refusals
            code = exit.code
    return code, out.getvalue(), err.getvalue()


def test_cli_method_attribution_keeps_the_keys(folders):
    clean, corrupt, answer, wrong = PAIRS["llama"]
    common = ("--model", f"hf:{folders['llama']}", "--clean", clean, "--corrupt", corrupt, "--answer", answer,
              "--wrong", wrong, "--site", "resid", "--json")
    code, out, err = run_cli(*common, "--method", "attribution")
    assert code == 0, err
    estimated = json.loads(out)
    measured = json.loads(run_cli(*common)[1])
    assert list(estimated) == list(measured) == ["tokens", "corrupt_tokens", "metric", "clean", "corrupt", "resid"]
    assert estimated["clean"] == pytest.approx(measured["clean"], abs=1e-5)
    assert np.array(estimated["resid"]).shape == np.array(measured["resid"]).shape
    expected = attribution_patch(load_backend(f"hf:{folders['llama']}"), clean, corrupt, answer, wrong, "resid")
    np.testing.assert_allclose(np.array(estimated["resid"]), expected.restored, atol=1e-6)
    code, out, err = run_cli("--model", "induction", "--method", "gradients")
    assert code == 2 and "invalid choice: 'gradients'" in err and err.count("\n") == 1


def test_the_notebook_api_takes_the_method():
    import attention_viz as av

    result = av.patch("induction", site="heads", method="attribution")
    expected = attribution_patch(load_backend("induction"), *PRESETS["induction"].inputs, "heads")
    np.testing.assert_allclose(result["heads"], expected.restored, atol=1e-6)
    with pytest.raises(Exception, match="unknown method 'gradient'"):
        av.patch("induction", method="gradient")


def test_agreement_is_pearsons_r_over_the_shared_sites():
    def result(values) -> Patching:
        return Patching(model="m", site="resid", metric="d", tokens=("a", "b", "c"), corrupt_tokens=("a", "b", "d"),
                        clean=1.0, corrupt=0.0, patched=np.array([values]), rows=("layer 0",))

    # centred (1, 0, -1) and (2, -1, -1) over the first three cells (the NaN cell left out): r = 3 / √(2·6)
    assert agreement(result([1.0, 0.0, -1.0, np.nan]), result([3.0, 0.0, 0.0, 5.0])) == pytest.approx(3 / np.sqrt(12))
    assert agreement(result([1.0, 1.0, 1.0, 1.0]), result([3.0, 0.0, 0.0, 5.0])) is None


def test_the_patching_page_draws_the_estimates_beside_the_measurements():
    at = open_view("patching", model="induction", text="a b c a b", site="patterns", attribution="true")
    assert not problems(at)
    measured, estimated = figures(at)
    inputs = PRESETS["induction"].inputs
    expected = attribution_patch(load_backend("induction"), *inputs, "patterns")
    np.testing.assert_allclose(array(estimated["data"][0]["z"]).reshape(expected.restored.shape), expected.restored,
                               atol=1e-6)
    assert "estimated by attribution patching" in estimated["layout"]["title"]["text"]
    r = agreement(patch(load_backend("induction"), *inputs, "patterns"), expected)
    assert any(f"r = {r:.3f}" in c.value for c in at.caption)


def test_one_forward_per_input_and_one_backward(monkeypatch):
    """Every site from two forwards and one backward, whatever the number of sites (112 here)."""
    import attention_viz.backends.attribution_patching as runner

    backend = load_backend("induction")
    forwards, backwards = [], []
    handle = backend.model.register_forward_pre_hook(lambda module, args: forwards.append(1))
    real_grad = torch.autograd.grad
    monkeypatch.setattr(runner.torch.autograd, "grad", lambda *a, **k: backwards.append(1) or real_grad(*a, **k))
    try:
        result = attribution_patch(backend, *PRESETS["induction"].inputs, "head_positions")
    finally:
        handle.remove()
    assert result.patched.size == 2 * 4 * 14 and (len(forwards), len(backwards)) == (2, 1)
