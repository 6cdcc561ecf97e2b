"""Edge attribution patching and the circuit's own run (backends/circuit.py) against references
written here: a float64 GPT-2 forward in which every receiver's input is given separately, used to
score each edge alone with autograd and to path-patch a circuit edge by edge."""

from __future__ import annotations

import contextlib
import io
import json
import math
import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from attention_viz import cli
from attention_viz.analysis.circuit import Graph, top_edges
from attention_viz.analysis.patching import PRESETS
from attention_viz.backends.circuit import (
    CircuitSearch, circuit, circuit_metrics, edge_scores, graph_of, receiver_gradients,
)  # fmt: skip
from attention_viz.backends.patching import Side
from attention_viz.backends.registry import load_backend
from attention_viz.core.hooks import intervene
from attention_viz.core.model import Transformer, TransformerConfig
from attention_viz.core.names import layer_hook_name
from test_hf_backend import save_gpt2

ANSWER, WRONG = 3, 5
GPT2_LIKE = dict(shape="decoder-only", vocab_size=12, d_model=16, h=2, d_ff=24, N=2, max_len=16,
                 positional="learned", norm="pre", activation="gelu_tanh", dropout=0.0, scale_embeddings=False)


def tiny(**changes) -> Transformer:
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(**{**GPT2_LIKE, **changes})).eval().double()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn_like(p))  # biases and norms away from 0 and 1: every term counts
    return model


def side(model: Transformer, ids: list[int]) -> Side:
    def measure(hidden: torch.Tensor) -> torch.Tensor:
        logits = model.logits(hidden[:, -1])
        return logits[:, ANSWER] - logits[:, WRONG]
    return Side(None, (torch.tensor([ids]),), measure)


CLEAN, CORRUPT = [1, 4, 7, 2, 9, 4, 7], [1, 8, 6, 2, 9, 10, 7]


def reference(model: Transformer, ids: list[int], reads, embed: torch.Tensor | None = None):
    """The metric, each node's output and each receiver's stream, with receiver r reading
    ``reads(r, stream, outputs)`` (the stream: the sum of everything written before r)."""
    dec, c = model.decoder, model.config
    d_k, length = c.d_model // c.h, len(ids)
    x = dec.embed(torch.tensor([ids]))[0] if embed is None else embed  # (T, d)
    outputs, streams = {"embed": x}, {}
    causal = torch.ones(length, length, dtype=torch.bool).tril()

    def read(receiver, stream):
        streams[receiver] = stream
        return reads(receiver, stream, outputs)

    def norm(module, y):
        return F.layer_norm(y, (c.d_model,), module.weight, module.bias, module.eps)

    for layer, block in enumerate(dec.layers):
        attn, written = block.self_attn, 0
        for h in range(c.h):
            rows = slice(h * d_k, (h + 1) * d_k)
            q, k, v = (norm(block.sublayers[0].norm, read(f"{layer}.{h}.{kind}", x)) @ w.weight[rows].T + w.bias[rows]
                       for kind, w in (("q", attn.w_q), ("k", attn.w_k), ("v", attn.w_v)))
            scores = (q @ k.T / math.sqrt(d_k)).masked_fill(~causal, -math.inf)
            outputs[f"{layer}.{h}"] = scores.softmax(-1) @ v @ attn.w_o.weight[:, rows].T
            written = written + outputs[f"{layer}.{h}"]
        x = x + written + attn.w_o.bias
        ffn = block.feed_forward
        hidden = norm(block.sublayers[1].norm, read(f"mlp {layer}", x)) @ ffn.w_1.weight.T + ffn.w_1.bias
        gelu = 0.5 * hidden * (1 + torch.tanh(math.sqrt(2 / math.pi) * (hidden + 0.044715 * hidden**3)))
        outputs[f"mlp {layer}"] = gelu @ ffn.w_2.weight.T + ffn.w_2.bias
        x = x + outputs[f"mlp {layer}"]
    final = norm(dec.norm, read("logits", x))[-1]
    logits = final @ dec.generator.weight.T + dec.generator.bias
    return logits[ANSWER] - logits[WRONG], outputs, streams


def plain(receiver, stream, outputs):
    return stream


def test_the_reference_is_the_model():
    model = tiny()
    with torch.no_grad():
        metric, _, _ = reference(model, CLEAN, plain)
        ours = side(model, CLEAN).measure(model(torch.tensor([CLEAN])))
    assert float(metric) == pytest.approx(float(ours[0]), abs=1e-10)


def brute_force_scores(model: Transformer, alphas=(0.0,)) -> np.ndarray:
    """Each edge alone: d/dε of the metric when only receiver v reads stream + ε (a_u^clean − a_u^corrupt),
    at the corrupt input (eap), or averaged over embeddings between corrupt and clean (eap-ig)."""
    graph = graph_of(model)
    _, clean, _ = reference(model, CLEAN, plain)
    _, corrupt, _ = reference(model, CORRUPT, plain)
    out = np.full((len(graph.nodes), len(graph.receivers)), np.nan)
    for u, node in enumerate(graph.nodes):
        difference = (clean[node] - corrupt[node]).detach()
        for r, receiver in enumerate(graph.receivers):
            if not graph.allowed()[u, r]:
                continue
            total = 0.0
            for alpha in alphas:
                embed = (corrupt["embed"] + alpha * (clean["embed"] - corrupt["embed"])).detach()
                eps = torch.zeros((), dtype=torch.float64, requires_grad=True)
                nudged = lambda name, stream, _: stream + eps * difference if name == receiver else stream  # noqa: E731
                metric, _, _ = reference(model, CORRUPT, nudged, embed)
                total += float(torch.autograd.grad(metric, eps)[0])
            out[u, r] = total / len(alphas)
    return out


def test_eap_scores_equal_each_edge_scored_alone():
    model = tiny()
    scores, clean, corrupt = edge_scores(model, side(model, CLEAN), side(model, CORRUPT), "eap")
    expected = brute_force_scores(model)
    assert np.isnan(scores).sum() == np.isnan(expected).sum() > 0  # the edges that exist are the same
    assert np.nanmax(np.abs(expected)) > 0.1
    np.testing.assert_allclose(scores, expected, atol=1e-9, rtol=1e-7)
    assert clean.metric != pytest.approx(corrupt.metric)


def test_eap_ig_scores_average_the_gradient_between_corrupt_and_clean():
    model = tiny()
    scores, _, _ = edge_scores(model, side(model, CLEAN), side(model, CORRUPT), "eap-ig", steps=3)
    np.testing.assert_allclose(scores, brute_force_scores(model, alphas=(1 / 3, 2 / 3, 1.0)), atol=1e-9, rtol=1e-7)


def path_patched_reference(model: Transformer, chosen: np.ndarray) -> float:
    """The clean input with each receiver reading the corrupt stream plus, edge by edge, what each
    chosen node writes in this run minus what it wrote in the corrupt run."""
    graph = graph_of(model)
    _, corrupt, corrupt_streams = reference(model, CORRUPT, plain)

    def reads(receiver, stream, outputs):
        r = graph.receivers.index(receiver)
        extra = [outputs[n] - corrupt[n] for u, n in enumerate(graph.nodes) if chosen[u, r]]
        return corrupt_streams[receiver] + sum(extra, torch.zeros_like(stream))

    with torch.no_grad():
        return float(reference(model, CLEAN, reads)[0])


def test_faithfulness_is_path_patching_and_runs_from_empty_to_full():
    model = tiny()
    graph = graph_of(model)
    scores, clean, corrupt = edge_scores(model, side(model, CLEAN), side(model, CORRUPT))
    allowed = graph.allowed()
    rng = np.random.default_rng(0)
    some = allowed & (rng.random(allowed.shape) < 0.3)
    top = top_edges(np.nan_to_num(scores), allowed, 12)
    measured = circuit_metrics(model, side(model, CLEAN), corrupt, np.stack([allowed, ~allowed, some, top]))
    assert measured[0] == pytest.approx(clean.metric, abs=1e-9)  # the full graph is the clean run
    assert measured[1] == pytest.approx(corrupt.metric, abs=1e-9)  # the empty graph the corrupt one
    for got, chosen in zip(measured[2:], (some, top)):
        assert got == pytest.approx(path_patched_reference(model, chosen), abs=1e-9)
        assert abs(got - clean.metric) > 1e-3 and abs(got - corrupt.metric) > 1e-3


@pytest.mark.parametrize("layout", [
    dict(positional="rotary", norm_type="rms", n_kv_heads=1, h=4, gated_ffn=True, activation="silu", qkv_bias=False),
    dict(feed_forward=False),
])
def test_the_receivers_of_a_layer_add_up_to_its_stream(layout):
    """∂metric/∂resid_pre(L) = ∂metric/∂(the stream after attention) + Σ the layer's q, k, v inputs'
    gradients: rotary, grouped-query heads, RMSNorm and layers without a feed-forward block split right."""
    model = tiny(**layout)
    graph = graph_of(model)
    grads, _, _ = receiver_gradients(model, side(model, CORRUPT))
    streams = {}

    def keep(name):
        def fn(x, hook):
            streams[name] = torch.zeros_like(x, requires_grad=True)
            return x + streams[name]
        return fn
    kinds = ("resid_pre", "resid_mid") if model.config.feed_forward else ("resid_pre",)
    names = [layer_hook_name("decoder", i, kind) for i in range(graph.layers) for kind in kinds]
    with intervene([(n, keep(n)) for n in names]):
        metric = side(model, CORRUPT).measure(model(torch.tensor([CORRUPT])))
    total = dict(zip(names, torch.autograd.grad(metric.sum(), [streams[n] for n in names])))
    by_receiver = dict(zip(graph.receivers, grads))
    for layer in range(graph.layers):
        after = (total[layer_hook_name("decoder", layer, "resid_mid")][0] if graph.mlp
                 else total[layer_hook_name("decoder", layer + 1, "resid_pre")][0] if layer + 1 < graph.layers
                 else by_receiver["logits"])
        heads = sum(by_receiver[r] for r in graph.attention_receivers(layer))
        torch.testing.assert_close(total[layer_hook_name("decoder", layer, "resid_pre")][0], after + heads)
        assert max(float(by_receiver[r].abs().max()) for r in graph.attention_receivers(layer)) > 1e-4


def test_graph_names_and_edges():
    graph = Graph(layers=2, heads=2, kv_heads=2, mlp=True)
    assert graph.nodes == ["embed", "0.0", "0.1", "mlp 0", "1.0", "1.1", "mlp 1"]
    assert graph.receivers[:7] == ["0.0.q", "0.1.q", "0.0.k", "0.1.k", "0.0.v", "0.1.v", "mlp 0"]
    allowed = graph.allowed()
    assert allowed[graph.nodes.index("0.1"), graph.receivers.index("mlp 0")]  # a layer's heads feed its mlp
    assert not allowed[graph.nodes.index("mlp 0"), graph.receivers.index("0.0.q")]
    assert allowed[:, -1].all() and allowed.sum() == 6 * 1 + 3 + 6 * 4 + 6 + 7


@pytest.fixture(scope="module")
def induction():
    return load_backend("induction")


def test_the_induction_circuit_holds_k_composition(induction):
    """The previous-token head 0.2 (the model card's) writes into an induction head's key input
    (K-composition, Olsson et al. 2022), and the circuit built on it keeps most of the gap."""
    search = CircuitSearch(induction, *PRESETS["induction"].inputs, method="eap-ig")
    top = search.result(10).edges()
    assert any(e["from"] == "0.2" and e["to"].startswith("1.") and e["to"].endswith(".k") for e in top)
    assert search.result(40).metric_kept > 0.8
    assert search.result(81).metric_kept == pytest.approx(1.0, abs=1e-5)
    assert search.result(0).metric_kept == pytest.approx(0.0, abs=1e-5)
    eap = CircuitSearch(induction, *PRESETS["induction"].inputs, method="eap").result(20).edges()
    assert any(e["from"] == "0.2" and e["to"].endswith(".k") for e in eap)


# -- the command line ----------------------------------------------------------------------------


def run_cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["circuit", *args])
    return code, out.getvalue(), err.getvalue()


NAME = re.compile(r"^(embed|\d+\.\d+|mlp \d+)$")
RECEIVER = re.compile(r"^(\d+\.\d+\.[qkv]|mlp \d+|logits)$")


def test_cli_json_keeps_the_contract_on_a_gpt2_folder(tmp_path):
    save_gpt2(tmp_path)
    clean, corrupt, answer, wrong = ("the cat sat on the mat and the dog", "the dog sat on the mat and the cat",
                                     "cat", "dog")
    code, out, err = run_cli("--model", f"hf:{tmp_path}", "--clean", clean, "--corrupt", corrupt, "--answer", answer,
                             "--wrong", wrong, "--top", "7", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert {"nodes", "edges", "faithfulness"} <= set(data)
    assert len(data["edges"]) == 7 == data["faithfulness"]["edges"]
    assert all(NAME.match(e["from"]) and RECEIVER.match(e["to"]) for e in data["edges"])
    scores = [abs(e["score"]) for e in data["edges"]]
    assert scores == sorted(scores, reverse=True) and scores[0] > 0
    assert all(NAME.match(n) or n == "logits" for n in data["nodes"])
    expected = circuit(load_backend(f"hf:{tmp_path}"), clean, corrupt, answer, wrong, "eap", 7)
    assert data["faithfulness"]["metric_kept"] == pytest.approx(expected.metric_kept, abs=1e-6)
    assert {(e["from"], e["to"]) for e in data["edges"]} == {(e["from"], e["to"]) for e in expected.edges()}


def test_cli_steps_reach_the_scores_and_the_json(induction):
    code, out, err = run_cli("--method", "eap-ig", "--steps", "2", "--top", "5", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["steps"] == 2 and data["method"] == "eap-ig"
    two, five = (circuit(induction, *PRESETS["induction"].inputs, "eap-ig", 5, steps) for steps in (2, 5))
    assert [e["score"] for e in data["edges"]] == pytest.approx([e["score"] for e in two.edges()], abs=1e-6)
    assert np.abs(np.nan_to_num(two.scores - five.scores)).max() > 1e-4  # the steps change the scores
    code, out, err = run_cli("--top", "5", "--json")
    assert code == 0 and json.loads(out)["steps"] is None  # eap has no steps


def test_cli_summary_and_preset():
    code, out, err = run_cli("--top", "81")  # the induction model and its preset pair by default
    assert code == 0, err
    assert "of 81" in out and "keeps 1.000 of the clean − corrupt gap" in out


@pytest.mark.parametrize("args, message", [
    (("--model", "minilm"), "minilm is an encoder: circuits are traced on pre-LN decoders"),
    (("--model", "toy-translate"), "toy-translate is an encoder–decoder"),
    (("--model", "induction", "--top", "-1"), "--top must be 0 or more"),
    (("--model", "induction", "--method", "eap-ig", "--steps", "0"), "eap-ig takes 1 to 100 interpolation steps"),
    (("--model", "induction", "--method", "eap-ig", "--steps", "101"), "eap-ig takes 1 to 100 interpolation steps"),
    (("--model", "induction", "--steps", "3"), "--steps sets eap-ig's interpolation steps: add --method eap-ig"),
    (("--model", "induction", "--clean", "a b c"), "give the clean and corrupt texts"),
    (("--model", "induction", "--clean", "a b c", "--corrupt", "a b c", "--answer", "d", "--wrong", "e"),
     "nothing to restore"),
])
def test_bad_inputs_are_one_line_errors(args, message):
    code, out, err = run_cli(*args)
    assert code == 2 and not out
    assert err.count("\n") == 1 and message in err, err


def test_the_kept_curve_runs_circuits_of_every_size_at_once(induction):
    from attention_viz.analysis.circuit import curve_sizes
    from attention_viz.figures.circuit import kept_curve

    search = CircuitSearch(induction, *PRESETS["induction"].inputs)
    sizes = curve_sizes(int(search.graph.allowed().sum()))
    assert sizes[0] == 0 and sizes[-1] == 81 and sizes == sorted(set(sizes)) and len(sizes) > 8
    kept = search.kept_curve(sizes)
    np.testing.assert_allclose(kept, [search.result(k).metric_kept for k in sizes], atol=1e-5)
    assert kept[0] == pytest.approx(0.0, abs=1e-6) and kept[-1] == pytest.approx(1.0, abs=1e-5)
    figure = kept_curve(sizes, kept.tolist(), 20, "eap")
    assert list(figure.data[0].y) == pytest.approx(kept.tolist()) and figure.layout.xaxis.type == "log"


def test_resid_mid_and_resid_post_are_the_streams_around_the_feed_forward_block():
    from attention_viz.core.hooks import capture

    model = tiny()
    with torch.no_grad(), capture(kinds=("resid_pre", "resid_mid", "resid_post")) as seen:
        hidden = model(torch.tensor([CLEAN]))
    for layer, block in enumerate(model.decoder.layers):
        mid, post = (seen[layer_hook_name("decoder", layer, kind)] for kind in ("resid_mid", "resid_post"))
        ffn, norm = block.feed_forward, block.sublayers[1].norm
        written = F.gelu(norm(mid) @ ffn.w_1.weight.T + ffn.w_1.bias, approximate="tanh") @ ffn.w_2.weight.T
        torch.testing.assert_close(post, mid + written + ffn.w_2.bias)
        if layer + 1 < len(model.decoder.layers):
            assert torch.equal(post, seen[layer_hook_name("decoder", layer + 1, "resid_pre")])
    torch.testing.assert_close(hidden, model.decoder.norm(post))
