"""Vision Transformers through hf: on tiny random ViTs built offline: routing, parity of the captured
patterns with a direct transformers call, patch order, row sums, the [CLS] map's alignment with the
image grid, rollout, refusals, and the Image attention page in ViT mode (headless)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from PIL import Image
from streamlit.testing.v1 import AppTest
from transformers import ViTConfig, ViTForImageClassification, ViTImageProcessorPil, ViTModel

from apphelpers import TIMEOUT, messages
from attention_viz.analysis.patches import cls_maps, patch_attention, patch_labels, rollout_cls_maps
from attention_viz.analysis.rollout import rollout
from attention_viz.backends.registry import load_backend
from attention_viz.errors import ModelError
from attention_viz.figures.image import DIM, overlay, scale_for
from attention_viz.core.hooks import capture_active
from attention_viz.core.names import ENCODER_SELF

SIZE, PATCH, GRID = 32, 8, 4  # a 4×4 grid of 8-pixel patches
MEAN, STD = [0.2, 0.4, 0.6], [0.3, 0.2, 0.25]  # unlike ViT's default 0.5: shows the processor is read


def tiny_config(**changes) -> ViTConfig:
    settings = dict(image_size=SIZE, patch_size=PATCH, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                    intermediate_size=64, num_labels=3)
    return ViTConfig(**{**settings, **changes})


@pytest.fixture(scope="module")
def vit_folder(tmp_path_factory):
    """A bare ViTModel with its own image processor config (non-default mean and std)."""
    folder = tmp_path_factory.mktemp("tiny-vit")
    torch.manual_seed(0)
    ViTModel(tiny_config(), add_pooling_layer=False).save_pretrained(folder)
    ViTImageProcessorPil(size={"height": SIZE, "width": SIZE}, image_mean=MEAN, image_std=STD).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def classifier_folder(tmp_path_factory):
    """A ViTForImageClassification without a processor config: ViT's own normalization applies."""
    folder = tmp_path_factory.mktemp("tiny-vit-classifier")
    torch.manual_seed(1)
    ViTForImageClassification(tiny_config()).save_pretrained(folder)
    return folder


def random_image(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (SIZE, SIZE, 3), dtype=np.uint8)


def direct_attentions(folder, pixel_values: torch.Tensor) -> list[np.ndarray]:
    """transformers itself, eager, with no code of ours in between."""
    model = ViTModel.from_pretrained(folder, attn_implementation="eager", add_pooling_layer=False).eval()
    with torch.inference_mode():
        out = model(pixel_values=pixel_values, output_attentions=True)
    return [a[0].numpy() for a in out.attentions]


def test_hf_routes_a_vit_folder_to_patches_not_a_tokenizer(vit_folder):
    backend = load_backend(f"hf:{vit_folder}")
    assert backend.shape == "encoder-only" and backend.patch_grid == (GRID, GRID)
    result = backend.run("scene 7")
    assert result.meta["patch_grid"] == [GRID, GRID] and result.meta["seed"] == 7
    labels = result.tokens.labels
    assert labels[:3] == ("[CLS]", "patch (0, 0)", "patch (0, 1)") and labels[-1] == f"patch ({GRID - 1}, {GRID - 1})"
    assert len(labels) == 1 + GRID * GRID and result.tokens.special == (True,) + (False,) * GRID * GRID
    assert result.attentions() == [ENCODER_SELF] and result.n_layers() == 3
    assert result.stack().shape == (3, 4, 1 + GRID * GRID, 1 + GRID * GRID)
    # the image run(text) reads is the scene fitted to the model's input
    again = backend.run_image(backend.scene_image(7))
    np.testing.assert_array_equal(again.stack(), result.stack())


def test_captured_cls_rows_match_transformers_with_the_folders_processor(vit_folder):
    backend = load_backend(f"hf:{vit_folder}")
    image = random_image()
    ours = backend.run_image(image)
    processor = ViTImageProcessorPil.from_pretrained(vit_folder)
    pixels = processor(images=Image.fromarray(image), return_tensors="pt")["pixel_values"]
    expected = ((image / 255.0 - np.array(MEAN)) / np.array(STD)).transpose(2, 0, 1)
    np.testing.assert_allclose(pixels[0].numpy(), expected, atol=1e-5)  # the non-default mean/std is used
    theirs = direct_attentions(vit_folder, pixels)
    assert len(theirs) == ours.n_layers()
    for layer, attention in enumerate(theirs):
        np.testing.assert_allclose(ours.pattern(ENCODER_SELF, layer)[:, 0, :], attention[:, 0, :], atol=1e-6)
        np.testing.assert_allclose(ours.pattern(ENCODER_SELF, layer), attention, atol=1e-6)


def test_a_classifier_without_processor_config_gets_vits_own_normalization(classifier_folder):
    backend = load_backend(f"hf:{classifier_folder}")
    image = random_image(1)
    ours = backend.run_image(image)
    pixels = ViTImageProcessorPil(size={"height": SIZE, "width": SIZE})(images=Image.fromarray(image),
                                                                         return_tensors="pt")["pixel_values"]
    classifier = ViTForImageClassification.from_pretrained(classifier_folder, attn_implementation="eager").eval()
    with torch.inference_mode():
        out = classifier(pixel_values=pixels, output_attentions=True)
    for layer, attention in enumerate(out.attentions):
        np.testing.assert_allclose(ours.pattern(ENCODER_SELF, layer), attention[0].numpy(), atol=1e-6)
    top = int(out.logits[0].argmax())
    assert ours.meta["label"] == classifier.config.id2label[top]
    assert ours.meta["label_probability"] == pytest.approx(float(out.logits[0].softmax(-1)[top]), abs=1e-6)


def test_patch_r_c_is_the_image_block_at_row_r_column_c(vit_folder):
    """transformers' patch order is ours: token 1 + r·cols + c embeds pixels [r·p, (r+1)·p) × [c·p, (c+1)·p)."""
    model = ViTModel.from_pretrained(vit_folder, add_pooling_layer=False).eval()
    conv = model.embeddings.patch_embeddings.projection
    pixels = torch.randn(1, 3, SIZE, SIZE, generator=torch.Generator().manual_seed(3))
    with torch.inference_mode():
        embedded = model.embeddings.patch_embeddings(pixels)[0]  # (rows·cols, d)
        for index, label in enumerate(patch_labels(GRID, GRID)[1:]):
            r, c = divmod(index, GRID)
            assert label == f"patch ({r}, {c})"
            block = pixels[0, :, r * PATCH:(r + 1) * PATCH, c * PATCH:(c + 1) * PATCH]
            by_hand = (conv.weight * block).sum(dim=(1, 2, 3)) + conv.bias
            torch.testing.assert_close(embedded[index], by_hand, atol=1e-5, rtol=1e-5)


def test_every_row_sums_to_one_and_the_cls_map_holds_the_rest(vit_folder):
    result = load_backend(f"hf:{vit_folder}").run("scene 3")
    stack = result.stack()
    np.testing.assert_allclose(stack.sum(-1), 1.0, atol=1e-5)
    view = patch_attention(load_backend(f"hf:{vit_folder}").scene_image(3), stack, (GRID, GRID))
    assert view.cls.shape == (3, 4, GRID, GRID) and view.grid == (GRID, GRID)
    np.testing.assert_allclose(view.cls.sum(axis=(2, 3)) + view.cls_self, 1.0, atol=1e-5)
    np.testing.assert_array_equal(view.cls[1, 2].ravel(), stack[1, 2, 0, 1:])


def test_one_hot_cls_attention_on_patch_r_c_lights_exactly_that_cell():
    image = np.full((SIZE, SIZE, 3), 200, dtype=np.uint8)
    scale = scale_for(SIZE)
    cell = SIZE // GRID * scale
    for r in range(GRID):
        for c in range(GRID):
            pattern = np.full((2, 1 + GRID * GRID, 1 + GRID * GRID), 1.0 / (1 + GRID * GRID), dtype=np.float32)
            pattern[:, 0] = 0.0
            pattern[:, 0, 1 + r * GRID + c] = 1.0  # [CLS] looks only at patch (r, c)
            one = cls_maps(pattern, (GRID, GRID))[1]
            assert one[r, c] == 1.0 and one.sum() == 1.0
            pixels = overlay(image, one, smooth=False, scale=scale)[..., 0]
            lit = np.zeros(pixels.shape, dtype=bool)
            lit[r * cell:(r + 1) * cell, c * cell:(c + 1) * cell] = True
            assert np.all(pixels[lit] == 200)
            assert np.all(pixels[~lit] == round(200 * DIM))


def test_rollout_rows_sum_to_one_and_its_cls_map_is_their_patch_part(vit_folder):
    stack = load_backend(f"hf:{vit_folder}").run("scene 5").stack()
    rolled = rollout(stack)
    np.testing.assert_allclose(rolled.sum(-1), 1.0, atol=1e-5)
    maps = rollout_cls_maps(stack, (GRID, GRID))
    assert maps.shape == (3, GRID, GRID) and np.all(maps >= 0)
    np.testing.assert_allclose(maps.sum(axis=(1, 2)) + rolled[:, 0, 0], 1.0, atol=1e-5)
    # after layer 0 rollout is ½·(mean of heads) + ½·I on the [CLS] row
    np.testing.assert_allclose(maps[0].ravel(), 0.5 * stack[0, :, 0, 1:].mean(axis=0), atol=1e-6)


def test_maps_refuse_a_pattern_that_is_not_cls_plus_the_grid():
    with pytest.raises(ValueError, match="4×4"):
        cls_maps(np.ones((2, 16, 16)) / 16, (GRID, GRID))
    with pytest.raises(ValueError, match="3×3"):
        rollout_cls_maps(np.ones((1, 2, 17, 17)) / 17, (3, 3))


def test_refusals_are_one_line_model_errors(vit_folder, tmp_path):
    backend = load_backend(f"hf:{vit_folder}")
    with pytest.raises(ModelError, match="reads images, not sentences"):
        backend.run("a red circle")
    with pytest.raises(ModelError, match="32×32 RGB"):
        backend.run_image(np.zeros((64, 64, 3), dtype=np.uint8))
    with pytest.raises(ModelError, match="not \\['query'\\]"):
        backend.run_image(random_image(), kinds=("query",))
    with pytest.raises(ModelError, match="no target"):
        backend.run("scene 1", target="a cat")
    bad = tmp_path / "odd-vit"
    ViTModel(tiny_config(image_size=30), add_pooling_layer=False).save_pretrained(bad)
    with pytest.raises(ModelError) as caught:
        load_backend(f"hf:{bad}")
    assert "whole number of patch_size" in str(caught.value) and "\n" not in str(caught.value)
    broken = tmp_path / "broken-vit"
    broken.mkdir()
    (broken / "config.json").write_text(json.dumps({"model_type": "vit"}))
    (broken / "model.safetensors").write_bytes(b"not safetensors")
    with pytest.raises(ModelError) as caught:
        load_backend(f"hf:{broken}")
    assert "\n" not in str(caught.value)


def _page() -> None:
    from attention_viz.ui.views import image

    image.render(None)


def test_the_image_page_in_vit_mode_draws_head_heads_and_rollout(vit_folder):
    at = AppTest.from_function(_page, default_timeout=TIMEOUT).run()
    at.radio(key="image_model").set_value("vit").run()
    assert not at.exception and not at.get("plotly_chart") and messages(at)  # asks for a folder first
    at.text_input(key="vit_model").set_value(f"hf:{vit_folder}").run()
    assert not at.exception and not at.error
    charts = [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]
    assert len(charts) == 4  # one head over the image, its raw weights, the layer's heads, rollout
    titles = " ".join(a["text"] for chart in charts for a in chart["layout"].get("annotations", []))
    assert "head 3" in titles and "after layer 2" in titles
    at.select_slider(key="vit_layer").set_value(2).run()
    at.select_slider(key="vit_head").set_value(1).run()
    assert not at.exception
    assert "layer 2, head 1" in json.loads(at.get("plotly_chart")[0].proto.spec)["layout"]["title"]["text"]


def test_the_image_page_says_why_a_folder_is_not_a_vit(tmp_path):
    at = AppTest.from_function(_page, default_timeout=TIMEOUT).run()
    at.radio(key="image_model").set_value("vit").run()
    at.text_input(key="vit_model").set_value(str(tmp_path / "missing [x](http://e.com)")).run()
    assert not at.exception and not at.get("plotly_chart")
    assert any("does not exist" in m for m in messages(at))
    assert at.error and all("](" not in e.value for e in at.error)  # the folder's name is escaped: plain text


def test_a_vit_whose_weights_do_not_match_its_config_is_refused_naming_them(vit_folder, tmp_path):
    """As for every hf: model: transformers would fill what is missing with random weights."""
    import shutil

    from safetensors.torch import load_file, save_file

    folder = tmp_path / "mismatched-vit"
    shutil.copytree(vit_folder, folder)
    weights = load_file(folder / "model.safetensors")
    dropped = sorted(name for name in weights if "encoder.layer.2." in name)
    save_file({name: t for name, t in weights.items() if name not in dropped}, folder / "model.safetensors",
              metadata={"format": "pt"})
    with pytest.raises(ModelError) as caught:
        load_backend(f"hf:{folder}")
    message = str(caught.value)
    assert "does not match its config.json" in message and "\n" not in message
    assert dropped and "missing layers.2." in message  # transformers' own names for the dropped layer's tensors


def test_every_kind_comes_from_our_hook_points_and_the_context_is_what_w_o_reads(vit_folder):
    """Through the attention registry: q, k, v, scores and context too, the context exactly what
    transformers' own output projection receives (a torch hook on an eager load), nothing left after."""
    backend = load_backend(f"hf:{vit_folder}")
    image = random_image(2)
    ours = backend.run_image(image, kinds=None)
    assert ours.meta["attention"] == "registry"
    model = ViTModel.from_pretrained(vit_folder, attn_implementation="eager", add_pooling_layer=False).eval()
    received = {}
    for layer, block in enumerate(model.layers):
        block.attention.o_proj.register_forward_pre_hook(
            lambda module, args, layer=layer: received.__setitem__(layer, args[0][0].clone()))
    with torch.inference_mode():
        model(pixel_values=backend.pixel_values(image))
    heads, d = model.config.num_attention_heads, model.config.hidden_size // model.config.num_attention_heads
    for layer in range(ours.n_layers()):
        context = ours.arrays[f"encoder.layers.{layer}.self_attn.context"]  # (heads, T, d)
        expected = received[layer].numpy().reshape(-1, heads, d).transpose(1, 0, 2)
        np.testing.assert_allclose(context, expected, atol=1e-5)
        pattern = ours.pattern(ENCODER_SELF, layer)
        v = ours.arrays[f"encoder.layers.{layer}.self_attn.v"]
        np.testing.assert_allclose(pattern @ v, context, atol=1e-5)  # the pattern mixes the captured values
    assert not capture_active()
