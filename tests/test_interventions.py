"""The one way to reach inside a forward: ``intervene([(hook name, fn)])``, per call. Capture and
ablation are uses of it; a patch from another run is a third."""

import threading

import pytest
import torch

from attention_viz.core.attention import repeat_kv
from attention_viz.core.hooks import HeadRemoval, ablate, capture, capture_active, interventions_active, intervene, run_with_hooks
from attention_viz.core.model import Transformer, TransformerConfig
from attention_viz.core.names import DECODER_SELF, ENCODER_SELF, hook_name, layer_hook_name


def build(shape: str, **extra) -> Transformer:
    torch.manual_seed(0)
    config = TransformerConfig(shape=shape, vocab_size=40, d_model=32, h=4, d_ff=64, N=3, max_len=64, dropout=0.0, **extra)
    return Transformer(config).eval()


@pytest.fixture(scope="module")
def decoder() -> Transformer:
    return build("decoder-only", n_kv_heads=2, positional="rotary", norm="pre")  # grouped-query, as Llama


def texts(seed: int, n: int = 12) -> torch.Tensor:
    return torch.randint(0, 40, (1, n), generator=torch.Generator().manual_seed(seed))


def run(model: Transformer, ids: torch.Tensor, fwd_hooks=(), kinds=("context", "pattern", "v")) -> tuple[torch.Tensor, dict]:
    with torch.no_grad(), intervene(list(fwd_hooks)), capture(kinds=kinds) as cap:
        out = model(ids)
    return out, {name: cap[name] for name in cap.names_recorded()}


def test_a_head_patched_from_another_run_equals_that_run_for_that_head(decoder):
    clean, corrupt = texts(1), texts(2)
    layer, head = 1, 2
    name = hook_name(DECODER_SELF, layer, "context")
    _, clean_cap = run(decoder, clean)
    _, corrupt_cap = run(decoder, corrupt)

    def patch(context: torch.Tensor, hook) -> torch.Tensor:
        patched = context.clone()
        patched[:, head] = clean_cap[name][:, head]
        return patched

    _, patched_cap = run(decoder, corrupt, [(name, patch)])
    torch.testing.assert_close(patched_cap[name][:, head], clean_cap[name][:, head], rtol=0, atol=0)
    others = [h for h in range(4) if h != head]
    torch.testing.assert_close(patched_cap[name][:, others], corrupt_cap[name][:, others], rtol=0, atol=0)
    # layers before the patch are untouched; the layer after reads the patched head and moves
    before = hook_name(DECODER_SELF, 0, "pattern")
    torch.testing.assert_close(patched_cap[before], corrupt_cap[before], rtol=0, atol=0)
    after = hook_name(DECODER_SELF, 2, "pattern")
    assert not torch.allclose(patched_cap[after], corrupt_cap[after])


def test_patching_the_whole_residual_stream_at_the_first_layer_gives_the_other_run(decoder):
    clean, corrupt = texts(3), texts(4)
    name = layer_hook_name("decoder", 0)
    with torch.no_grad(), capture(kinds=("resid_pre",)) as cap:
        clean_out = decoder(clean)
    patched_out = run_with_hooks(decoder, corrupt, fwd_hooks=[(name, lambda x, hook: cap[name])])
    torch.testing.assert_close(patched_out, clean_out, rtol=1e-5, atol=1e-6)  # float32 rounding of another memory layout


def test_a_replaced_pattern_mixes_the_values_with_the_new_weights(decoder):
    ids = texts(5)
    layer, head = 2, 3
    pattern_name = hook_name(DECODER_SELF, layer, "pattern")

    def uniform_over_the_past(pattern: torch.Tensor, hook) -> torch.Tensor:
        new = pattern.clone()
        n = pattern.size(-1)
        new[:, head] = torch.tril(torch.ones(n, n)) / torch.arange(1, n + 1)[:, None]
        return new

    _, cap = run(decoder, ids, [(pattern_name, uniform_over_the_past)])
    v = repeat_kv(cap[hook_name(DECODER_SELF, layer, "v")], 2)[0, head]  # (T, d_k), this head's values
    expected = torch.cumsum(v, 0) / torch.arange(1, v.size(0) + 1)[:, None]  # the running mean
    torch.testing.assert_close(cap[hook_name(DECODER_SELF, layer, "context")][0, head], expected, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(cap[pattern_name][0, head].sum(-1), torch.ones(ids.size(1)))


def test_replaced_scores_go_through_the_softmax_and_the_mask():
    model = build("decoder-only")
    ids = texts(6)
    name = hook_name(DECODER_SELF, 0, "scores")
    _, cap = run(model, ids, [(name, lambda scores, hook: torch.where(torch.isinf(scores), scores, torch.zeros_like(scores)))],
                 kinds=("pattern", "scores"))
    pattern = cap[hook_name(DECODER_SELF, 0, "pattern")][0]
    n = ids.size(1)
    torch.testing.assert_close(pattern, (torch.tril(torch.ones(n, n)) / torch.arange(1, n + 1)[:, None]).expand_as(pattern))


def test_a_capture_records_what_flows_on_whichever_block_is_outer(decoder):
    ids = texts(7)
    name = hook_name(DECODER_SELF, 1, "context")
    removal = {name: HeadRemoval([0, 3])}
    with torch.no_grad(), capture(kinds=("context",)) as outer, ablate(removal):
        decoder(ids)
    with torch.no_grad(), ablate(removal), capture(kinds=("context",)) as inner:
        decoder(ids)
    for cap in (outer, inner):
        assert float(cap[name][:, [0, 3]].abs().max()) == 0.0 and float(cap[name][:, [1, 2]].abs().max()) > 0


def test_reading_functions_change_nothing_and_everything_is_gone_after(decoder):
    ids = texts(8)
    seen: list[str] = []
    plain, _ = run(decoder, ids)
    read, _ = run(decoder, ids, [("decoder.layers.*", lambda x, hook: seen.append(hook.name))])
    torch.testing.assert_close(read, plain, rtol=0, atol=0)
    assert len(seen) == len(decoder.hook_names) and seen[0] == "decoder.layers.0.resid_pre"
    assert not interventions_active() and not capture_active()
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in decoder.modules())


def test_a_replacement_of_another_shape_or_from_a_capture_is_refused(decoder):
    name = hook_name(DECODER_SELF, 0, "context")
    with pytest.raises(ValueError, match="shape"), torch.no_grad():
        run_with_hooks(decoder, texts(9), fwd_hooks=[(name, lambda x, hook: x[:, :1])])
    assert not interventions_active()


def test_an_encoder_decoder_patches_cross_attention_too():
    model = build("encoder-decoder")
    src, tgt = texts(10, 8), texts(11, 6)
    name = hook_name(("decoder", "cross_attn"), 1, "context")
    with torch.no_grad(), ablate({name: HeadRemoval(range(4))}), capture(kinds=("context",)) as cap:
        model(src, tgt)
    assert float(cap[name].abs().max()) == 0.0
    encoder_name = hook_name(ENCODER_SELF, 0, "context")
    assert float(cap[encoder_name].abs().max()) > 0


def test_two_concurrent_sessions_interventions_never_mix(decoder):
    """Each thread patches a different head with its own source; every result equals the same
    intervention run alone."""
    ids = texts(12)
    name = hook_name(DECODER_SELF, 1, "context")

    def patch_for(head: int, value: float):
        def patch(context: torch.Tensor, hook) -> torch.Tensor:
            new = context.clone()
            new[:, head] = value
            return new
        return patch

    alone = {head: run(decoder, ids, [(name, patch_for(head, float(head + 1)))])[0] for head in range(4)}
    failures: list[int] = []

    def session(head: int) -> None:
        for _ in range(15):
            out, cap = run(decoder, ids, [(name, patch_for(head, float(head + 1)))])
            if not torch.equal(out, alone[head]) or not bool((cap[name][:, head] == head + 1).all()):
                failures.append(head)

    threads = [threading.Thread(target=session, args=(head,)) for head in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
