"""Direct logit attribution on transformers' decoders whose attention runs through our registered
function, against a decomposition written here with plain torch hooks on transformers' own modules
(an eager load of the same folder): each head's slice of what the output projection receives through
its columns of W_O (and through the sandwich norm with its scale frozen, Gemma 2/3 and OLMo 2), each
MLP block's own output, the embeddings, all through the final norm with its scale frozen (written out
from the norm's definition) and dotted with W_U[answer] − W_U[wrong]."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention_viz.backends.hf import HFBackend
from attention_viz.backends.logit_attribution import attribute
from attention_viz.errors import ModelError
from benchmarks.families import TEXT, save_family

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
