"""Head ablation and activation patching on transformers' models through our registered attention
function, against the same interventions written with plain torch hooks on transformers' own
modules (an eager load of the same folder): a head's slice of what the output projection receives
zeroed or swapped in, the residual stream entering a layer swapped at one position."""

import numpy as np
import pytest
import torch

from attention_viz.analysis.ablation import Ablation
from attention_viz.backends.hf import HFBackend
from attention_viz.backends.patching import patch
from attention_viz.core.names import DECODER_SELF, ENCODER_SELF
from attention_viz.errors import ModelError
from benchmarks.families import DECODERS, HEADS, LAYERS, TEXT, save_family

CLEAN = TEXT  # "when mary and john went to the park john gave a drink to"
CORRUPT = TEXT.replace("park john", "park mary")
FAMILIES = list(DECODERS)  # every decoder family of benchmarks/families.py


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("families")
    return {family: save_family(root / family, family) for family in [*FAMILIES, "bert"]}


def reference(folder, backend: HFBackend):
    model = type(backend.model).from_pretrained(folder, attn_implementation="eager").eval()
    return model


def projections(model, backend: HFBackend) -> list[torch.nn.Module]:
    out = []
    for site in backend.registry.sites:
        module = model.get_submodule(site.path)
        out.append(next(getattr(module, n) for n in ("o_proj", "dense", "o", "c_proj") if hasattr(module, n)))
    return out


def ids_of(backend: HFBackend, text: str) -> torch.Tensor:
    return torch.tensor([backend.tokenize(text)[0].ids])


@pytest.mark.parametrize("family", FAMILIES)
def test_zero_ablation_equals_a_torch_hook_on_the_output_projection(folders, family):
    backend = HFBackend(str(folders[family]))
    layer, head = 1, 2
    _, outputs = backend.forward(CLEAN, kinds=(), ablation=Ablation(((DECODER_SELF, layer, head),)))
    model = reference(folders[family], backend)
    d = model.config.hidden_size // HEADS if not hasattr(model.config, "head_dim") else model.config.head_dim

    def zero(module, args):
        x = args[0].clone()
        x[..., head * d : (head + 1) * d] = 0
        return (x,)

    projections(model, backend)[layer].register_forward_pre_hook(zero)
    ids = ids_of(backend, CLEAN)
    with torch.no_grad():
        out = model(ids, output_hidden_states=True)
    np.testing.assert_allclose(outputs.hidden, out.hidden_states[-1][0].numpy(), atol=1e-5)
    expected = out.logits[0, :-1].log_softmax(-1).gather(-1, ids[0, 1:, None])[:, 0]
    np.testing.assert_allclose(outputs.log_probs, expected.numpy(), atol=1e-5)
    plain = backend.forward(CLEAN, kinds=())[1]
    assert np.abs(plain.hidden - outputs.hidden).max() > 1e-3  # the head mattered


@pytest.mark.parametrize("family", FAMILIES)
def test_head_patching_equals_torch_hooks_on_transformers_modules(folders, family):
    backend = HFBackend(str(folders[family]))
    result = patch(backend, CLEAN, CORRUPT, "mary", "john", site="heads")
    model = reference(folders[family], backend)
    d = model.config.head_dim
    # each word as the tokenizer reads it after the text (" mary" is "Ġmary" in Qwen2.5's byte-level BPE)
    answer, wrong = (int(ids_of(backend, f"{CLEAN} {word}")[0, -1]) for word in ("mary", "john"))
    clean_ids, corrupt_ids = ids_of(backend, CLEAN), ids_of(backend, CORRUPT)
    outs = projections(model, backend)

    def metric(ids, hooks=()) -> float:
        handles = [module.register_forward_pre_hook(fn) for module, fn in hooks]
        try:
            with torch.no_grad():
                logits = model(ids).logits[0, -1]
        finally:
            for handle in handles:
                handle.remove()
        return float(logits[answer] - logits[wrong])

    cached = {}
    metric(clean_ids, [(m, lambda mod, args, i=i: cached.__setitem__(i, args[0].clone())) for i, m in enumerate(outs)])
    clean, corrupt = metric(clean_ids), metric(corrupt_ids)
    assert result.clean == pytest.approx(clean, abs=1e-4) and result.corrupt == pytest.approx(corrupt, abs=1e-4)
    for layer in range(LAYERS):
        for head in range(HEADS):
            def swap(module, args, layer=layer, head=head):
                x = args[0].clone()
                x[..., head * d : (head + 1) * d] = cached[layer][..., head * d : (head + 1) * d]
                return (x,)
            expected = metric(corrupt_ids, [(outs[layer], swap)])
            assert result.patched[layer, head] == pytest.approx(expected, abs=1e-4), (layer, head)


def test_residual_patching_equals_a_pre_hook_on_the_decoder_layer(folders):
    backend = HFBackend(str(folders["gemma2"]))
    result = patch(backend, CLEAN, CORRUPT, "mary", "john", site="resid")
    model = reference(folders["gemma2"], backend)
    vocab = backend.tokenizer.get_vocab()
    clean_ids, corrupt_ids = ids_of(backend, CLEAN), ids_of(backend, CORRUPT)
    entering = {}
    layers = model.model.layers
    handles = [layer.register_forward_pre_hook(lambda m, args, kwargs, i=i: entering.__setitem__(i, (
        args[0] if args else kwargs["hidden_states"]).clone()), with_kwargs=True) for i, layer in enumerate(layers)]
    with torch.no_grad():
        model(clean_ids)
    for handle in handles:
        handle.remove()
    for i, layer in enumerate(layers):
        for position in range(clean_ids.size(1)):
            def swap(module, args, kwargs, i=i, position=position):
                x = (args[0] if args else kwargs["hidden_states"]).clone()
                x[:, position] = entering[i][:, position]
                return ((x, *args[1:]), kwargs) if args else (args, {**kwargs, "hidden_states": x})
            handle = layer.register_forward_pre_hook(swap, with_kwargs=True)
            with torch.no_grad():
                logits = model(corrupt_ids).logits[0, -1]
            handle.remove()
            expected = float(logits[vocab["mary"]] - logits[vocab["john"]])
            assert result.patched[i, position] == pytest.approx(expected, abs=1e-4), (i, position)


def test_an_encoder_through_the_registry_is_patched_and_ablated(folders):
    backend = HFBackend(str(folders["bert"]))
    result = patch(backend, "the cat and the dog sat because it was tired", "the dog and the cat sat because it was tired",
                   "cat", "dog", site="heads")
    assert result.patched.shape == (LAYERS, HEADS) and np.isfinite(result.patched).all()
    _, outputs = backend.forward(CLEAN, kinds=(), ablation=Ablation(((ENCODER_SELF, 0, 1),)))
    assert outputs.hidden.shape == (len(backend.tokenize(CLEAN)[0]), 32)


def test_attribution_patching_equals_autograd_on_transformers_modules(folders):
    """patch --method attribution on a family that runs in transformers: (a_clean − a_corrupt) · ∂m/∂a at
    each head's slice of W_O's input, the gradient from a zero added there by a torch pre-hook."""
    from attention_viz.backends.attribution_patching import attribution_patch

    backend = HFBackend(str(folders["gemma3"]))
    result = attribution_patch(backend, CLEAN, CORRUPT, "mary", "john", site="heads")
    model = reference(folders["gemma3"], backend)
    d, vocab = model.config.head_dim, backend.tokenizer.get_vocab()
    outs = projections(model, backend)
    cached, zeros = {}, {}
    handles = [m.register_forward_pre_hook(lambda mod, args, i=i: cached.__setitem__(i, args[0].detach().clone()))
               for i, m in enumerate(outs)]
    with torch.no_grad():
        model(ids_of(backend, CLEAN))
    for handle in handles:
        handle.remove()

    def add_zero(module, args, i):
        zeros[i] = torch.zeros_like(args[0], requires_grad=True)
        return (args[0] + zeros[i],)

    handles = [m.register_forward_pre_hook(lambda mod, args, i=i: add_zero(mod, args, i)) for i, m in enumerate(outs)]
    corrupt_ids = ids_of(backend, CORRUPT)
    logits = model(corrupt_ids).logits[0, -1]
    metric = logits[vocab["mary"]] - logits[vocab["john"]]
    grads = torch.autograd.grad(metric, [zeros[i] for i in range(LAYERS)])
    acts = {}
    with torch.no_grad():
        model(corrupt_ids)  # the hooks add zeros: the corrupt run's own activations, read below
    for handle in handles:
        handle.remove()
    hooks = [m.register_forward_pre_hook(lambda mod, args, i=i: acts.__setitem__(i, args[0].detach().clone()))
             for i, m in enumerate(outs)]
    with torch.no_grad():
        model(corrupt_ids)
    for handle in hooks:
        handle.remove()
    for layer in range(LAYERS):
        for head in range(HEADS):
            cut = slice(head * d, (head + 1) * d)
            estimate = float(((cached[layer][..., cut] - acts[layer][..., cut]) * grads[layer][..., cut]).sum())
            assert result.patched[layer, head] == pytest.approx(float(metric) + estimate, abs=1e-4), (layer, head)


def test_value_zeroing_reaches_a_fused_value_projection(folders):
    """Phi-3 projects Q, K and V in one matrix: value zeroing at our v hook point equals the model re-run
    once per key j with j's slice of that matrix's V columns zeroed by a torch hook (1 − cos of the
    layer's output, rows normalized, the causal future 0)."""
    from attention_viz.backends.mixing import mixing_arrays
    from attention_viz.core.names import hook_name
    import torch.nn.functional as F

    backend = HFBackend(str(folders["phi3"]))
    result = backend.run(CLEAN)
    got = mixing_arrays(backend, result, ("value_zeroing",))
    model = reference(folders["phi3"], backend)
    ids = ids_of(backend, CLEAN)
    n = ids.size(1)
    v_columns = model.config.num_key_value_heads * model.config.head_dim
    for layer in range(LAYERS):
        with torch.no_grad():
            real = model(ids, output_hidden_states=True).hidden_states[layer + 1][0].double()
        qkv = model.model.layers[layer].self_attn.qkv_proj
        scores = np.zeros((n, n))
        for j in range(n):
            def zero(module, args, output, j=j):
                output = output.clone()
                output[:, j, -v_columns:] = 0.0
                return output
            handle = qkv.register_forward_hook(zero)
            with torch.no_grad():
                zeroed = model(ids, output_hidden_states=True).hidden_states[layer + 1][0].double()
            handle.remove()
            scores[:, j] = (1.0 - F.cosine_similarity(zeroed, real, dim=-1)).numpy()
        scores = np.clip(np.tril(scores), 0.0, None)
        expected = scores / scores.sum(-1, keepdims=True)
        np.testing.assert_allclose(got[hook_name(DECODER_SELF, layer, "value_zeroing")], expected, atol=1e-4)


@pytest.mark.parametrize("family", ["gemma3", "llama3.1"])
def test_alti_follows_the_norm_layout_of_the_family(folders, family):
    """ALTI (Ferrando et al. 2022) written out in the test from transformers' own modules: each key's share
    of the attention's output, o_proj(α_ij v_j) per head, through Gemma's output RMSNorm linearized with
    its row's statistics (a sandwich layout) or through nothing (Llama: pre-norm), plus the residual;
    the pieces add up to the real stream after the attention, and c_ij is their L1 distance's share."""
    from attention_viz.backends.mixing import mixing_arrays
    from attention_viz.core.names import hook_name

    backend = HFBackend(str(folders[family]))
    got = mixing_arrays(backend, backend.run(CLEAN), ("alti",))
    model = reference(folders[family], backend)
    ids = ids_of(backend, CLEAN)
    seen = {}
    for i, layer in enumerate(model.model.layers):
        layer.self_attn.v_proj.register_forward_hook(lambda m, a, out, i=i: seen.__setitem__(("v", i), out[0]))
        layer.register_forward_pre_hook(lambda m, a, kw, i=i: seen.__setitem__(("x", i), kw.get("hidden_states",
                                        a[0] if a else None)[0]), with_kwargs=True)
        after = layer.pre_feedforward_layernorm if family == "gemma3" else layer.post_attention_layernorm
        after.register_forward_pre_hook(lambda m, a, i=i: seen.__setitem__(("after", i), a[0][0]))
    with torch.no_grad():
        attentions = model(ids, output_attentions=True).attentions
    config = model.config
    with torch.no_grad():  # the weights' arithmetic below needs no graph
        for i, layer in enumerate(model.model.layers):
            alpha = attentions[i][0].double()  # (h, T, T)
            v = seen[("v", i)].double().reshape(ids.size(1), config.num_key_value_heads, config.head_dim)
            v = v.repeat_interleave(HEADS // config.num_key_value_heads, dim=1)  # (T, h, d)
            per_key = torch.einsum("hij,jhd->ijhd", alpha, v).reshape(ids.size(1), ids.size(1), -1)  # (i, j, h·d)
            pieces = per_key @ layer.self_attn.o_proj.weight.double().T  # (i, j, d_model): no bias in either family
            attended = pieces.sum(1)
            if family == "gemma3":
                norm = layer.post_attention_layernorm
                scale = (1 + norm.weight.double()) / torch.sqrt((attended ** 2).mean(-1, keepdim=True) + norm.eps)
                pieces, attended = pieces * scale[:, None], attended * scale
            x = seen[("x", i)].double()
            output = attended + x
            np.testing.assert_allclose(output.numpy(), seen[("after", i)].double().numpy(), atol=1e-4)
            pieces[range(len(x)), range(len(x))] += x
            shares = torch.clamp(output.abs().sum(-1)[:, None] - (output[:, None] - pieces).abs().sum(-1), min=0)
            expected = (shares / shares.sum(-1, keepdim=True)).numpy()
            np.testing.assert_allclose(got[hook_name(DECODER_SELF, i, "alti")], expected, atol=1e-4)


def test_alti_names_the_layout_it_does_not_know(tmp_path):
    from attention_viz.backends.mixing import mixing_arrays

    backend = HFBackend(str(save_family(tmp_path / "cohere2", "cohere2")))
    with pytest.raises(ModelError, match="cannot give ALTI: its attention and feed-forward read the same input in "
                                         "parallel"):
        mixing_arrays(backend, backend.run(CLEAN), ("alti",))


@pytest.mark.parametrize("family", ["gemma2", "qwen3"])
def test_the_logit_lens_reads_a_family_that_runs_in_transformers(folders, family):
    """Each depth through transformers' own final norm and LM head (Gemma 2's final soft-capping
    included), from output_hidden_states; the last depth is the model's own logits."""
    from attention_viz.backends.logit_lens import logit_lens

    backend = HFBackend(str(folders[family]))
    lens = logit_lens(backend, CLEAN, answer="mary", top=3)
    model = reference(folders[family], backend)
    ids = ids_of(backend, CLEAN)
    with torch.no_grad():
        out = model(ids, output_hidden_states=True)
        cap = model.config.final_logit_softcapping if family == "gemma2" else None
        for depth, hidden in enumerate(out.hidden_states):
            states = hidden[0] if depth == LAYERS else model.model.norm(hidden[0])
            logits = model.lm_head(states)
            logits = torch.tanh(logits / cap) * cap if cap else logits
            probs = logits.softmax(-1)
            np.testing.assert_allclose(lens.answer_probs[depth], probs[:, backend.tokenizer.token_to_id("mary")],
                                       atol=1e-5)
            np.testing.assert_allclose(lens.top_probs[depth], probs.topk(3, dim=-1).values.numpy(), atol=1e-5)
        np.testing.assert_allclose(torch.tensor(lens.top_probs[-1][-1]), out.logits[0, -1].softmax(-1).topk(3).values,
                                   atol=1e-5)


def test_an_encoder_decoder_in_transformers_is_patched_like_torch_hooks_on_its_modules(tmp_path):
    """BART: log p(answer) − log p(wrong) where the clean greedy translation writes the answer; each
    encoder, decoder and cross-attention head's slice of what its out_proj receives swapped in from the
    clean run by a torch pre-hook, every run teacher-forced on its own translation's prefix."""
    folder = save_family(tmp_path / "bart", "bart")
    backend = HFBackend(str(folder))
    result = patch(backend, CLEAN, CORRUPT, "dog", "cat", site="heads")
    assert result.rows == tuple(f"{part} {i}" for part in ("encoder", "decoder", "cross") for i in range(LAYERS))
    model = reference(folder, backend)
    vocab = backend.tokenizer.get_vocab()
    sources = [ids_of(backend, text) for text in (CLEAN, CORRUPT)]
    clean_translation = backend._generate(sources[0])
    t = clean_translation.index(vocab["dog"], 1)
    prefixes = [torch.tensor([backend._generate(src)[:t]]) for src in sources]
    outs = [model.get_submodule(site.path).out_proj for site in backend.registry.sites]
    d = model.config.d_model // HEADS

    def metric(which: int, hooks=()) -> float:
        handles = [module.register_forward_pre_hook(fn) for module, fn in hooks]
        try:
            with torch.no_grad():
                logits = model(input_ids=sources[which], decoder_input_ids=prefixes[which]).logits[0, -1]
        finally:
            for handle in handles:
                handle.remove()
        log_probs = logits.log_softmax(-1)
        return float(log_probs[vocab["dog"]] - log_probs[vocab["cat"]])

    cached = {}
    metric(0, [(m, lambda mod, args, i=i: cached.__setitem__(i, args[0].clone())) for i, m in enumerate(outs)])
    assert result.clean == pytest.approx(metric(0), abs=1e-4) and result.corrupt == pytest.approx(metric(1), abs=1e-4)
    order = [(g, layer) for g in ("encoder", "decoder", "cross") for layer in range(LAYERS)]
    for row, site in enumerate(sorted(range(len(outs)), key=lambda i: order.index(
            ({"self_attn": backend.registry.sites[i].group[0], "cross_attn": "cross"}[backend.registry.sites[i].group[1]],
             backend.registry.sites[i].layer)))):
        for head in range(HEADS):
            def swap(module, args, site=site, head=head):
                x = args[0].clone()
                x[..., head * d : (head + 1) * d] = cached[site][..., head * d : (head + 1) * d]
                return (x,)
            assert result.patched[row, head] == pytest.approx(metric(1, [(outs[site], swap)]), abs=1e-4), (row, head)
