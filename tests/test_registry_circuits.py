"""Direct logit attribution on transformers' decoders whose attention runs through our registered
function, against a decomposition written here with plain torch hooks on transformers' own modules
(an eager load of the same folder): each head's slice of what the output projection receives through
its columns of W_O (and through the sandwich norm with its scale frozen, Gemma 2/3 and OLMo 2), each
MLP block's own output, the embeddings, all through the final norm with its scale frozen (written out
from the norm's definition) and dotted with W_U[answer] − W_U[wrong]."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest
import torch

from attention_viz.backends import circuit_registry
from attention_viz.backends.circuit import CircuitSearch, circuit_metrics, edge_scores
from attention_viz.backends.hf import HFBackend
from attention_viz.backends.logit_attribution import attribute
from attention_viz.backends.patch_sides import sides
from attention_viz.errors import ModelError
from benchmarks.families import TEXT, model_of, save_family

DLA_FAMILIES = ["qwen3", "gemma2", "olmo2", "mistral", "phi3", "gemma3", "cohere2", "gpt-oss"]


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("families")
    return {family: save_family(root / family, family) for family in DLA_FAMILIES}


def frozen(norm: torch.nn.Module, x: torch.Tensor):
    """``norm`` (RMSNorm, Gemma's RMSNorm scaling by 1 + weight, Cohere's LayerNorm) with its scale
    frozen at ``x`` (d,), float64, from the norm's definition."""
    gamma = norm.weight.double() + (1.0 if type(norm).__name__.startswith("Gemma") else 0.0)
    eps = getattr(norm, "variance_epsilon", getattr(norm, "eps", None))
    centred = type(norm).__name__.endswith("LayerNorm")
    x = x.double() - x.double().mean() if centred else x.double()
    rms = torch.sqrt((x * x).mean() + eps)
    return lambda y: ((y.double() - y.double().mean(-1, keepdim=True)) if centred else y.double()) / rms * gamma


def reference(folder, answer: int, wrong: int, ids: torch.Tensor, p: int) -> dict:
    model = HFBackend(str(folder)).model.__class__.from_pretrained(folder, attn_implementation="eager").eval()
    layers, config = model.model.layers, model.config
    seen: dict = {}
    handles = [model.model.norm.register_forward_pre_hook(lambda m, a: seen.__setitem__("final", a[0][0, p]))]
    for i, layer in enumerate(layers):
        attention = layer.self_attn
        handles.append(attention.o_proj.register_forward_pre_hook(
            lambda m, a, i=i: seen.__setitem__(("contexts", i), a[0][0, p])))
        handles.append(attention.o_proj.register_forward_hook(lambda m, a, out, i=i: seen.__setitem__(("o", i), out[0, p])))
        mlp_out = getattr(layer, "post_feedforward_layernorm", None) or layer.mlp  # the block's last module
        handles.append(mlp_out.register_forward_hook(
            lambda m, a, out, i=i: seen.__setitem__(("mlp", i), (out[0] if isinstance(out, tuple) else out)[0, p])))
    with torch.no_grad():
        out = model(ids, output_hidden_states=True)
        for handle in handles:
            handle.remove()
        final_norm = frozen(model.model.norm, seen["final"])
        scale = getattr(config, "logit_scale", None) or 1.0
        direction = (model.lm_head.weight[answer] - model.lm_head.weight[wrong]).double() * scale
        dla = lambda y: final_norm(y) @ direction  # noqa: E731
        heads, mlp = [], []
        for i, layer in enumerate(layers):
            d = config.head_dim
            contexts = seen[("contexts", i)].view(-1, d)  # (h, d_head)
            w_o = layer.self_attn.o_proj.weight  # (d_model, h·d_head)
            written = torch.stack([w_o[:, h * d:(h + 1) * d] @ contexts[h] for h in range(len(contexts))]).double()
            if hasattr(layer, "post_feedforward_layernorm"):  # sandwich: the attention's output normed first
                normed = frozen(layer.post_attention_layernorm, seen[("o", i)])
                written = normed(written)
                np.testing.assert_allclose(written.sum(0), layer.post_attention_layernorm(seen[("o", i)]), atol=1e-5)
            heads.append(dla(written))
            mlp.append(dla(seen[("mlp", i)]))
        pre_cap = model.lm_head(model.model.norm(seen["final"])).double() * scale
    return {"heads": torch.stack(heads).numpy(), "mlp": torch.stack(mlp).numpy(),
            "embed": float(dla(out.hidden_states[0][0, p])), "pre_cap": pre_cap, "logits": out.logits[0, p].double(),
            "cap": getattr(config, "final_logit_softcapping", None)}


@pytest.mark.parametrize("family", DLA_FAMILIES)
@pytest.mark.parametrize("position", [None, 4])
def test_every_part_equals_the_decomposition_with_transformers_modules(folders, family, position):
    backend = HFBackend(str(folders[family]))
    assert backend.registry is not None
    result = attribute(backend, TEXT, "mary", "john", position)
    vocab = backend.tokenizer.get_vocab()
    answer, wrong = vocab["mary"], vocab["john"]
    ids = torch.tensor([backend.tokenize(TEXT)[0].ids])
    p = ids.size(1) - 1 if position is None else position
    expected = reference(folders[family], answer, wrong, ids, p)
    np.testing.assert_allclose(result.heads, expected["heads"], atol=1e-5)
    np.testing.assert_allclose(result.mlp, expected["mlp"], atol=1e-5)
    assert result.embed == pytest.approx(expected["embed"], abs=1e-5)
    assert result.rest == pytest.approx(0.0, abs=1e-6)  # these families have no biases in W_O, the norms or W_U
    assert result.parts_sum == pytest.approx(result.total, abs=1e-4)
    assert np.abs(result.heads).max() > 1e-4 and np.abs(result.mlp).max() > 1e-4  # the parts are not all 0
    pre_cap = expected["pre_cap"]
    assert result.total == pytest.approx(float(pre_cap[answer] - pre_cap[wrong]), abs=1e-4)
    logits, cap = expected["logits"], expected["cap"]
    if cap:  # Gemma 2: the model's own logits are the soft-capped ones; the parts split the logit before the cap
        np.testing.assert_allclose(logits, cap * torch.tanh(pre_cap / cap), atol=1e-5)
        assert "before the final soft-cap" in result.metric
        assert abs(float(logits[answer] - logits[wrong]) - result.total) > 1e-3
    else:
        assert result.total == pytest.approx(float(logits[answer] - logits[wrong]), abs=1e-4)
        assert "soft-cap" not in result.metric


def test_an_encoder_in_transformers_is_refused(tmp_path):
    save_family(tmp_path / "bert", "bert")
    with pytest.raises(ModelError, match="sentence encoder with no unembedding"):
        attribute(HFBackend(str(tmp_path / "bert")), "the cat sat", "cat", "dog")


# -- circuits: edge attribution patching and the circuit's own run --------------------------------

CORRUPT = TEXT.replace("park john", "park mary")
CIRCUIT_FAMILIES = ["qwen3", "gemma2", "phi3"]  # per-head q/k norms; sandwich norms and soft-caps; fused qkv


class Reference:
    """transformers' eager modules with torch hooks in which receiver r (``L.H.q|k|v``, ``mlp L``,
    ``logits``) reads ``reads(r, stream, outputs)`` instead of the stream: a head's q/k/v input through
    the layer's input norm and its slice of the projection, a feed-forward block's input at its first
    norm, the unembedding's at the final norm. Node outputs: each head's slice of what W_O receives
    through its columns of W_O (and a sandwich norm, its scale frozen), each block's output."""

    def __init__(self, folder) -> None:
        self.model = HFBackend(str(folder)).model.__class__.from_pretrained(folder, attn_implementation="eager").eval()
        c = self.model.config
        self.heads, self.kv_heads, self.d = c.num_attention_heads, c.num_key_value_heads, c.head_dim

    def slices(self, attention, kind: str, head: int) -> tuple[torch.nn.Module, slice]:
        """The module whose output holds ``kind`` of ``head``, and where in it."""
        d, offset = self.d, 0
        if hasattr(attention, "qkv_proj"):  # Phi-3: q, k and v side by side in one projection
            offset = {"q": 0, "k": self.heads * d, "v": (self.heads + self.kv_heads) * d}[kind]
            module = attention.qkv_proj
        else:
            module = getattr(attention, f"{kind}_proj")
        return module, slice(offset + head * d, offset + (head + 1) * d)

    def run(self, ids: list[int], answer: int, wrong: int, reads=None, embed=None):
        model, layers = self.model, self.model.model.layers
        outputs, streams, handles = {}, {}, []

        def read(receiver, stream):
            streams[receiver] = stream
            return stream if reads is None else reads(receiver, stream, outputs)

        def enter(i, module, args, kwargs):
            x = args[0] if args else kwargs["hidden_states"]
            if i == 0:
                x = x if embed is None else embed
                outputs["embed"] = x
            streams[("x", i)] = x
            if i == 0 and embed is not None:
                return ((x, *args[1:]), kwargs) if args else (args, {**kwargs, "hidden_states": x})

        def project(i, kinds, module, args, out):
            out = out.clone()
            for kind in kinds:
                for head in range(self.heads if kind == "q" else self.kv_heads):
                    x = read(f"{i}.{head}.{kind}", streams[("x", i)])
                    if x is not streams[("x", i)]:
                        where = self.slices(layers[i].self_attn, kind, head)[1]
                        out[..., where] = module.forward(layers[i].input_layernorm(x))[..., where]  # past this hook
            return out

        def heads_out(i, module, args, out):
            contexts, layer = args[0][0], layers[i]
            for h in range(self.heads):
                where = slice(h * self.d, (h + 1) * self.d)
                written = contexts[:, where] @ module.weight[:, where].T
                if hasattr(layer, "post_feedforward_layernorm"):  # sandwich (Gemma's 1 + weight): frozen at o
                    o = out[0]
                    written = written * (1 + layer.post_attention_layernorm.weight) / torch.sqrt(
                        (o * o).mean(-1, keepdim=True) + layer.post_attention_layernorm.eps)
                outputs[f"{i}.{h}"] = written[None]

        def mlp_in(i, module, args):
            return (read(f"mlp {i}", args[0]),)

        def mlp_out(i, module, args, out):
            outputs[f"mlp {i}"] = out

        for i, layer in enumerate(layers):
            handles.append(layer.register_forward_pre_hook(partial(enter, i), with_kwargs=True))
            by_module = {}  # a fused projection (Phi-3) fills q, k and v in one hook
            for kind in ("q", "k", "v"):
                by_module.setdefault(self.slices(layer.self_attn, kind, 0)[0], []).append(kind)
            handles += [module.register_forward_hook(partial(project, i, kinds)) for module, kinds in by_module.items()]
            handles.append(layer.self_attn.o_proj.register_forward_hook(partial(heads_out, i)))
            sandwich = hasattr(layer, "pre_feedforward_layernorm")
            handles.append((layer.pre_feedforward_layernorm if sandwich else layer.post_attention_layernorm)
                           .register_forward_pre_hook(partial(mlp_in, i)))
            handles.append((layer.post_feedforward_layernorm if sandwich else layer.mlp)
                           .register_forward_hook(partial(mlp_out, i)))
        handles.append(model.model.norm.register_forward_pre_hook(lambda m, args: (read("logits", args[0]),)))
        try:
            logits = model(torch.tensor([ids])).logits[0, -1]
        finally:
            for handle in handles:
                handle.remove()
        return logits[answer] - logits[wrong], outputs, streams


def with_biases(folder, family: str, **changes):
    """``folder`` with a random ``family`` checkpoint whose biases are drawn too (transformers starts them
    at 0, where a dropped bias would go unseen)."""
    save_family(folder, family, **changes)
    model = model_of(family, **changes)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.endswith("bias"):
                parameter.normal_()
    model.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def circuit_folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("circuits")
    families = [*CIRCUIT_FAMILIES, "olmo2", "mistral", "gpt-oss"]
    folders = {family: save_family(root / family, family) for family in families}
    folders["llama biases"] = with_biases(root / "llama", "llama3.1", attention_bias=True,
                                            initializer_range=0.2)
    return folders


def pair(backend: HFBackend) -> tuple[list[int], list[int], int, int]:
    vocab = backend.tokenizer.get_vocab()
    return (backend.tokenize(TEXT)[0].ids, backend.tokenize(CORRUPT)[0].ids, vocab["mary"], vocab["john"])


def brute_force_scores(reference: Reference, graph, backend: HFBackend, alphas=(0.0,)) -> np.ndarray:
    """Each edge alone: d/dε of the metric at the corrupt input when only receiver r reads
    stream + ε (a_u^clean − a_u^corrupt) (eap), or averaged over embeddings between the corrupt and
    the clean ones (eap-ig)."""
    clean_ids, corrupt_ids, answer, wrong = pair(backend)
    with torch.no_grad():
        _, clean, _ = reference.run(clean_ids, answer, wrong)
        _, corrupt, _ = reference.run(corrupt_ids, answer, wrong)
    out = np.full((len(graph.nodes), len(graph.receivers)), np.nan)
    allowed = graph.allowed()
    for u, node in enumerate(graph.nodes):
        difference = clean[node] - corrupt[node]
        for r, receiver in enumerate(graph.receivers):
            if not allowed[u, r]:
                continue
            total = 0.0
            for alpha in alphas:
                embed = corrupt["embed"] + alpha * (clean["embed"] - corrupt["embed"])
                eps = torch.zeros((), requires_grad=True)
                nudged = lambda name, stream, _: stream + eps * difference if name == receiver else stream  # noqa: E731
                metric, _, _ = reference.run(corrupt_ids, answer, wrong, nudged, embed)
                total += float(torch.autograd.grad(metric, eps)[0])
            out[u, r] = total / len(alphas)
    return out


@pytest.mark.parametrize("family, side_call", [(f, "") for f in [*CIRCUIT_FAMILIES, "llama biases"]]
                         + [("qwen3", "own kind"), ("phi3", "own kind"), ("qwen3", "every projection")])
def test_eap_scores_equal_each_edge_scored_alone_with_transformers_modules(circuit_folders, family, side_call,
                                                                           monkeypatch):
    # the side call: the module's forward on every copy, as where heads mix after W_Q/W_K (OLMo 2), with
    # each projection on its own kind's copies, or (projections not found) every projection on every copy
    if side_call == "own kind":
        monkeypatch.setattr(circuit_registry, "heads_mix", lambda *args: True)
    elif side_call:
        monkeypatch.setattr(circuit_registry, "head_projections", lambda *args: None)
    backend = HFBackend(str(circuit_folders[family]))
    search = CircuitSearch(backend, TEXT, CORRUPT, "mary", "john", "eap")
    expected = brute_force_scores(Reference(circuit_folders[family]), search.graph, backend)
    assert np.isnan(search.scores).sum() == np.isnan(expected).sum() > 0  # the same edges exist
    largest = np.nanmax(np.abs(expected))
    assert largest > 1e-3
    np.testing.assert_allclose(search.scores, expected, atol=2e-4 * largest, rtol=1e-3)
    # q, k and v of one head are separate edges with their own scores
    receivers = search.graph.receivers
    q, k = receivers.index("1.0.q"), receivers.index("1.0.k")
    assert np.nanmax(np.abs(search.scores[:, q] - search.scores[:, k])) > 1e-6


def test_eap_ig_scores_average_the_gradient_between_corrupt_and_clean(circuit_folders):
    backend = HFBackend(str(circuit_folders["qwen3"]))
    search = CircuitSearch(backend, TEXT, CORRUPT, "mary", "john", "eap-ig", steps=2)
    expected = brute_force_scores(Reference(circuit_folders["qwen3"]), search.graph, backend, alphas=(0.5, 1.0))
    largest = np.nanmax(np.abs(expected))
    np.testing.assert_allclose(search.scores, expected, atol=2e-4 * largest, rtol=1e-3)
    eap = CircuitSearch(backend, TEXT, CORRUPT, "mary", "john", "eap").scores
    assert np.nanmax(np.abs(eap - search.scores)) > 1e-2 * largest  # the interpolation changed the scores


@pytest.mark.parametrize("family", CIRCUIT_FAMILIES)
def test_a_circuit_runs_as_path_patching_with_transformers_modules(circuit_folders, family):
    backend = HFBackend(str(circuit_folders[family]))
    search = CircuitSearch(backend, TEXT, CORRUPT, "mary", "john", "eap")
    graph, reference = search.graph, Reference(circuit_folders[family])
    clean_ids, corrupt_ids, answer, wrong = pair(backend)
    chosen = search.result(12).chosen()
    with torch.no_grad():
        _, corrupt, corrupt_streams = reference.run(corrupt_ids, answer, wrong)

        def reads(receiver, stream, outputs):
            r = graph.receivers.index(receiver)
            extra = [outputs[n] - corrupt[n] for u, n in enumerate(graph.nodes) if chosen[u, r]]
            return corrupt_streams[receiver] + sum(extra, torch.zeros_like(stream))

        expected = float(reference.run(clean_ids, answer, wrong, reads)[0])
    assert search.circuit_metric(12) == pytest.approx(expected, abs=1e-5)
    assert abs(expected - search.clean_run.metric) > 1e-4 and abs(expected - search.corrupt_run.metric) > 1e-4


@pytest.mark.parametrize("family", [*CIRCUIT_FAMILIES, "olmo2", "mistral", "gpt-oss"])
def test_the_full_graph_keeps_the_clean_run_and_the_empty_graph_the_corrupt(circuit_folders, family):
    backend = HFBackend(str(circuit_folders[family]))
    for method in ("eap", "eap-ig"):
        search = CircuitSearch(backend, TEXT, CORRUPT, "mary", "john", method)
        edges = int(search.graph.allowed().sum())
        empty, full = circuit_metrics(search.model, search.clean_side, search.corrupt_run,
                                      np.stack([search.graph.allowed() & False, search.graph.allowed()]))
        assert full == pytest.approx(search.clean_run.metric, abs=1e-5)
        assert empty == pytest.approx(search.corrupt_run.metric, abs=1e-5)
        if abs(search.clean_run.metric - search.corrupt_run.metric) > 1e-2:
            assert search.result(edges).metric_kept == pytest.approx(1.0, abs=1e-3)
            assert search.result(0).metric_kept == pytest.approx(0.0, abs=1e-3)


def test_cli_circuit_and_attribute_on_a_transformers_decoder(circuit_folders):
    import contextlib
    import io
    import json
    import re

    from attention_viz import cli

    def run(*args: str) -> dict:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert cli.main(list(args)) == 0
        return json.loads(out.getvalue())

    model = f"hf:{circuit_folders['gemma2']}"
    data = run("circuit", "--model", model, "--clean", TEXT, "--corrupt", CORRUPT, "--answer", "mary", "--wrong",
               "john", "--method", "eap-ig", "--steps", "2", "--top", "6", "--json")
    assert len(data["edges"]) == 6 == data["faithfulness"]["edges"] and data["steps"] == 2
    assert all(re.match(r"^(\d+\.\d+\.[qkv]|mlp \d+|logits)$", e["to"]) for e in data["edges"])
    assert all(re.match(r"^(embed|\d+\.\d+|mlp \d+)$", e["from"]) for e in data["edges"])
    parts = run("attribute", "--model", model, "--text", TEXT, "--answer", "mary", "--wrong", "john", "--json")
    assert set(parts) == {"tokens", "metric", "heads", "mlp", "embed", "rest", "total"}
    assert "before the final soft-cap" in parts["metric"]


def hooks_on(model: torch.nn.Module) -> int:
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())


def test_nothing_stays_on_transformers_modules_and_parallel_layers_are_refused(circuit_folders, tmp_path):
    backend = HFBackend(str(circuit_folders["gemma2"]))
    before = hooks_on(backend.model)
    CircuitSearch(backend, TEXT, CORRUPT, "mary", "john", "eap").result(5)
    attribute(backend, TEXT, "mary", "john")
    assert hooks_on(backend.model) == before
    cohere = HFBackend(str(save_family(tmp_path / "cohere2", "cohere2")))  # attention and MLP read one input
    with pytest.raises(ModelError, match="parallel-residual decoder"):
        CircuitSearch(cohere, TEXT, CORRUPT, "mary", "john")
