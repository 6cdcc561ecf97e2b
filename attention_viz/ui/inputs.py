"""The input panel: sentence, model, examples. Returns what the user asked for."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import streamlit as st

from ..backends.registry import HF_PREFIX, MODELS, planned_placement, unknown_model_message
from ..errors import ModelError
from ..core.result import AttentionResult
from ..inputs.examples import ENGLISH as EXAMPLES
from ..figures.axes import shorten
from ..inputs.tokens import UNKNOWN_MARK
from ..inputs.text_file import MAX_FILE_BYTES, read_text_file
from . import cache, plain
from ..inputs.link_text import PARAM as PACKED_TEXT
from .state import DEFAULT_TEXT, MAX_TEXT, forget_link_notices, too_long, unreadable
from .widgets import text

HF_CHOICE = "hf: (any transformers model)"
HF_FOLDER = (
    "A local folder needs `config.json`, the weights as safetensors (`model.safetensors`, or its shards; "
    "`pytorch_model.bin` pickles are refused, since unpickling can run code) and the "
    "tokenizer's files (`tokenizer.json`, or `vocab.txt`, or `vocab.json` + `merges.txt`, or a SentencePiece "
    "`.model`). On a shared server it must lie under one of the folders in `ATTENTION_VIZ_MODEL_ROOTS`. "
    "Hub ids (such as `gpt2`) download only when `ATTENTION_VIZ_ALLOW_DOWNLOAD=1`."
)
UPLOAD_LABEL = "Or a long text (.txt file)"
# a link's parameter → what the user calls it (others by their URL name)
LINK_VALUES = {"text": "sentence", PACKED_TEXT: "sentence", "target": "target", "text_b": "second sentence",
               "model": "model name", "reference": "reference translation"}
NOTICE_SENTENCE = "_too_long_sentence"  # the sentence the page showed with the notice of a too-long link
LONG_FILE_HELP = (
    f"For texts longer than the box's {MAX_TEXT:,} characters: a .txt file (UTF-8, or UTF-16 with its byte-order "
    f"mark) up to {MAX_FILE_BYTES // 1000} KB. "
    "While a file is loaded it replaces the box's sentence. Decoders (ours, and transformers' with our attention "
    "function) read all of "
    "it (up to their longest input) in the Head and All heads views; other models read what they can."
)
IMPLEMENTATIONS = {  # whose code runs the forward (and, in transformers, whose attention) → the caption
    "ours": "Runs in our own Transformer (written from scratch here; every step can be captured).",
    "transformers": "Runs in the transformers library, with our attention function in its attention registry: "
                    "every step can be captured, heads removed and patched.",
    "transformers eager": "Runs in the transformers library (eager attention: this family computes attention in "
                          "code of its own, outside transformers' registry): its attention weights only.",
}


SWITCHED = "_switched_to_example"  # (example, why): the text to show on the next run, set before its box is drawn
SWITCH_NOTE = "_switch_note"  # (example, why): said on the page while the box still holds that example
SET_ASIDE = "_set_aside"  # (model, example, the user's sentence): given back when another model is picked


@dataclass(frozen=True)
class Request:
    model: str
    text: str
    target: str | None
    window_slot: Any = field(default=None, compare=False)  # under the sentence: where a long text's window is picked
    switched: str | None = field(default=None, compare=False)  # why the sentence was replaced by the model's example


def model_examples(model: str) -> dict[str, str]:
    """The Examples the sidebar offers for ``model``: its backend's own (a model that reads symbols
    offers symbols); English while an ``hf:`` model does not load."""
    if model == HF_PREFIX:
        return dict(EXAMPLES)
    try:
        return cache.backend(model).examples()
    except Exception:  # noqa: BLE001 - the model run below reports the same failure, in one line
        return dict(EXAMPLES)


def _apply_example() -> None:
    examples = model_examples(st.session_state.get("model", ""))
    example = st.session_state.get("example")
    if example in examples:
        st.session_state["text"] = examples[example]


def switch_to_example(model: str, why: str, uploaded: bool) -> bool:
    """The user's text is one ``model`` cannot read: put the model's first example in the sentence box
    and run again, saying why on the page. False (nothing done) for an uploaded file, or when the box
    already holds that example: the page then shows ``why`` as an error."""
    example = next(iter(model_examples(model).values()))
    if uploaded or st.session_state.get("text") == example:
        return False
    st.session_state[SET_ASIDE] = (model, example, st.session_state.get("text"))
    st.session_state[SWITCHED] = (example, f"{why}. The sentence box now holds its example; type your own in "
                                           "that form, or pick another of its Examples.")
    st.rerun()
    return True


def give_back_the_sentence(model: str) -> None:
    """Another model picked after one that could not read the user's sentence: the box gets that
    sentence back, if it still holds the example put there instead (text typed since is the user's)."""
    set_aside = st.session_state.get(SET_ASIDE)
    if set_aside is None or set_aside[0] == model:
        return
    del st.session_state[SET_ASIDE]
    if st.session_state.get("text") == set_aside[1]:
        st.session_state["text"] = set_aside[2]
        st.session_state["example"] = "—"


def model_picker() -> str:
    names = list(MODELS)
    current = st.session_state.get("model", names[0])
    if current.startswith(HF_PREFIX):
        st.session_state.setdefault("hf_spec", current[len(HF_PREFIX) :])
        st.session_state["model_choice"] = HF_CHOICE
    elif current in names:
        st.session_state.setdefault("model_choice", current)
    elif "model_choice" not in st.session_state:  # an unknown name from a link: say so, show the default
        plain.warning(unknown_model_message(current) + f". Showing {names[0]}.")
    choice = st.selectbox(
        "Model", names + [HF_CHOICE], key="model_choice",
        format_func=lambda n: n if n == HF_CHOICE else f"{n} — {MODELS[n].description}",
    )
    if choice == HF_CHOICE:
        spec = st.text_input("transformers model (hub id or local folder)", key="hf_spec",
                             placeholder="/path/to/model-folder or a hub id")
        st.caption(HF_FOLDER)
        return f"{HF_PREFIX}{spec.strip()}"
    return choice


def long_text_upload() -> str | None:
    """The text of an uploaded .txt file; None without one, or when it cannot be read (said here)."""
    upload = st.file_uploader(UPLOAD_LABEL, type=["txt"], key="text_file", max_upload_size=1,
                              help=LONG_FILE_HELP)
    if upload is None:
        return None
    try:
        uploaded = read_text_file(upload.name, upload.getvalue())
    except ModelError as error:
        plain.error(error)
        return None
    plain.caption(f"Reading {upload.name} ({len(uploaded):,} characters) instead of the box. A link cannot carry "
                  "an uploaded file: a shared link opens with the box's sentence.")
    return uploaded


def model_shape(model: str) -> str | None:
    """encoder-only / decoder-only / encoder-decoder; None while an ``hf:`` model does not load
    (the page then says why)."""
    if model in MODELS:
        return MODELS[model].shape
    if model == HF_PREFIX:  # nothing typed yet
        return None
    try:
        return cache.backend(model).shape
    except Exception:  # noqa: BLE001 - the model run below reports the same failure, in one line
        return None


def model_implementation(model: str) -> str | None:
    """A key of IMPLEMENTATIONS: whose code runs the forward (transformers' eager attention where the family
    bypasses the registry, and only the weights can be captured); None while an ``hf:`` model does not load."""
    if model in MODELS:
        return MODELS[model].implementation
    if model == HF_PREFIX:
        return None
    try:
        backend = cache.backend(model)
    except Exception:  # noqa: BLE001 - the model run below reports the same failure, in one line
        return None
    if backend.implementation == "transformers" and "q" not in backend.kinds:
        return "transformers eager"
    return backend.implementation


def model_placement(model: str) -> str | None:
    """"cpu, float32": the device and dtype the model runs on (ATTENTION_VIZ_DEVICE / ATTENTION_VIZ_DTYPE);
    None while an ``hf:`` model does not load, or the operator's setting is refused (the run says why)."""
    try:
        if model in MODELS:
            return str(planned_placement(model))
        return None if model == HF_PREFIX else str(cache.backend(model).placement)
    except Exception:  # noqa: BLE001 - the model run below reports the same failure, in one line
        return None


def request_panel() -> Request:
    """Draw the inputs (sidebar) and return the current request."""
    with st.sidebar:
        model = model_picker()
        st.session_state["model"] = model
        implementation = model_implementation(model)
        if implementation:
            st.caption(IMPLEMENTATIONS[implementation])
        placement = model_placement(model)
        if placement:
            st.caption(f"Device: {placement}.")
        switched = st.session_state.pop(SWITCHED, None)
        if switched is not None:  # before the boxes are drawn: only then may their values change
            st.session_state["text"] = switched[0]
            st.session_state["example"] = "—"
            st.session_state[SWITCH_NOTE] = switched
        else:
            give_back_the_sentence(model)
        st.selectbox("Examples", ["—"] + list(model_examples(model)), key="example", on_change=_apply_example)
        sentence = text("Sentence", "text", DEFAULT_TEXT, max_chars=MAX_TEXT, area=True, height=110,
                        help="A tap or click outside the box runs it (on a keyboard, also Ctrl+Enter or ⌘+Enter).")
        uploaded = long_text_upload()
        window_slot = st.container()
        target = None
        if model_shape(model) == "encoder-decoder":
            target = text("Target (teacher forcing; empty = the model translates)", "target",
                          max_chars=MAX_TEXT) or None
    link_too_long(sentence, uploaded is not None)
    note = st.session_state.get(SWITCH_NOTE)
    said = note[1] if note is not None and note[0] == sentence and not uploaded else None
    return Request(model, uploaded or sentence, target, window_slot, said)


def say_unknown(result: AttentionResult) -> None:
    """One line naming the words a closed vocabulary read as <unk> (the axes and hovers mark them too):
    a map of an unknown word looks like any other."""
    words = result.tokens.unknown_words()
    if words:
        read = sum(not s for s in result.tokens.special)
        plain.info(f"{result.model} does not know {len(words)} of these {read} words and reads each as <unk> "
                   f"(marked{UNKNOWN_MARK} on the axes and in hovers): {', '.join(dict.fromkeys(map(shorten, words)))}.")


def link_too_long(sentence: str, uploaded: bool) -> None:
    """Above the page, before anything runs: each of the link's values that was too long to read, and
    how to bring a text that long in instead (the page shows the defaults meanwhile). Said until the
    user gives the page another sentence or a file: the notice has then done its job. The same for a
    compressed sentence that could not be read."""
    if not too_long() and not unreadable():
        return
    first = st.session_state.setdefault(NOTICE_SENTENCE, sentence)
    if uploaded or sentence != first:
        forget_link_notices()
        return
    if unreadable():
        plain.warning(f"The link's sentence could not be read: {unreadable()}. The page shows the default sentence "
                      "instead.")
    for name, length in too_long().items():
        what = LINK_VALUES.get(name) or (f"“{name}” value" if len(name) <= 40 else "value")
        how = (f"save it as a .txt file and upload it in the sidebar's “{UPLOAD_LABEL}” box (pasted into the "
               f"Sentence box, only its first {MAX_TEXT:,} characters are kept)" if name in ("text", PACKED_TEXT) else
               f"paste it into its box (up to {MAX_TEXT:,} characters)")
        plain.warning(f"The link's {what} is too long for a link: {length:,} characters, and links carry up to "
                      f"{MAX_TEXT:,}. The page shows the default instead; to read it, {how}.")
