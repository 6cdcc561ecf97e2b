"""Image attention: Show, Attend and Tell live. A generated scene (seeded; the seed is in the link)
or an uploaded PNG/JPEG is captioned word by word, and every word comes with the map of where the
model looked, over the image (smooth, or the raw grid of regions) and as the paper's strip."""

from __future__ import annotations

import random

import numpy as np
import streamlit as st

from ...analysis.localization import mass_in_box, uniform_share
from ...caption import CaptionResult
from ...errors import ModelError
from ...figures.image import caption_strip_figure, grid_values_figure, word_attention_figure
from ...images import MAX_BYTES, read_image
from ...trained.scenes import BACKGROUND, generate
from .. import cache
from ..export import figure_downloads

MODEL = "show-attend-tell"
SCENE, UPLOAD = "scene", "upload"
SOURCES = {SCENE: "Generated scene", UPLOAD: "Upload an image"}
MAX_CACHED = 64
MAX_SEED = 2**31 - 1  # any scene seed works; a browser number field is exact only to 2**53


@st.cache_data(max_entries=MAX_CACHED, show_spinner="Captioning…")
def caption_scene(seed: int) -> CaptionResult:
    return cache.backend(MODEL).caption_scene(seed)


@st.cache_data(max_entries=MAX_CACHED, show_spinner="Captioning…")
def caption_upload(data: bytes) -> CaptionResult:
    """The file's name is not used: messages then hold only our own text, never the user's."""
    backend = cache.backend(MODEL)
    return backend.caption_image(read_image(data, backend.image_size, BACKGROUND, "the uploaded file"))


def _seed_from_url() -> None:
    """The link's ``seed`` seeds the widget once per session."""
    if st.session_state.get("_image_seeded"):
        return
    raw = st.query_params.get("seed")
    if raw is not None and raw.isdigit() and int(raw) <= MAX_SEED:
        st.session_state["image_seed"] = int(raw)
    st.session_state["_image_seeded"] = True


def _new_scene() -> None:
    st.session_state["image_seed"] = random.randrange(1_000_000)


def render(_: object = None) -> dict:
    st.markdown(
        "Xu et al. (2015), *Show, Attend and Tell*: a CNN cuts the image into a grid of regions, and an LSTM "
        "writes the caption one word at a time. Before each word it scores every region against its state "
        "(additive attention) and reads their weighted mix. The map below each word is that weighting: "
        "where the model looked while writing it. The model is ours, trained on synthetic scenes of coloured "
        "shapes whose boxes are known, so you can check that it looks at the object it names."
    )
    _seed_from_url()
    source = st.radio("Image", list(SOURCES), format_func=SOURCES.get, key="image_source", horizontal=True)
    seed = None
    try:
        if source == SCENE:
            left, right = st.columns([3, 1])
            st.session_state.setdefault("image_seed", 7)
            seed = int(left.number_input("Scene seed", min_value=0, max_value=MAX_SEED, step=1, key="image_seed"))
            right.button("New scene", on_click=_new_scene, key="image_new")
            result = caption_scene(seed)
        else:
            st.caption(f"PNG or JPEG up to {MAX_BYTES // 1_000_000} MB; it is fitted into the model's 64×64 "
                       "input. The model knows only its twelve shapes: on a photo it still writes a scene "
                       "caption, and the maps show where it looked while doing so.")
            upload = st.file_uploader("Image file", type=["png", "jpg", "jpeg"], key="image_upload")
            if upload is None:
                return {}
            result = caption_upload(upload.getvalue())
    except ModelError as problem:
        st.error(str(problem))  # our own words and numbers only (see caption_upload)
        return {"seed": seed}
    _show(result)
    return {"seed": seed}


def _show(result: CaptionResult) -> None:
    if not result.words:
        st.info("The model wrote no words for this image.")
        return
    st.markdown("**Caption:**")
    st.text(" ".join(result.words))
    if not result.meta.get("finished", True):
        st.caption("The caption reached the model's length limit without an end token.")

    st.subheader("1 · One word at a time")
    if st.session_state.get("image_word", 0) >= len(result.words):  # a shorter caption than the last one
        st.session_state["image_word"] = 0
    t = 0
    if len(result.words) > 1:
        t = st.select_slider("Word", options=list(range(len(result.words))), key="image_word",
                             format_func=lambda i: f"{i + 1}. {result.words[i]}")
    left, right = st.columns([1, 1])
    smooth = left.radio("Map", ["smooth", "raw grid"], key="image_map", horizontal=True) == "smooth"
    show_boxes = result.boxes is not None and right.checkbox("Outline the gold boxes", key="image_boxes")
    boxes = [b.box for b in result.boxes] if show_boxes else []
    word_map = result.attention[t]
    figure = word_attention_figure(result.image, word_map, f"{t + 1}. {result.words[t]}", smooth, boxes)
    left.plotly_chart(figure, key="image_word_map")
    with right:
        rows, cols = result.grid
        st.plotly_chart(grid_values_figure(word_map, f"the raw weights: {rows}×{cols} regions"), key="image_raw")
    _localization(result, t)

    st.subheader("2 · The whole caption")
    strip = caption_strip_figure(result.image, result.words, result.attention, smooth)
    st.plotly_chart(strip, key="image_strip")
    st.caption("Each word's map, brightest where the model looked most (each map scaled to its own maximum). "
               "Words like “a” or “above” need no particular place and often look broadly.")
    with st.expander("Downloads"):
        figure_downloads(strip, "caption-attention", key="image_strip_export")
        figure_downloads(figure, f"word-{t + 1}-attention", key="image_word_export")
        st.download_button("Caption and maps (.npz)", data=result.to_npz_bytes, file_name="caption.npz",
                           mime="application/octet-stream", key="image_npz", on_click="ignore")


def _localization(result: CaptionResult, t: int) -> None:
    """For a generated scene: how much of this word's attention lies on the object it names."""
    if result.seed is None:
        return
    box = generate(result.seed).named_box(result.words, t)
    if box is None:
        st.caption("This word names no object of the scene (or names it wrongly): no gold box to compare with.")
        return
    size = result.image.shape[0]
    inside = mass_in_box(np.asarray(result.attention[t]), box, size, size)
    st.caption(f"{100 * inside:.0f} % of this word's attention lies inside the gold box of the object it "
               f"names; a uniform map would put {100 * uniform_share(box, size, size):.0f} % there.")
