"""Our attention function inside transformers' own forward (backends/hf_attention.py), on a tiny random
checkpoint of every family people open: patterns equal transformers' eager ``output_attentions``, the
heads' contexts equal what transformers' own output projection receives (a torch hook on it), the
family extras (scaled rotary, soft-capping, sinks, sliding and interleaved windows, q/k norms,
T5's relative bias) are all applied; a family that bypasses the registry keeps eager attention;
concurrent calls never mix and nothing is left on transformers' modules after a call."""

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch
import transformers as tf

from attention_viz.backends.hf import HFBackend
from attention_viz.core.attention import causal_attention
from attention_viz.core.hooks import interventions_active
from attention_viz.errors import ModelError
from benchmarks.families import DECODERS, LAYERS, TEXT, save_family

FAMILIES = [*DECODERS, "gpt2", "gpt-neox", "bert", "bart", "t5"]
TARGET = "the dog ran to the park"


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("families")
    return {family: save_family(root / family, family) for family in [*FAMILIES, "deberta-v2"]}


@pytest.fixture(scope="module")
def backends(folders):
    return {family: HFBackend(str(folders[family])) for family in FAMILIES}


def eager(folder, backend: HFBackend):
    """transformers alone, eager attention: the reference outputs with their attentions."""
    model_class = type(backend.model)
    model = model_class.from_pretrained(folder, attn_implementation="eager").eval()
    ids = torch.tensor([backend.tokenize(TEXT)[0].ids])
    inputs = {"input_ids": ids, "output_attentions": True}
    if backend.shape == "encoder-decoder":
        inputs["decoder_input_ids"] = torch.tensor([[backend.decoder_start_id, *backend.tokenize(TARGET)[0].ids]])
    with torch.no_grad():
        return model, model(**inputs)


@pytest.mark.parametrize("family", FAMILIES)
def test_patterns_equal_transformers_eager(backends, folders, family):
    backend = backends[family]
    assert backend.registry is not None and backend.implementation == "transformers"
    target = TARGET if backend.shape == "encoder-decoder" else None
    result = backend.run(TEXT, target, kinds=None)
    assert result.meta["attention"] == "registry"
    _, reference = eager(folders[family], backend)
    if backend.shape == "encoder-decoder":
        groups = [("encoder.layers.{}.self_attn", reference.encoder_attentions),
                  ("decoder.layers.{}.self_attn", reference.decoder_attentions),
                  ("decoder.layers.{}.cross_attn", reference.cross_attentions)]
    else:
        part = "encoder" if backend.shape == "encoder-only" else "decoder"
        groups = [(part + ".layers.{}.self_attn", reference.attentions)]
    for prefix, attentions in groups:
        assert len(attentions) == LAYERS
        for layer, weights in enumerate(attentions):
            pattern = result.arrays[prefix.format(layer) + ".pattern"]
            np.testing.assert_allclose(pattern, weights[0].numpy(), atol=1e-5, err_msg=f"{family} {prefix} {layer}")
            scores = result.arrays[prefix.format(layer) + ".scores"]
            assert np.isneginf(scores[pattern == 0]).all() or family == "gpt-oss" or "cross" in prefix
    if backend.shape == "decoder-only":  # causal: the upper triangle is exactly 0
        pattern = result.arrays["decoder.layers.0.self_attn.pattern"]
        assert (np.triu(pattern, 1) == 0).all()


@pytest.mark.parametrize("family", ["llama3.1", "gemma2", "gpt-oss", "t5"])
def test_contexts_equal_what_the_output_projection_receives(backends, folders, family):
    """The context hook is the heads' outputs side by side, exactly what transformers' own W_O reads."""
    backend = backends[family]
    model, _ = eager(folders[family], backend)
    received = {}
    for site in backend.registry.sites:
        module = model.get_submodule(site.path)
        projection = next(getattr(module, n) for n in ("o_proj", "o", "out_proj", "c_proj") if hasattr(module, n))
        projection.register_forward_pre_hook(
            lambda m, args, name=f"{site.group[0]}.{site.group[1]}.{site.layer}": received.__setitem__(name, args[0]))
    ids = torch.tensor([backend.tokenize(TEXT)[0].ids])
    inputs = {"input_ids": ids}
    target = None
    if backend.shape == "encoder-decoder":
        target = TARGET
        inputs["decoder_input_ids"] = torch.tensor([[backend.decoder_start_id, *backend.tokenize(TARGET)[0].ids]])
    with torch.no_grad():
        model(**inputs)
    result = backend.run(TEXT, target, kinds=("context",))
    for site in backend.registry.sites:
        context = result.arrays[f"{site.group[0]}.layers.{site.layer}.{site.group[1]}.context"]  # (h, T, d)
        heads, length, d = context.shape
        expected = received[f"{site.group[0]}.{site.group[1]}.{site.layer}"][0].reshape(length, heads, d)
        np.testing.assert_allclose(context, expected.transpose(0, 1).numpy(), atol=1e-5)


def test_gpt_oss_sinks_take_their_share_of_every_row(backends):
    """A sink joins each row's normaliser but reads no value: rows sum to 1 − softmax share of the sink."""
    result = backends["gpt-oss"].run(TEXT, kinds=("pattern",))
    sums = result.arrays["decoder.layers.0.self_attn.pattern"].sum(-1)
    assert (sums < 1 - 1e-4).all()


def test_a_family_outside_the_registry_keeps_eager_attention(folders):
    backend = HFBackend(str(folders["deberta-v2"]))
    assert backend.registry is None and backend.kinds == ("pattern",)
    result = backend.run(TEXT)
    assert result.meta["attention"] == "eager"
    np.testing.assert_allclose(result.arrays["encoder.layers.0.self_attn.pattern"].sum(-1), 1, atol=1e-5)
    with pytest.raises(ModelError, match="only 'pattern'.*registry"):
        backend.run(TEXT, kinds=("q",))


def test_concurrent_calls_never_mix(backends):
    backend = backends["gemma2"]
    texts = ["when mary and john went to the park", "the cat sat on the mat because it was tired"]
    alone = [backend.run(t, kinds=("pattern", "q")).arrays for t in texts]
    with ThreadPoolExecutor(4) as pool:
        together = list(pool.map(lambda i: backend.run(texts[i % 2], kinds=("pattern", "q")).arrays, range(8)))
    for i, arrays in enumerate(together):
        assert arrays.keys() == alone[i % 2].keys()
        for name, array in arrays.items():
            np.testing.assert_array_equal(array, alone[i % 2][name])


def test_nothing_is_left_on_transformers_modules_after_a_call(backends):
    backend = backends["llama3.1"]
    state = [(m, dict(vars(m)), len(m._forward_pre_hooks), len(m._forward_hooks)) for m in backend.model.modules()]
    backend.run(TEXT, kinds=None)
    with pytest.raises(ModelError):
        backend.run("", kinds=None)
    assert not interventions_active()
    for module, before, pre, post in state:
        assert vars(module).keys() == before.keys()
        assert (len(module._forward_pre_hooks), len(module._forward_hooks)) == (pre, post)


def test_an_unobserved_forward_equals_transformers_sdpa(backends, folders):
    """No capture: the layers run transformers' own SDPA function, the logits those of an SDPA load."""
    backend = backends["qwen3"]
    reference = tf.AutoModelForCausalLM.from_pretrained(folders["qwen3"], attn_implementation="sdpa").eval()
    ids = torch.tensor([backend.tokenize(TEXT)[0].ids])
    with torch.no_grad():
        np.testing.assert_allclose(backend.model(ids).logits.numpy(), reference(ids).logits.numpy(), atol=1e-5)


@pytest.mark.parametrize("family", ["llama3.1", "gemma2", "gemma3", "gpt-oss"])
def test_past_one_block_of_queries_the_patterns_still_equal_eager(backends, folders, family, monkeypatch):
    """Past one block of queries a capture of patterns alone goes a block of queries at a time
    (grouped key heads read as they are, soft-capping, sinks and windows applied in each block): the
    patterns and the logits are still transformers' eager ones, and a pattern an intervention replaces
    mixes the values anew (all zeros: the layer's context is zero, as when its heads are ablated)."""
    from attention_viz.backends import hf_attention
    from attention_viz.core.attention import CAUSAL_BLOCK
    from attention_viz.core.hooks import HeadRemoval, ablate, capture, intervene

    backend, length = backends[family], CAUSAL_BLOCK + 44
    blocks = []
    monkeypatch.setattr(hf_attention, "causal_attention",
                        lambda *args, **kwargs: blocks.append(1) or causal_attention(*args, **kwargs))
    model, _ = eager(folders[family], backend)
    ids = torch.randint(4, 20, (1, length), generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        reference = model(ids, output_attentions=True, use_cache=False)
        with capture(kinds=("pattern",)) as recorded:
            logits = backend.model(ids, use_cache=False).logits
    assert len(blocks) == LAYERS
    for layer, weights in enumerate(reference.attentions):
        pattern = recorded[f"decoder.layers.{layer}.self_attn.pattern"]
        assert (pattern - weights).abs().max() <= 1e-5
    assert (logits - reference.logits).abs().max() <= 1e-5
    heads = model.config.num_attention_heads
    with torch.inference_mode():
        with intervene([("decoder.layers.0.self_attn.pattern", lambda x, hook: torch.zeros_like(x))]):
            zeroed = backend.model(ids, use_cache=False).logits
        with ablate({"decoder.layers.0.self_attn.context": HeadRemoval(range(heads))}):
            ablated = backend.model(ids, use_cache=False).logits
    assert (zeroed - ablated).abs().max() <= 1e-5 and (zeroed - logits).abs().max() > 1e-3
