"""Direct logit attribution (attention_viz/backends/logit_attribution.py) against a decomposition
written here with transformers' own modules: torch forward hooks give each head's input to the
output projection and each MLP's output, the final norm is applied with the scale of the run's own
final residual frozen, then W_U[answer] − W_U[wrong]; on a tiny random GPT-2 (LayerNorm, learned
positions, biases), a tiny grouped-query Llama (RMSNorm, rotary, no biases) and a tiny GPT-NeoX
(parallel attention and MLP). Also: the CLI's JSON keys, and one-line refusals."""

from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, GPTNeoXConfig, GPTNeoXForCausalLM

from attention_viz import cli
from attention_viz.backends.logit_attribution import attribute
from attention_viz.backends.registry import load_backend
from attention_viz.errors import ModelError
from test_ours_decoder import SIZES, save_tokenizer
from test_patching import PAIRS, folders  # noqa: F401 (a fixture: the tiny GPT-2 and Llama folders)


@torch.no_grad()
def their_attribution(folder: str, architecture: str, text: str, answer: str, wrong: str, position: int) -> dict:
    """Every part, from transformers' modules, in float64."""
    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    ids = torch.tensor([tokenizer(text)["input_ids"]])
    before = tokenizer(text)["input_ids"]
    a, w = (tokenizer(f"{text} {word}")["input_ids"][len(before)] for word in (answer, wrong))
    if architecture == "gpt2":
        layers, norm = list(model.transformer.h), model.transformer.ln_f
        projections = [layer.attn.c_proj for layer in layers]
        rows = [p.weight.double() for p in projections]  # Conv1D: (in, out)
    else:
        body = model.gpt_neox if architecture == "gpt_neox" else model.model
        layers = list(body.layers)
        norm = body.final_layer_norm if architecture == "gpt_neox" else body.norm
        projections = [layer.attention.dense if architecture == "gpt_neox" else layer.self_attn.o_proj
                       for layer in layers]
        rows = [p.weight.double().T for p in projections]  # Linear: (out, in)
    eps = norm.variance_epsilon if architecture == "llama" else norm.eps
    unembedding = model.get_output_embeddings().weight
    merged, mlps, final = {}, {}, {}
    handles = [p.register_forward_pre_hook(lambda m, args, i=i: merged.__setitem__(i, args[0][0].double()))
               for i, p in enumerate(projections)]
    handles += [layer.mlp.register_forward_hook(lambda m, args, out, i=i: mlps.__setitem__(i, out[0].double()))
                for i, layer in enumerate(layers)]
    handles.append(norm.register_forward_pre_hook(lambda m, args: final.__setitem__("x", args[0][0].double())))
    try:
        out = model(ids, output_hidden_states=True)
    finally:
        for handle in handles:
            handle.remove()
    x = final["x"][position]
    centre = (lambda v: v) if architecture == "llama" else (lambda v: v - v.mean())  # RMSNorm, or LayerNorm
    scale = torch.sqrt((centre(x) ** 2).mean() + eps)
    direction = (unembedding[a] - unembedding[w]).double()
    gain = norm.weight.double()

    def through(v: torch.Tensor) -> float:
        return float((centre(v) / scale * gain) @ direction)

    h = model.config.num_attention_heads
    d_k = model.config.hidden_size // h
    heads = np.array([[through(merged[i][position, j * d_k:(j + 1) * d_k] @ rows[i][j * d_k:(j + 1) * d_k])
                       for j in range(h)] for i in range(len(layers))])
    rest = 0.0
    if architecture != "llama":  # output projection biases, the LayerNorm's bias
        rest = sum(through(p.bias.double()) for p in projections) + float(norm.bias.double() @ direction)
    logits = out.logits[0, position]
    return {"heads": heads, "mlp": np.array([through(mlps[i][position]) for i in range(len(layers))]),
            "embed": through(out.hidden_states[0][0, position].double()), "rest": rest,
            "total": float(logits[a] - logits[w])}


@pytest.fixture(scope="module")
def neox(tmp_path_factory) -> str:
    """GPT-NeoX: parallel attention and MLP (both read the layer's input), a quarter of each head rotary."""
    folder = tmp_path_factory.mktemp("neox")
    torch.manual_seed(0)
    n = save_tokenizer(folder)
    GPTNeoXForCausalLM(GPTNeoXConfig(vocab_size=n, initializer_range=0.3, **SIZES)).save_pretrained(folder)
    return str(folder)


@pytest.mark.parametrize("architecture", ["gpt2", "llama", "gpt_neox"])
@pytest.mark.parametrize("position", [None, 3])
def test_every_part_equals_the_decomposition_with_transformers_modules(folders, neox, architecture, position):
    folder = neox if architecture == "gpt_neox" else folders[architecture]
    text, _, answer, wrong = PAIRS["llama" if architecture == "gpt_neox" else architecture]  # the same words
    ours = attribute(load_backend(f"hf:{folder}"), text, answer, wrong, position)
    p = len(ours.tokens) - 1 if position is None else position
    theirs = their_attribution(folder, architecture, text, answer, wrong, p)
    # their parts are the whole logit difference: the reference decomposition leaves nothing out
    assert theirs["heads"].sum() + theirs["mlp"].sum() + theirs["embed"] + theirs["rest"] == pytest.approx(
        theirs["total"], abs=1e-4)
    np.testing.assert_allclose(ours.heads, theirs["heads"], rtol=0, atol=1e-4)
    np.testing.assert_allclose(ours.mlp, theirs["mlp"], rtol=0, atol=1e-4)
    for key in ("embed", "rest", "total"):
        assert getattr(ours, key) == pytest.approx(theirs[key], abs=1e-4), key
    assert ours.parts_sum == pytest.approx(ours.total, abs=1e-4)
    assert np.abs(ours.heads).max() > 0.01 and abs(ours.total) > 0.05  # not a comparison of zeros


def test_the_induction_heads_write_the_copied_symbol():
    """On the induction preset the second layer's heads (the induction heads) carry most of the logit
    difference, and the attention-only model's MLP entries are 0."""
    result = attribute(load_backend("induction"), "q 7 m x 2 k a q 7 m x 2 k", "a", "x")
    assert result.parts_sum == pytest.approx(result.total, abs=1e-4)
    assert result.heads[-1].sum() > 0.5 * result.total > 0 and not result.mlp.any()


def run_cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["attribute", *args])
    return code, out.getvalue(), err.getvalue()


def test_cli_json_has_exactly_the_issue_keys(folders):
    text, _, answer, wrong = PAIRS["llama"]
    code, out, err = run_cli("--model", f"hf:{folders['llama']}", "--text", text, "--answer", answer,
                             "--wrong", wrong, "--json")
    assert code == 0, err
    data = json.loads(out)
    assert list(data) == ["tokens", "metric", "heads", "mlp", "embed", "rest", "total"]
    assert len(data["heads"]) == 2 and all(len(row) == 4 for row in data["heads"]) and len(data["mlp"]) == 2
    assert data["metric"] == "logit(tired) − logit(park) at the last position"
    parts = np.sum(data["heads"]) + np.sum(data["mlp"]) + data["embed"] + data["rest"]
    assert parts == pytest.approx(data["total"], abs=1e-4)
    code, out, err = run_cli("--model", "induction", "--text", "q 7 m x 2 k a q 7 m x 2 k", "--answer", "a",
                             "--wrong", "x")
    assert code == 0 and "layer 1" in out and "largest: layer 1 head" in out


@pytest.mark.parametrize("args, message", [
    (("--model", "minilm", "--text", "it was tired", "--answer", "a", "--wrong", "b"),
     "minilm is a sentence encoder with no unembedding"),
    (("--model", "toy-translate", "--text", "the law .", "--answer", "a", "--wrong", "b"),
     "direct logit attribution runs on decoder-only models; toy-translate is encoder-decoder"),
    (("--model", "induction", "--text", "a b c", "--answer", "a", "--wrong", "b", "--position", "9"),
     "position 9 is outside the text's 4 tokens"),
    (("--model", "induction", "--text", "a b c", "--answer", "a", "--wrong", "a"), "the same token"),
    (("--model", "induction", "--text", "a b c", "--answer", "?", "--wrong", "a"), "'?' is not in induction"),
])
def test_bad_inputs_are_one_line_errors(args, message):
    code, out, err = run_cli(*args)
    assert code == 2 and not out
    assert err.count("\n") == 1 and message in err, err


def test_a_transformers_model_outside_the_registry_is_refused(tmp_path):
    from benchmarks.families import save_family

    save_family(tmp_path / "deberta", "deberta-v2")  # its attention is its own code, not transformers' registry
    with pytest.raises(ModelError, match="runs on models in our own Transformer"):
        attribute(load_backend(f"hf:{tmp_path / 'deberta'}"), "the cat sat", "cat", "dog")
