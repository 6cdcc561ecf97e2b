"""Hook points: names from module paths, per-call capture, nothing left behind, no cross-talk."""

import threading

import pytest
import torch

from attention_viz.core.hooks import HookPoint, capture, capture_active
from attention_viz.core.model import Transformer, TransformerConfig

CONFIG = TransformerConfig(shape="encoder-decoder", vocab_size=40, d_model=16, h=2, d_ff=32, N=2, dropout=0.0)


@pytest.fixture(scope="module")
def model() -> Transformer:
    torch.manual_seed(0)
    return Transformer(CONFIG).eval()


def no_torch_hooks(model: torch.nn.Module) -> bool:
    return all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())


def test_hook_names_are_the_module_paths(model):
    for path, module in model.named_modules():
        if isinstance(module, HookPoint):
            assert module.name == path
    assert "decoder.layers.1.cross_attn.context" in model.hook_names


def test_default_capture_is_patterns_only_and_filters_by_name(model):
    src, tgt = torch.randint(0, 40, (1, 5)), torch.randint(0, 40, (1, 4))
    with torch.no_grad(), capture() as cap:
        model(src, tgt)
    assert cap.names_recorded() and all(n.endswith(".pattern") for n in cap.names_recorded())
    assert len(cap.names_recorded()) == 6
    with torch.no_grad(), capture(kinds=None, names=["decoder.layers.0.cross_attn.*"]) as cap:
        model(src, tgt)
    assert sorted(cap.names_recorded()) == sorted(
        f"decoder.layers.0.cross_attn.{k}" for k in ("q", "k", "v", "scores", "pattern", "context")
    )
    assert cap["decoder.layers.0.cross_attn.q"].shape == (1, 2, 4, 8)  # (B, h, T_target, d_k)
    assert cap["decoder.layers.0.cross_attn.k"].shape == (1, 2, 5, 8)  # keys come from the source
    assert cap["decoder.layers.0.cross_attn.pattern"].shape == (1, 2, 4, 5)


def test_unknown_kind_is_refused(model):
    with pytest.raises(ValueError, match="unknown hook kinds"):
        with capture(kinds=("attn",)):
            pass


def test_nothing_recorded_outside_a_capture_and_no_hook_remains(model):
    src, tgt = torch.randint(0, 40, (1, 5)), torch.randint(0, 40, (1, 4))
    with torch.no_grad(), capture() as cap:
        model(src, tgt)
    before = {n: len(v) for n, v in cap.calls.items()}
    with torch.no_grad():
        model(src, tgt)  # after the capture: must not reach the old recorder
    assert {n: len(v) for n, v in cap.calls.items()} == before
    assert not capture_active() and no_torch_hooks(model)


def test_hooks_are_removed_when_the_forward_raises(model):
    with pytest.raises(ValueError):
        with torch.no_grad(), capture():
            assert capture_active()
            model(torch.randint(0, 40, (1, 5)), None)  # encoder–decoder without a target
    assert not capture_active() and no_torch_hooks(model)
    with capture():  # and a new capture can start
        pass


def test_captures_do_not_nest():
    with capture():
        with pytest.raises(RuntimeError, match="already active"):
            with capture():
                pass
    assert not capture_active()


def test_decoding_steps_are_kept_in_order(model):
    src = torch.randint(4, 40, (1, 5))
    with capture(names=["decoder.layers.0.self_attn.pattern"]) as cap:
        out = model.greedy_decode(torch.tensor([[1]]), 4, src=src)
    steps = cap.steps("decoder.layers.0.self_attn.pattern")
    assert [s.shape[-1] for s in steps] == list(range(1, out.shape[1]))
    # causality: the last step's rows for earlier positions equal what each earlier step computed
    for step in steps:
        n = step.shape[-1]
        assert torch.allclose(steps[-1][..., :n, :n], step, atol=1e-6)


def test_concurrent_captures_never_mix(model):
    """8 threads × 20 captures on one shared model, each with its own input."""
    torch.manual_seed(1)
    inputs = [(torch.randint(0, 40, (1, 3 + t)), torch.randint(0, 40, (1, 2 + t))) for t in range(8)]
    with torch.no_grad(), capture(kinds=None) as cap:
        model(*inputs[0])
    with torch.no_grad():
        expected = []
        for src, tgt in inputs:
            with capture(kinds=None) as cap:
                model(src, tgt)
            expected.append({n: cap[n].clone() for n in cap.names_recorded()})
    errors: list[str] = []
    barrier = threading.Barrier(8)

    def worker(t: int) -> None:
        src, tgt = inputs[t]
        barrier.wait()
        for _ in range(20):
            with torch.no_grad(), capture(kinds=None) as cap:
                model(src, tgt)
            if sorted(cap.names_recorded()) != sorted(expected[t]):
                errors.append(f"thread {t}: wrong set of names")
            for name, tensor in expected[t].items():
                if len(cap.steps(name)) != 1 or not torch.equal(cap[name], tensor):
                    errors.append(f"thread {t}: {name} differs")

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors[:5]
    assert not capture_active() and no_torch_hooks(model)
