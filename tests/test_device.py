"""Device and dtype as a choice (runtime/device.py): the request, else ATTENTION_VIZ_DEVICE /
ATTENTION_VIZ_DTYPE, else auto; models placed when they load, one cache entry per placement; attention
in float32 whatever the weights' dtype; one-line refusals. All on the CPU: CUDA's absence is what
the refusals are about (tests/test_gpu.py runs where there is a GPU)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import attention_viz as av
from attention_viz.backends import registry
from attention_viz.backends.registry import MODELS, load_backend, planned_placement
from attention_viz.cli import main
from attention_viz.cli.main import build_parser
from attention_viz.core.attention import scaled_dot_product_attention
from attention_viz.errors import ModelError
from attention_viz.runtime import device
from attention_viz.runtime.device import CPU, DEVICE_ENV, DTYPE_ENV, Placement, resolve
from attention_viz.runtime.model_cache import ModelCache

SENTENCE = "The animal didn't cross the street because it was too tired."
LOOSE = 2e-2  # bfloat16 keeps 8 bits of mantissa: patterns agree with float32 to about 1e-2


@pytest.fixture(autouse=True)
def no_operator_setting(monkeypatch):
    monkeypatch.delenv(DEVICE_ENV, raising=False)
    monkeypatch.delenv(DTYPE_ENV, raising=False)


@pytest.fixture
def fresh_cache(monkeypatch):
    monkeypatch.setattr(registry, "_loaded", ModelCache(capacity=8))


def test_auto_is_cuda_where_there_is_a_gpu_with_its_default_dtype():
    assert resolve(available=False) == Placement("cpu", "float32", automatic=True)
    assert resolve(available=True) == Placement("cuda", "bfloat16", automatic=True)
    assert resolve("auto", "float16", available=True) == Placement("cuda", "float16", True, dtype_chosen=True)
    assert resolve("cpu", available=True) == Placement("cpu", "float32")
    assert resolve(" CUDA ", available=True).device == "cuda"


def test_the_request_wins_over_the_environment_which_wins_over_auto(monkeypatch):
    monkeypatch.setenv(DEVICE_ENV, "cpu")
    monkeypatch.setenv(DTYPE_ENV, "bfloat16")
    assert resolve(available=True) == Placement("cpu", "bfloat16", dtype_chosen=True)
    assert resolve("cuda", "float32", available=True) == Placement("cuda", "float32", dtype_chosen=True)
    monkeypatch.setenv(DEVICE_ENV, "  ")  # blank: unset
    assert resolve(available=True).device == "cuda"


def test_impossible_requests_are_one_line_naming_their_source(monkeypatch):
    with pytest.raises(ModelError, match=r"^device cuda: CUDA is not available on this machine .*cpu or auto$"):
        resolve("cuda", available=False)
    with pytest.raises(ModelError, match=r"^device must be one of auto, cpu, cuda; got 'gpu'$"):
        resolve("gpu")
    with pytest.raises(ModelError, match=r"^dtype must be one of float32, bfloat16, float16; got 'int8'$"):
        resolve("cpu", "int8")
    monkeypatch.setenv(DEVICE_ENV, "cuda")
    with pytest.raises(ModelError, match=f"^{DEVICE_ENV} cuda: CUDA is not available"):
        resolve(available=False)
    monkeypatch.setenv(DTYPE_ENV, "fp8")
    with pytest.raises(ModelError, match=f"^{DTYPE_ENV} must be one of"):
        resolve("cpu")


def test_a_cpu_only_model_stays_on_the_cpu_under_auto_and_refuses_the_rest():
    auto_gpu = resolve(available=True)
    assert auto_gpu.on_cpu("m") == CPU
    assert CPU.on_cpu("m") is CPU
    asked_for = (resolve("cuda", available=True), resolve("cpu", "bfloat16"), resolve("auto", "float16", available=True))
    for asked in asked_for:
        with pytest.raises(ModelError, match=r"^m runs on the CPU in float32 only; asked for \w+, \w+"):
            asked.on_cpu("m")


def test_scores_and_patterns_are_float32_when_the_weights_are_half():
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 4, 7, 16, generator=generator) for _ in range(3))
    exact = scaled_dot_product_attention(q, k, v, torch.ones(7, 7, dtype=torch.bool).tril())
    for dtype in (torch.bfloat16, torch.float16):
        half = scaled_dot_product_attention(q.to(dtype), k.to(dtype), v.to(dtype),
                                            torch.ones(7, 7, dtype=torch.bool).tril())
        assert half.pattern.dtype == half.scores.dtype == torch.float32
        assert half.context.dtype == dtype  # what W_O reads stays in the model's dtype
        assert torch.allclose(half.pattern.sum(-1), torch.ones(2, 4, 7), atol=1e-6)
        assert (half.pattern - exact.pattern).abs().max() < LOOSE
        assert (half.pattern.triu(1) == 0).all()


@pytest.mark.slow
def test_minilm_in_bfloat16_on_the_cpu_agrees_with_float32(fresh_cache):
    kinds = ("pattern", "scores", "q")
    exact = av.run("minilm", SENTENCE, kinds=kinds, device="cpu")
    half = av.run("minilm", SENTENCE, kinds=kinds, device="cpu", dtype="bfloat16")
    assert half.arrays.keys() == exact.arrays.keys()
    assert {a.dtype for a in half.arrays.values()} == {np.dtype(np.float32)}  # numpy has no bfloat16
    patterns = [name for name in exact.arrays if name.endswith(".pattern")]
    assert len(patterns) == 6
    worst = max(float(np.abs(half.arrays[n] - exact.arrays[n]).max()) for n in patterns)
    assert 0 < worst < LOOSE  # not the same model run twice, and close
    for name in patterns:
        assert np.allclose(half.arrays[name].sum(-1), 1, atol=1e-5)  # normalized in float32


def test_one_model_on_two_placements_is_two_cache_entries(fresh_cache):
    exact = load_backend("induction", device="cpu")
    half = load_backend("induction", device="cpu", dtype="bfloat16")
    assert half is not exact and load_backend("induction", device="cpu", dtype="bfloat16") is half
    assert str(exact.placement) == "cpu, float32" and str(half.placement) == "cpu, bfloat16"
    assert next(half.model.parameters()).dtype == torch.bfloat16
    assert registry._loaded.keys() == ["induction on cpu/float32", "induction on cpu/bfloat16"]
    # the forward with its outputs and an ablation works in bfloat16 too (the removal rows follow the model)
    from attention_viz.analysis.ablation import Ablation
    from attention_viz.core.names import DECODER_SELF, hook_name

    config = half.model.config
    means = {hook_name(DECODER_SELF, 1, "context"): np.full((config.h, config.d_k), 0.1, dtype=np.float32)}
    ablation = Ablation(((DECODER_SELF, 1, 0),), "mean", means)  # replacement rows: built where the model is
    result, outputs = half.forward("a b c a b c", ablation=ablation)
    _, exact_outputs = exact.forward("a b c a b c", ablation=ablation)
    assert outputs.hidden.dtype == np.float32 and outputs.log_probs.dtype == np.float32
    assert np.abs(outputs.log_probs - exact_outputs.log_probs).max() < 0.1


def test_models_that_run_on_the_cpu_only_say_so(fresh_cache):
    assert [n for n, info in MODELS.items() if not info.placeable] == ["toy-translate", "toy-translate-rnn",
                                                                      "show-attend-tell"]
    with pytest.raises(ModelError, match="^toy-translate runs on the CPU in float32 only"):
        load_backend("toy-translate", device="cpu", dtype="bfloat16")
    assert load_backend("toy-translate").placement.key == "cpu/float32"  # auto here: the CPU, where it would stay


def test_the_sidebar_placement_is_known_before_loading(monkeypatch):
    monkeypatch.setattr(device, "cuda_available", lambda: True)  # as on a GPU machine
    assert str(planned_placement("minilm")) == "cuda, bfloat16"
    assert str(planned_placement("show-attend-tell")) == "cpu, float32"  # auto leaves it on the CPU
    monkeypatch.setenv(DTYPE_ENV, "float16")
    with pytest.raises(ModelError, match="runs on the CPU in float32 only"):
        planned_placement("show-attend-tell")
    from attention_viz.ui.inputs import model_placement

    assert model_placement("minilm") == "cuda, float16"
    assert model_placement("show-attend-tell") is None  # the run says why, in one line


def test_every_command_that_runs_a_model_takes_device_and_dtype():
    parser = build_parser()
    for command in ("run", "export", "heads", "patch", "caption"):
        args = parser.parse_args([command, "--device", "cpu", "--dtype", "bfloat16"] + REQUIRED[command])
        assert (args.device, args.dtype) == ("cpu", "bfloat16"), command
        assert (parser.parse_args([command] + REQUIRED[command]).device is None), command  # the environment's


REQUIRED = {"run": ["--text", "x", "--out", "x.npz"], "export": ["--text", "x", "--view", "head", "--out", "x.html"],
            "heads": [], "patch": [], "caption": ["--scene", "1", "--out", "x.npz"]}


def test_the_cli_refuses_cuda_without_one_in_one_line(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(device, "cuda_available", lambda: False)
    out = str(tmp_path / "r.npz")
    for args, message in (
        (["run", "--text", "hi", "--device", "cuda", "--out", out], "error: device cuda: CUDA is not available"),
        (["heads", "--device", "cuda"], "error: device cuda: CUDA is not available"),
        (["patch", "--model", "induction", "--device", "cuda"], "error: device cuda: CUDA is not available"),
        (["caption", "--scene", "1", "--dtype", "float16", "--out", out],
         "error: show-attend-tell runs on the CPU in float32 only"),
    ):
        assert main(args) == 2, args
        err = capsys.readouterr().err
        assert err.startswith(message) and err.count("\n") == 1, err
    monkeypatch.setenv(DEVICE_ENV, "gpu")
    assert main(["run", "--text", "hi", "--out", out]) == 2
    assert capsys.readouterr().err == f"error: {DEVICE_ENV} must be one of auto, cpu, cuda; got 'gpu'\n"
    with pytest.raises(SystemExit) as exit_:
        main(["run", "--text", "hi", "--dtype", "int8", "--out", out])
    assert exit_.value.code == 2 and "invalid choice: 'int8'" in capsys.readouterr().err


def test_the_cli_runs_in_bfloat16_and_saves_float32(fresh_cache, tmp_path, capsys):
    out = tmp_path / "r.npz"
    assert main(["run", "--text", SENTENCE, "--device", "cpu", "--dtype", "bfloat16", "--out", str(out)]) == 0
    data = np.load(out)
    pattern = data["encoder.layers.3.self_attn.pattern"]
    assert pattern.dtype == np.float32 and np.allclose(pattern.sum(-1), 1, atol=1e-5)


@pytest.mark.slow
def test_the_app_runs_on_the_operators_device_and_says_so_in_the_sidebar(monkeypatch, fresh_cache):
    from apphelpers import app, charts

    monkeypatch.setenv(DEVICE_ENV, "cpu")
    monkeypatch.setenv(DTYPE_ENV, "bfloat16")
    at = app()
    assert not at.exception and not at.error
    assert "Device: cpu, bfloat16." in [c.value for c in at.sidebar.caption]
    assert charts(at) or at.get("bidi_component")  # the head view drew, from the bfloat16 model
    assert load_backend("minilm").placement.key == "cpu/bfloat16"  # the one the app loaded


def test_the_teaching_pages_computations_work_on_a_placed_model(fresh_cache):
    """Inside one head recomputes in float32 from a float32 copy of the layer; the padded batch runs
    where the model is. Both hand back float32 numpy close to the float32 model's."""
    exact = load_backend("minilm", device="cpu")
    half = load_backend("minilm", device="cpu", dtype="bfloat16")
    ids = exact.tokenize(SENTENCE)[0].ids
    a, b = exact.inside_head(ids, 2, 3), half.inside_head(ids, 2, 3)
    assert b.pattern.dtype == b.w_q.dtype == np.float32
    assert 0 < np.abs(a.pattern - b.pattern).max() < LOOSE  # its input came through two bfloat16 layers
    assert next(half.model.parameters()).dtype == torch.bfloat16  # the copy was the page's, not the model's
    batch = half.padded_batch([ids, ids[:5]], 1)
    assert batch.patterns.dtype == np.float32 and batch.patterns.shape[0] == 2
    assert np.abs(batch.patterns[1, :, :5, :5] - batch.alone[1]).max() < LOOSE


@pytest.mark.slow
def test_hf_checkpoints_are_read_in_the_asked_dtype(tmp_path, fresh_cache):
    """Our decoder reads a checkpoint's tensors straight into bfloat16; transformers is asked for the dtype
    too. Both hand back float32 patterns close to the float32 load's."""
    from test_ours_decoder import TEXT, save

    ours = save(tmp_path / "llama", "llama")
    theirs = save(tmp_path / "scaled", "llama")  # dynamic rotary scaling: a variant only transformers runs
    config = (theirs / "config.json").read_text()
    (theirs / "config.json").write_text(config.replace('"rope_type": "default"', '"rope_type": "dynamic", "factor": 2.0'))
    for folder, implementation in ((ours, "ours"), (theirs, "transformers")):
        exact = load_backend(f"hf:{folder}", device="cpu")
        half = load_backend(f"hf:{folder}", device="cpu", dtype="bfloat16")
        assert half.implementation == implementation and str(half.placement) == "cpu, bfloat16"
        assert {p.dtype for p in half.model.parameters()} == {torch.bfloat16}
        a, b = exact.run(TEXT), half.run(TEXT)
        assert {x.dtype for x in b.arrays.values()} == {np.dtype(np.float32)}
        names = [n for n in a.arrays if n.endswith(".pattern")]
        assert names and max(float(np.abs(a.arrays[n] - b.arrays[n]).max()) for n in names) < LOOSE
