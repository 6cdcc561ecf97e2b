"""Shared view controls: which attention, layer, head and token. Each returns the user's choice,
and each choice is in the URL (see :mod:`.widgets`)."""

from __future__ import annotations

from collections.abc import Sequence

import streamlit as st

from ..result import AttentionResult
from ..selection import GROUP_NAMES, GROUP_URL_NAMES, REDUCTIONS, Group
from .widgets import choice, integer

HEAD_NAMES = {"mean": "mean of heads", "max": "max of heads"}


def attention_picker(result: AttentionResult, key: str) -> Group:
    """Encoder self-, decoder self- or cross-attention (``group=encoder|decoder|cross`` in the URL)."""
    groups = result.attentions()
    if len(groups) == 1:
        return groups[0]
    return choice("Attention", groups, key, widget="radio", name=GROUP_URL_NAMES.get,
                  format_func=GROUP_NAMES.get, horizontal=True)


def layer_head_picker(result: AttentionResult, group: Group, key: str, reductions: bool = True,
                      layer: int = 0) -> tuple[int, int | str]:
    """Layer slider and head choice (a head, or the mean / max over heads when ``reductions``)."""
    n_layers = result.n_layers(*group)
    n_heads = result.pattern(group, 0).shape[0]
    options: list[int | str] = list(range(n_heads)) + (list(REDUCTIONS) if reductions else [])
    left, right = st.columns(2)
    with left:
        chosen_layer = integer("Layer", 0, n_layers - 1, f"{key}_layer", layer) if n_layers > 1 else 0
    with right:
        head = choice("Head", options, f"{key}_head", widget="select_slider",
                      format_func=lambda h: HEAD_NAMES.get(h, str(h)))
    return chosen_layer, head


def token_picker(label: str, labels: Sequence[str], key: str, default: int = 0) -> int:
    """A token position (``3: cross``); a position beyond a new, shorter sentence falls back."""
    return choice(label, range(len(labels)), key, min(default, len(labels) - 1),
                  format_func=lambda i: f"{i}: {labels[i]}")
