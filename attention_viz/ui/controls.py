"""Shared view controls: which attention, layer, head and token. Each returns the user's choice,
and each choice is in the URL (see :mod:`.widgets`)."""

from __future__ import annotations

from collections.abc import Sequence

import streamlit as st

from ..result import AttentionResult
from ..selection import GROUP_NAMES, GROUP_URL_NAMES, REDUCTIONS, Group
from ..figures.heatmap import shared_top
from .widgets import choice, flag, integer

HEAD_NAMES = {"mean": "mean of heads", "max": "max of heads"}


def attention_picker(result: AttentionResult, key: str) -> Group:
    """Encoder self-, decoder self- or cross-attention (``group=encoder|decoder|cross`` in the URL)."""
    groups = result.attentions()
    if len(groups) == 1:
        return groups[0]
    return choice("Attention", groups, key, widget="radio", name=GROUP_URL_NAMES.get,
                  format_func=GROUP_NAMES.get, horizontal=True)


def layer_head_picker(result: AttentionResult, group: Group, key: str, reductions: bool = True,
                      layer: int = 0, head: int = 0) -> tuple[int, int | str]:
    """Layer slider and head choice (a head, or the mean / max over heads when ``reductions``);
    ``layer`` and ``head`` are the defaults."""
    n_layers = result.n_layers(*group)
    n_heads = result.pattern(group, 0).shape[0]
    options: list[int | str] = list(range(n_heads)) + (list(REDUCTIONS) if reductions else [])
    left, right = st.columns(2)
    with left:
        chosen_layer = integer("Layer", 0, n_layers - 1, f"{key}_layer", layer) if n_layers > 1 else 0
    with right:
        chosen_head = choice("Head", options, f"{key}_head", head if head < n_heads else 0,
                             widget="select_slider", format_func=lambda h: HEAD_NAMES.get(h, str(h)))
    return chosen_layer, chosen_head


def token_picker(label: str, labels: Sequence[str], key: str, default: int = 0) -> int:
    """A token position (``3: cross``); a position beyond a new, shorter sentence falls back."""
    return choice(label, range(len(labels)), key, min(default, len(labels) - 1),
                  format_func=lambda i: f"{i}: {labels[i]}")


def pair_scale(key: str, *matrices) -> float | None:
    """The top of one colour range for figures shown side by side (None: each its own range, when
    the user asks for separate scales; ``separate=1`` in the link)."""
    separate = flag("Separate colour scales", key,
                    help="Off: one colour range for the figures side by side, so equal shades mean equal "
                         "weights. On: each figure uses its own range.")
    return None if separate else shared_top(*matrices)
