"""The Show, Attend and Tell captioner: attention invariants, the overlay's alignment with the image
grid, deterministic training, and the shipped model looking at the objects it names."""

from __future__ import annotations

import base64
import io

import numpy as np
import pytest
import torch
from PIL import Image
from safetensors.torch import load_file

from attention_viz.backends.captioner import CaptionerBackend
from attention_viz.backends.registry import MODELS
from attention_viz.core.caption_result import CaptionResult
from attention_viz.errors import ModelError
from attention_viz.figures.image import DIM, caption_strip_figure, overlay, upsample, word_attention_figure
from attention_viz.core.names import CROSS, hook_name
from attention_viz.trained import caption_checkpoint, scenes
from attention_viz.trained.captioner import CaptionerConfig, ShowAttendTell, doubly_stochastic_penalty
from attention_viz.trained.evaluate_captioner import evaluate
from attention_viz.trained.train_captioner import caption_vocab, train

SMOKE = dict(steps=3, tiny=True, dev_size=4, eval_every=0, log=lambda _: None)


@pytest.fixture(scope="module")
def shipped() -> CaptionerBackend:
    return CaptionerBackend.from_folder("show-attend-tell", MODELS["show-attend-tell"].locate())


def test_hook_names_come_from_the_module_path():
    model = ShowAttendTell(CaptionerConfig(vocab_size=len(caption_vocab())))
    assert hook_name(CROSS, 0, "pattern") in model.hook_names
    assert hook_name(CROSS, 0, "scores") in model.hook_names


def test_each_word_attention_sums_to_one(shipped):
    for seed in (0, 7, 123456789):
        result = shipped.caption_scene(seed)
        rows, cols = result.grid
        assert (rows, cols) == (8, 8) and result.attention.shape == (len(result.words), rows, cols)
        assert np.allclose(result.attention.sum(axis=(1, 2)), 1.0, atol=1e-5)
        assert (result.attention >= 0).all()


def test_run_captures_every_step_under_the_cross_attention_name(shipped):
    result = shipped.run("scene 7")
    pattern = result.pattern(CROSS, 0)
    assert pattern.shape == (1, len(result.target_tokens), 64)  # one head, <bos> + words, regions
    assert np.allclose(pattern.sum(-1), 1.0, atol=1e-5)
    assert result.meta["predicted"][-1] == "<eos>"
    assert len(result.tokens) == 64 and result.tokens.labels[9] == "1,1"


def test_teacher_forcing_on_the_greedy_caption_gives_the_same_maps(shipped):
    greedy = shipped.run("scene 11")
    forced = shipped.run("scene 11", target=greedy.meta["caption"])
    assert forced.meta["predicted"] == greedy.meta["predicted"]
    assert np.allclose(forced.pattern(CROSS, 0), greedy.pattern(CROSS, 0), atol=1e-5)


@pytest.mark.parametrize("text", ["The animal didn't cross the street.", "scene -3", "", "scene 99999999999999999999"])
def test_text_that_names_no_scene_is_refused(shipped, text):
    with pytest.raises(ModelError, match="captions images"):
        shipped.run(text)


def test_wrong_image_shape_and_kinds_refused(shipped):
    with pytest.raises(ModelError, match="64×64"):
        shipped.run_image(np.zeros((32, 32, 3), dtype=np.uint8))
    with pytest.raises(ModelError, match="captures only"):
        shipped.run("scene 1", kinds=("q",))


def test_raw_overlay_lights_exactly_the_attended_cell():
    image = np.full((64, 64, 3), 200, dtype=np.uint8)
    for r, c in [(0, 0), (2, 5), (7, 7), (6, 1)]:
        one_hot = np.zeros((8, 8))
        one_hot[r, c] = 1.0
        raw = upsample(one_hot, 64, 64, smooth=False)
        expected = np.zeros((64, 64))
        expected[8 * r : 8 * r + 8, 8 * c : 8 * c + 8] = 1.0
        assert np.array_equal(raw, expected)
        shown = overlay(image, one_hot, smooth=False, scale=4)  # 256 × 256
        lit = shown[..., 0] == 200
        cell = np.zeros((256, 256), dtype=bool)
        cell[32 * r : 32 * r + 32, 32 * c : 32 * c + 32] = True
        assert np.array_equal(lit, cell)
        assert (shown[~cell] == round(200 * DIM)).all()


def test_smooth_overlay_peaks_inside_the_attended_cell():
    for r, c in [(0, 0), (3, 4), (7, 2)]:
        one_hot = np.zeros((8, 8))
        one_hot[r, c] = 1.0
        smooth = upsample(one_hot, 64, 64, smooth=True)
        peak = smooth == smooth.max()
        rows, cols = np.nonzero(peak)
        assert (rows // 8 == r).all() and (cols // 8 == c).all()
        assert smooth[8 * r : 8 * r + 8, 8 * c : 8 * c + 8].sum() > 0.5 * smooth.sum()
    uniform = upsample(np.full((8, 8), 1 / 64), 64, 64, smooth=True)
    assert np.allclose(uniform, 1 / 64)


def pixels_of(trace) -> np.ndarray:
    """The pixels an image trace shows: its PNG source decoded."""
    header, data = trace.source.split(",", 1)
    assert header == "data:image/png;base64" and trace.z is None
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(data))).convert("RGB"))


def test_figures_take_plain_arrays(shipped):
    result = shipped.caption_scene(3)
    strip = caption_strip_figure(result.image, result.words, result.attention)
    assert len(strip.data) == len(result.words)
    one = word_attention_figure(result.image, result.attention[0], "a", smooth=False,
                                boxes=[b.box for b in result.boxes])
    assert np.array_equal(pixels_of(one.data[0]), overlay(result.image, result.attention[0], smooth=False))
    assert all(pixels_of(trace).shape == (128, 128, 3) for trace in strip.data)  # 64-pixel scenes, scale 2
    assert len(one.layout.shapes) == len(result.boxes) + 14  # boxes + 7 + 7 grid lines


def test_caption_npz_round_trip(shipped, tmp_path):
    result = shipped.caption_scene(5)
    result.save_npz(tmp_path / "r.npz")
    back = CaptionResult.load_npz(tmp_path / "r.npz")
    assert back.words == result.words and back.boxes == result.boxes and back.seed == 5
    assert np.array_equal(back.attention, result.attention) and np.array_equal(back.image, result.image)


def test_doubly_stochastic_penalty_by_hand():
    alpha = torch.zeros(1, 3, 4)
    alpha[0, 0, 0] = alpha[0, 1, 0] = 1.0  # region 0 twice
    alpha[0, 2, 1] = 1.0  # a padding step: not counted
    steps = torch.tensor([[True, True, False]])
    # coverage (2, 0, 0, 0) → (1-2)² + 1 + 1 + 1
    assert doubly_stochastic_penalty(alpha, steps).item() == pytest.approx(4.0)


def test_tiny_training_is_deterministic_and_loadable(tmp_path):
    threads = torch.get_num_threads()
    train(tmp_path / "a", seed=3, **SMOKE)
    train(tmp_path / "b", seed=3, **SMOKE)
    train(tmp_path / "c", seed=4, **SMOKE)
    assert torch.get_num_threads() == threads and not torch.are_deterministic_algorithms_enabled()
    a, b, c = (load_file(str(tmp_path / d / "model.safetensors")) for d in "abc")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert any(not torch.equal(a[k], c[k]) for k in a)
    loaded = caption_checkpoint.load(tmp_path / "a")
    assert loaded.training["hyperparameters"]["steps"] == 3
    result = CaptionerBackend("tiny", loaded).caption_scene(1)
    assert np.allclose(result.attention.sum(axis=(1, 2)), 1.0, atol=1e-5)


def test_a_broken_folder_is_refused(tmp_path):
    train(tmp_path / "m", seed=0, **SMOKE)
    (tmp_path / "m" / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(ModelError, match="cannot read"):
        CaptionerBackend.from_folder("x", tmp_path / "m")


def test_shipped_model_captions_held_out_scenes_and_looks_at_what_it_names(shipped):
    """200 held-out scenes (seeds training never draws, apart from the card's): the caption is the
    scene's own on at least 95 % of them and on 85 % of the three-object ones, and the attention of
    a correctly emitted colour or shape word peaks on the named object (a region drawn at random
    overlaps its box about one time in eight)."""
    scores = evaluate(shipped.model, shipped.vocab, scenes.split_seeds("test", 200, start=500_000))
    assert scores["exact_match"] >= 0.95
    assert scores["by_objects"]["3"]["n"] >= 40 and scores["by_objects"]["3"]["exact_match"] >= 0.85
    every, shape = scores["localization"]["all"], scores["localization"]["shape"]
    assert every["words"] >= 600
    assert every["peak_in_box"] >= 0.85
    assert every["mass_in_box"] > 4 * every["uniform_share"]
    assert shape["peak_in_box"] >= 0.75  # it looks again at the object when it writes the shape


def test_the_apps_default_scene_is_captioned_exactly(shipped):
    """Scene 7, the Image attention page's first scene: a yellow square, a blue triangle, a blue circle."""
    assert shipped.caption_scene(7).words == scenes.generate(7).caption
    assert " ".join(scenes.generate(7).caption) == "a yellow square left of a blue triangle above a blue circle"
