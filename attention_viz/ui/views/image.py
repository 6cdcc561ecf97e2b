"""Image attention: Show, Attend and Tell live. A generated scene (seeded; the seed is in the link)
or an uploaded PNG/JPEG is captioned word by word, and every word comes with the map of where the
model looked, over the image (smooth, or the raw grid of regions) and as the paper's strip. A
scene's true description stands above the model's caption, the words that differ marked; an upload
is said to be outside what the model learned.

Or a Vision Transformer from a local ``hf:`` folder: per layer and head the [CLS] row over the
patches on the same image, every head of a layer side by side, and rollout over the layers."""

from __future__ import annotations

import random

import numpy as np
import streamlit as st

from ...analysis.localization import compare_captions, mass_in_box, uniform_share
from ...analysis.patches import PatchAttention, patch_attention
from ...core.caption_result import CaptionResult
from ...errors import ModelError
from ...figures.image import (
    caption_strip_figure,
    grid_values_figure,
    heads_strip_figure,
    rollout_strip_figure,
    scale_for,
    word_attention_figure,
)
from ...inputs.images import MAX_BYTES, fit, load_image, read_image
from ...core.result import AttentionResult
from ...trained.scenes import BACKGROUND, generate
from .. import cache, plain
from ..export import chart, drawn_from, figure_downloads
from ..fallback import runs_another_model

MODEL = "show-attend-tell"
CAPTIONER, VIT = "captioner", "vit"
MODES = {CAPTIONER: "Show, Attend and Tell (our captioner)", VIT: "Vision Transformer (an hf: folder)"}
HF_PREFIX = "hf:"
SCENE, UPLOAD = "scene", "upload"
OUTSIDE = ("An uploaded picture is outside what this model learned: it knows only the twelve objects of its "
           "grammar (four colours × three shapes) on a dark, noisy background, so on anything else its caption "
           "and maps are not a description of the picture.")
SOURCES = {SCENE: "Generated scene", UPLOAD: "Upload an image"}
MAX_CACHED = 64
STRIP_PIXELS = 128  # each map of a strip is drawn about this wide
MAX_SEED = 2**31 - 1  # any scene seed works; a browser number field is exact only to 2**53


@st.cache_data(max_entries=MAX_CACHED, show_spinner="Captioning…")
def caption_scene(seed: int) -> CaptionResult:
    return cache.backend(MODEL).caption_scene(seed)


@st.cache_data(max_entries=MAX_CACHED, show_spinner="Captioning…")
def caption_upload(data: bytes) -> CaptionResult:
    """The file's name is not used: messages then hold only our own text, never the user's. A bad
    file is said before the model loads."""
    image = load_image(data, "the uploaded file")
    backend = cache.backend(MODEL)
    return backend.caption_image(fit(image, backend.image_size, BACKGROUND))


def _vit_backend(name: str):
    """The loaded model, refused unless it is a Vision Transformer (it then knows its patch grid)."""
    backend = cache.backend(name)
    if getattr(backend, "patch_grid", None) is None:
        raise ModelError(f"{name} is not a Vision Transformer: its config.json must say \"model_type\": \"vit\"")
    return backend


def _patch_view(backend, image: np.ndarray, meta: dict | None = None) -> tuple[PatchAttention, AttentionResult]:
    result = backend.run_image(image, meta=meta)
    return patch_attention(image, result.stack(), tuple(result.meta["patch_grid"])), result


@st.cache_resource(max_entries=MAX_CACHED, show_spinner="Running the Vision Transformer…")
def vit_scene(name: str, seed: int) -> tuple[PatchAttention, AttentionResult]:
    """Shared, never mutated (cache_resource: no copy per rerun); maps computed once per image."""
    backend = _vit_backend(name)
    return _patch_view(backend, backend.scene_image(seed), {"seed": seed})


@st.cache_resource(max_entries=MAX_CACHED, show_spinner="Running the Vision Transformer…")
def vit_upload(name: str, data: bytes) -> tuple[PatchAttention, AttentionResult]:
    backend = _vit_backend(name)
    return _patch_view(backend, read_image(data, backend.image_size, BACKGROUND, "the uploaded file"))


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


def _scene_seed() -> int:
    """The seed widgets, shared by both models (the link's seed shows the same scene to either)."""
    left, right = st.columns([3, 1])
    st.session_state.setdefault("image_seed", 7)
    seed = int(left.number_input("Scene seed", min_value=0, max_value=MAX_SEED, step=1, key="image_seed"))
    right.button("New scene", on_click=_new_scene, key="image_new")
    return seed


def render(_: object = None) -> dict:
    _seed_from_url()
    mode = st.radio("Model", list(MODES), format_func=MODES.get, key="image_model", horizontal=True)
    return _vit() if mode == VIT else _captioner()


def _images_not_text(model: str) -> None:
    """The one line saying that this view runs ``model``, not the sidebar's."""
    sidebar = str(st.session_state.get("model", ""))
    if sidebar != model:
        runs_another_model(model, f"the sidebar's {plain.literal(sidebar)} reads text, and this view reads images.")


def _captioner() -> dict:
    _images_not_text(MODEL)
    st.markdown(
        "Xu et al. (2015), *Show, Attend and Tell*: a CNN cuts the image into a grid of regions, and an LSTM "
        "writes the caption one word at a time. Before each word it scores every region against its state "
        "(additive attention) and reads their weighted mix. The map below each word is that weighting: "
        "where the model looked while writing it. The model is ours, trained on synthetic scenes of coloured "
        "shapes whose boxes are known, so you can check that it looks at the object it names."
    )
    source = st.radio("Image", list(SOURCES), format_func=SOURCES.get, key="image_source", horizontal=True)
    seed = None
    try:
        if source == SCENE:
            seed = _scene_seed()
            result = caption_scene(seed)
        else:
            st.caption(f"PNG or JPEG up to {MAX_BYTES // 1_000_000} MB; it is fitted into the model's 64×64 input.")
            upload = st.file_uploader("Image file", type=["png", "jpg", "jpeg"], key="image_upload")
            if upload is None:
                return {}
            result = caption_upload(upload.getvalue())
            st.warning(OUTSIDE)
    except ModelError as problem:
        st.error(str(problem))  # our own words and numbers only (see caption_upload)
        return {"seed": seed}
    with drawn_from(result.provenance if seed is not None else result.provenance.from_image(upload.name)):
        _show(result)
    return {"seed": seed}


def _show(result: CaptionResult) -> None:
    if not result.words:
        st.info("The model wrote no words for this image.")
        return
    if result.seed is None:
        st.markdown("**Caption:**")
        st.text(" ".join(result.words))
    else:
        _against_the_truth(result)
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
    chart(left, figure, key="image_word_map")
    with right:
        rows, cols = result.grid
        chart(st, grid_values_figure(word_map, f"the raw weights: {rows}×{cols} regions"), key="image_raw")
    _localization(result, t)

    st.subheader("2 · The whole caption")
    strip = caption_strip_figure(result.image, result.words, result.attention, smooth)
    chart(st, strip, key="image_strip")
    st.caption("Each word's map, brightest where the model looked most (each map scaled to its own maximum). "
               "Words like “a” or “above” need no particular place and often look broadly.")
    with st.expander("Downloads"):
        figure_downloads(strip, "image_strip")
        figure_downloads(figure, "image_word_map")
        st.download_button("Caption and maps (.npz)", data=result.to_npz_bytes, file_name="caption.npz",
                           mime="application/octet-stream", key="image_npz", on_click="ignore")


def _marked(words: tuple[tuple[str, bool], ...]) -> str:
    """Markdown of a caption whose differing words are red and bold; every word goes through
    ``literal`` (the vocabulary is ours, but a word like ``<unk>`` must still show as text)."""
    return " ".join(f":red[**{plain.literal(w)}**]" if differs else plain.literal(w) for w, differs in words)


def _against_the_truth(result: CaptionResult) -> None:
    """A generated scene's true description (the grammar's, known by construction) above the
    model's caption, the words that differ marked in both."""
    comparison = compare_captions(generate(result.seed).caption, result.words)
    st.markdown(f"**The scene (true description):** {_marked(comparison.truth)}")
    st.markdown(f"**The model's caption:** {_marked(comparison.model)}")
    if comparison.exact:
        st.caption("The model's caption is exactly the scene's description.")
    else:
        st.caption("The model's caption differs from the scene's description: the words in red are the ones "
                   "that differ (a true word it left out or replaced, a word of its own that is wrong).")


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


def _vit() -> dict:
    st.markdown(
        "Dosovitskiy et al. (2021), *An Image is Worth 16x16 Words*: a Vision Transformer cuts the image into "
        "square patches, reads each as a token, and puts a [CLS] token in front; the classifier reads only "
        "[CLS]'s final state. Its row of a head's attention pattern is where that head looked on [CLS]'s "
        "behalf: below, over the patches, laid on the image. Every layer mixes the patches again, so a deep "
        "layer's row says little about the pixels; rollout (Abnar & Zuidema 2020) multiplies the layers "
        "(heads averaged, plus the residual) to trace [CLS] back to the input patches."
    )
    spec = st.text_input("Vision Transformer", key="vit_model", placeholder="hf:./vit-base-patch16-224").strip()
    st.caption('A checkpoint folder on this machine (or a hub id already in the local Hugging Face cache) whose '
               'config.json says "model_type": "vit", with safetensors weights. Nothing is downloaded.')
    if not spec:
        st.info("Give the folder of a Vision Transformer checkpoint, e.g. hf:./vit-base-patch16-224.")
        return {}
    name = spec if spec.startswith(HF_PREFIX) else HF_PREFIX + spec
    _images_not_text(name)
    source = st.radio("Image", list(SOURCES), format_func=SOURCES.get, key="image_source", horizontal=True)
    seed = None
    try:
        if source == SCENE:
            seed = _scene_seed()
            view, result = vit_scene(name, seed)
        else:
            st.caption(f"PNG or JPEG up to {MAX_BYTES // 1_000_000} MB; it is fitted into the model's square input.")
            upload = st.file_uploader("Image file", type=["png", "jpg", "jpeg"], key="image_upload")
            if upload is None:
                return {}
            view, result = vit_upload(name, upload.getvalue())
    except ModelError as problem:
        plain.error(problem)  # it may quote the folder the user typed
        return {"seed": seed}
    with drawn_from(result.provenance if seed is not None else result.provenance.from_image(upload.name)):
        _show_vit(view, result)
    return {"seed": seed}


def _pick(label: str, count: int, key: str) -> int:
    """An index slider that survives a switch to a model with fewer layers or heads."""
    if st.session_state.get(key, 0) >= count:
        st.session_state[key] = 0
    return st.select_slider(label, options=list(range(count)), key=key) if count > 1 else 0


def _show_vit(view: PatchAttention, result: AttentionResult) -> None:
    layers, heads, rows, cols = view.cls.shape
    size, patch = result.meta["image_size"], result.meta["patch_size"]
    st.caption(f"{size}×{size} pixels in {rows}×{cols} patches of {patch}×{patch} pixels; "
               f"{layers} layers × {heads} heads.")
    if "label" in result.meta:
        plain.caption(f"The checkpoint's classifier says: {result.meta['label']} "
                      f"({100 * result.meta['label_probability']:.0f} %).")

    st.subheader("1 · One head: where [CLS] looks")
    layer = _pick("Layer", layers, "vit_layer")
    head = _pick("Head", heads, "vit_head")
    left, right = st.columns([1, 1])
    smooth = left.radio("Map", ["smooth", "raw grid"], key="vit_map", horizontal=True) == "smooth"
    cls_map = view.cls[layer, head]
    one = word_attention_figure(view.image, cls_map, f"layer {layer}, head {head}: [CLS] over the patches", smooth,
                                scale=scale_for(size))
    chart(left, one, key="vit_head_map")
    with right:
        chart(st, grid_values_figure(cls_map, f"the raw weights: {rows}×{cols} patches"), key="vit_raw")
    st.caption(f"[CLS] keeps {100 * view.cls_self[layer, head]:.0f} % of this head's attention on itself; the "
               "rest is spread over the patches as drawn (each map scaled to its own maximum).")

    st.subheader(f"2 · Every head of layer {layer}")
    heads_strip = heads_strip_figure(view.image, view.cls[layer], smooth, scale_for(size, STRIP_PIXELS))
    chart(st, heads_strip, key="vit_heads")

    st.subheader("3 · Rollout over the layers")
    rollout_strip = rollout_strip_figure(view.image, view.rollout, smooth, scale_for(size, STRIP_PIXELS))
    chart(st, rollout_strip, key="vit_rollout")
    st.caption("After layer l: how much of [CLS]'s representation rollout traces back to each input patch. It "
               "ignores the values and the MLPs, so it is an estimate of where information came from.")
    with st.expander("Downloads"):
        figure_downloads(one, "vit_head_map")
        figure_downloads(heads_strip, "vit_heads")
        figure_downloads(rollout_strip, "vit_rollout")
        st.download_button("Attention tensors (.npz)", data=result.to_npz_bytes, file_name="vit-attention.npz",
                           mime="application/octet-stream", key="vit_npz", on_click="ignore")
