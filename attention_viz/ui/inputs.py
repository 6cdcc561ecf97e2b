"""The input panel: sentence, model, examples. Returns what the user asked for."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from ..backends.registry import HF_PREFIX, MODELS, unknown_model_message

EXAMPLES = {
    "Coreference — tired (it → animal)": "The animal didn't cross the street because it was too tired.",
    "Coreference — wide (it → street)": "The animal didn't cross the street because it was too wide.",
    "Thinking machines (seed 000)": "Thinking Machines",
    "我喜欢吃苹果 (seed 000)": "我喜欢吃苹果",
    "A longer sentence": (
        "The European Economic Area agreement was signed in Porto on 2 May 1992 and entered into force "
        "on 1 January 1994, after the people of Switzerland had voted against it."
    ),
}
HF_CHOICE = "hf: (any transformers model)"


@dataclass(frozen=True)
class Request:
    model: str
    text: str
    target: str | None


def _apply_example() -> None:
    example = st.session_state.get("example")
    if example in EXAMPLES:
        st.session_state["text"] = EXAMPLES[example]


def model_picker() -> str:
    names = list(MODELS)
    current = st.session_state.get("model", names[0])
    if current.startswith(HF_PREFIX):
        st.session_state.setdefault("hf_spec", current[len(HF_PREFIX) :])
        st.session_state["model_choice"] = HF_CHOICE
    elif current in names:
        st.session_state.setdefault("model_choice", current)
    elif "model_choice" not in st.session_state:  # an unknown name from a link: say so, show the default
        st.warning(unknown_model_message(current) + f". Showing {names[0]}.")
    choice = st.selectbox(
        "Model", names + [HF_CHOICE], key="model_choice",
        format_func=lambda n: n if n == HF_CHOICE else f"{n} — {MODELS[n].description}",
    )
    if choice == HF_CHOICE:
        spec = st.text_input("transformers model (hub id or local folder)", key="hf_spec",
                             help="Local folders work offline; hub ids need ATTENTION_VIZ_ALLOW_DOWNLOAD=1.")
        return f"{HF_PREFIX}{spec.strip()}"
    return choice


def request_panel() -> Request:
    """Draw the inputs (sidebar) and return the current request."""
    with st.sidebar:
        model = model_picker()
        st.session_state["model"] = model
        st.selectbox("Examples", ["—"] + list(EXAMPLES), key="example", on_change=_apply_example)
        text = st.text_input("Sentence", key="text", max_chars=20_000, help="Press Enter to run.")
        target = None
        info = MODELS.get(model)
        if info is not None and info.shape == "encoder-decoder":
            target = st.text_input("Target (teacher forcing; empty = the model translates)", key="target") or None
    return Request(model, text, target)
