"""Memory planned before a run (runtime/memory_plan.py): a run that would not fit is refused in one
sentence with the bytes it needs, those free and the longest input that fits (free memory injected);
the estimate of a real checkpoint's run is within a factor of 2 of the tensors it actually makes —
a layer's working set measured with hooks on every module of it, the capture's arrays, the long
path's kept q/k — and the backend checks before it runs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from test_long_input import long_text
from test_long_window import mistral
from test_ours_decoder import save

from attention_viz.backends.registry import load_backend
from attention_viz.cli import main
from attention_viz.errors import ModelError
from attention_viz.runtime import memory_plan
from attention_viz.runtime.memory_plan import (
    GB, HEADROOM, check_capture, check_long, free_bytes, largest_length, layer_room, long_bytes, plan_capture,
    plan_long,
)  # fmt: skip


@pytest.fixture(scope="module")
def backend(tmp_path_factory):
    """A Llama checkpoint (2 layers, 4 heads reading 2 K/V heads) that reads 4096 positions."""
    return load_backend(f"hf:{save(tmp_path_factory.mktemp('llama'), 'llama', max_position_embeddings=4096)}")


def numbers(message: str) -> tuple[float, float, int]:
    """(needed GB, free GB, longest length) as the refusal writes them."""
    found = re.search(r"needs about ([\d.]+) GB on \w+ .* but ([\d.]+) GB is free, of which a run plans on 90%: "
                      r"at most (\d+) tokens fit", message)
    assert found, message
    return float(found[1]), float(found[2]), int(found[3])


def test_a_capture_that_does_not_fit_is_refused_with_the_numbers(backend):
    model, free = backend.model, 2 * 10**9
    plan = plan_capture(model, 30000, None, free)
    assert not plan.fits and plan.needed > HEADROOM * free
    with pytest.raises(ModelError) as refused:
        check_capture(model, "tiny", 30000, None, free=free, longer="; the head view reads longer texts blockwise")
    message = str(refused.value)
    assert "\n" not in message and message.startswith("tiny: capturing every head of 30000 tokens")
    needed, free_gb, longest = numbers(message)
    assert needed == round(plan.needed / GB, 2) and free_gb == 2.0
    assert plan_capture(model, longest, None, free).fits and not plan_capture(model, longest + 1, None, free).fits
    assert 1000 < longest < 30000 and message.endswith("blockwise")
    # the T² arrays are the bulk: every layer's pattern and scores, heads × T² float32 each
    assert plan.kept >= 2 * 2 * 4 * 30000**2 * 4
    assert check_capture(model, "tiny", longest, None, free=free).fits  # the longest that fits is let through


def test_the_long_path_plans_its_kept_queries_and_keys():
    """Far cheaper than a capture: 8k tokens fit where a capture of 1k does not."""
    model, free = mistral(2, 65536, 64), 200 * 10**6
    with pytest.raises(ModelError):
        check_capture(model, "tiny", 2048, ("pattern",), free=free)
    assert check_long(model, "tiny", 8192, free=free).fits
    with pytest.raises(ModelError, match=r"reading 65536 tokens blockwise needs about [\d.]+ GB") as refused:
        check_long(model, "tiny", 65536, free=free // 4)
    longest = int(re.search(r"at most (\d+) tokens fit", str(refused.value))[1])
    assert longest == largest_length(lambda n: plan_long(model, n, free // 4), 65536) > 0
    with pytest.raises(ModelError, match="not even one token fits"):
        check_long(model, "tiny", 100, free=1000)


def layer_tensor_bytes(layer: torch.nn.Module, run) -> int:
    """Bytes of the distinct tensors every module of ``layer`` hands on during ``run()`` (hook points
    included: q, k, v, scores, pattern, context), all counted as if alive at once."""
    seen: dict[int, int] = {}

    def record(_module, _inputs, output):
        for tensor in output if isinstance(output, tuple) else (output,):
            if isinstance(tensor, torch.Tensor):
                seen[tensor.untyped_storage().data_ptr()] = tensor.untyped_storage().nbytes()

    handles = [module.register_forward_hook(record) for module in layer.modules()]
    try:
        run()
    finally:
        for handle in handles:
            handle.remove()
    return sum(seen.values())


@pytest.mark.parametrize("words", [40, 600])
def test_the_estimate_of_a_real_run_is_within_a_factor_of_2_of_its_tensors(backend, words):
    text = long_text(words)
    length = len(backend.tokenize(text)[0])
    plan = plan_capture(backend.model, length, None)
    captured = {}

    def run() -> None:
        captured["result"] = backend.run(text, kinds=None)

    working = layer_tensor_bytes(backend.model.decoder.layers[0], run)
    result = captured["result"]
    kept = sum(array.nbytes for array in result.arrays.values())
    assert 0.5 <= plan.kept / kept <= 2.0, (plan.kept, kept)
    assert 0.5 <= plan.activations / working <= 2.0, (plan.activations, working)
    assert 0.5 <= (plan.activations + plan.kept) / (working + kept) <= 2.0
    assert plan.weights == sum(p.numel() * 4 for p in backend.model.parameters()) + sum(
        b.numel() * b.element_size() for b in backend.model.buffers())  # fmt: skip


def test_the_long_paths_estimate_is_what_it_keeps(backend):
    tokens, _ = backend.long_tokens(long_text(2500))
    long = backend.long_input(tokens)
    long.read_every_head(means=False)  # every layer's q/k and every head's normalizers
    kept = sum(array.nbytes for layer in range(long.n_layers)
               for array in (*long.kept.layer(layer), long.kept.normalizers(layer)))  # fmt: skip
    estimate = memory_plan.long_bytes(backend.model, len(tokens))
    assert 0.5 <= estimate / kept <= 2.0, (estimate, kept)


def test_the_backend_checks_before_it_runs(backend, monkeypatch):
    monkeypatch.setattr(memory_plan, "free_bytes", lambda device: 3 * 10**6)
    refusal = r"capturing every head of \d+ tokens needs .* at most \d+ tokens fit; the head view"
    with pytest.raises(ModelError, match=refusal):
        backend.run(long_text(600), kinds=None)
    assert backend.run(long_text(20)).n_layers("decoder") == 2  # a short text still fits
    tokens, _ = backend.long_tokens(long_text(3000))
    with pytest.raises(ModelError, match=r"reading \d+ tokens blockwise needs"):
        backend.long_input(tokens)


def test_free_memory_is_asked_of_the_machine():
    total = next(int(line.split()[1]) * 1024 for line in Path("/proc/meminfo").read_text().splitlines()
                 if line.startswith("MemTotal:"))  # fmt: skip
    assert 0 < free_bytes("cpu") <= total and 0 < memory_plan._meminfo_available() <= total


def test_the_command_line_refuses_in_one_line(backend, monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(memory_plan, "free_bytes", lambda device: 3 * 10**6)
    code = main(["run", "--model", backend.name, "--text", long_text(600), "--kinds", "all",
                 "--out", str(tmp_path / "r.npz")])  # fmt: skip
    error = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in error and "Traceback" not in error and not (tmp_path / "r.npz").exists()
    needed, free, longest = numbers(error)
    assert free == 0.0 and needed > 0.01 and 0 < longest < 600  # 3 MB free is 0.00 GB


def test_the_long_path_is_planned_a_layer_at_a_time(backend):
    """The landing needs one layer's q/k; each further layer is planned with what is free then: no room
    needed while it fits, the bytes short where moving kept layers to host memory would do, else a refusal
    with the numbers."""
    model, length = backend.model, 3000
    one = plan_long(model, length, free=10**12)
    assert one.kept == long_bytes(model, length, 1) < plan_long(model, length, free=10**12, layers=None).kept
    room = layer_room(model, "llama", length, free=lambda: 10**12)
    assert room(1, 0) == 0
    tight = int(one.needed / HEADROOM) - 1000  # a few hundred bytes short of one more layer
    room = layer_room(model, "llama", length, free=lambda: tight)
    assert 0 < room(1, 10**6) <= 1000
    with pytest.raises(ModelError, match=r"llama: reading layer 1 of 3000 tokens blockwise needs about .* GB is "
                                         r"free.*at most \d+ tokens fit \(earlier layers' q/k moved"):
        room(1, 10)
