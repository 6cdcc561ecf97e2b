"""The Image attention page in a real browser (Debian's Chromium, the server started as the README
does): a seeded scene from the link is captioned, and the word's map is drawn over the image; a tiny
random ViT folder draws its head, heads and rollout maps; no error on the page or in the browser."""

from __future__ import annotations

import base64
import io

import numpy as np
from PIL import Image

from attention_viz.backends.registry import load_backend

SEED = 7
OVERLAY = ".js-plotly-plot g.imagelayer image"  # Plotly draws a go.Image trace as an SVG <image>


def drawn_pixels(href: str) -> np.ndarray:
    """The RGB pixels of a ``data:image/png;base64,…`` image Plotly drew."""
    header, _, data = href.partition(",")
    assert header.startswith("data:image/png;base64")
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(data))).convert("RGB"))


def no_error_shown(page) -> bool:
    return (page.locator("[data-testid='stException']").count() == 0
            and page.locator("[data-testid='stAlertContentError']").count() == 0)


def shows_the_seeded_scene(page, link: str) -> None:
    """The scene of the link's seed: its caption (the model's own, computed here too) and its maps."""
    caption = load_backend("show-attend-tell").caption_scene(SEED)
    expected = " ".join(caption.words)
    page.goto(link)
    page.wait_for_function(  # the model's caption, under the scene's true description
        "t => [...document.querySelectorAll('[data-testid=stMarkdownContainer]')].some(e => e.textContent.trim() === t)",
        arg=f"The model's caption: {expected}", timeout=120_000,
    )
    page.wait_for_function(f"() => document.querySelectorAll('{OVERLAY}').length >= 1 + {len(caption.words)}",
                           timeout=60_000)  # the word's map, then one per word in the strip
    assert page.get_by_label("Scene seed").input_value() == str(SEED)
    first = drawn_pixels(page.locator(OVERLAY).first.get_attribute("href"))
    assert first.shape == (256, 256, 3)  # the 64-pixel scene enlarged 4×: the overlay, not a blank frame
    assert first.std() > 5  # an image with content, dimmed where the word did not look
    assert no_error_shown(page)


def test_a_seeded_scene_then_a_vit_folder_shows_one_head_every_head_and_rollout(app_url, page, tmp_path):
    """The captioner's scene from a link, then (same session) a Vision Transformer folder."""
    import torch
    from transformers import ViTConfig, ViTModel

    torch.manual_seed(0)
    config = ViTConfig(image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2, num_attention_heads=3,
                       intermediate_size=64)
    ViTModel(config, add_pooling_layer=False).save_pretrained(tmp_path)
    shows_the_seeded_scene(page, f"{app_url}/?view=image&seed={SEED}")
    page.get_by_text("Vision Transformer (an hf: folder)").click()
    box = page.get_by_label("Vision Transformer", exact=True)
    box.fill(f"hf:{tmp_path}")
    box.press("Enter")
    page.wait_for_function(
        "t => [...document.querySelectorAll('.js-plotly-plot .gtitle')].some(e => e.textContent.includes(t))",
        arg="layer 0, head 0", timeout=120_000,
    )
    # the 3 heads' and 2 rollout layers' strips, waited for by their own titles: the scene's 1 + 12 maps
    # may still be on the page while the folder's draw, so counting images alone can pass too early
    page.wait_for_function(
        "ts => ts.every(t => [...document.querySelectorAll('.js-plotly-plot .annotation-text')]"
        ".some(e => e.textContent.includes(t)))",
        arg=["head 2", "after layer 1"], timeout=60_000,
    )
    page.wait_for_function(f"() => document.querySelectorAll('{OVERLAY}').length >= 1 + 3 + 2", timeout=60_000)
    assert drawn_pixels(page.locator(OVERLAY).first.get_attribute("href")).shape == (256, 256, 3)  # 32 px × 8
    assert no_error_shown(page)
