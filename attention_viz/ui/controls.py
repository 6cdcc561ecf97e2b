"""Shared view controls: which attention, layer, head, token and weighting. Each returns the user's
choice, and each choice is in the URL (see :mod:`.widgets`)."""

from __future__ import annotations

from collections.abc import Sequence

import streamlit as st

from ..analysis.weighting import EXPLANATIONS, WEIGHTING_NAMES, WEIGHTINGS, Weighted, weighted
from ..errors import ServerBusy
from ..core.result import AttentionResult
from ..analysis.selection import GROUP_NAMES, GROUP_URL_NAMES, REDUCTIONS, Group
from ..figures.heatmap import shared_top
from . import cache, plain
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
    return layer_head_choice(result.n_layers(*group), result.pattern(group, 0).shape[0], key, reductions, layer, head)


def layer_head_choice(n_layers: int, n_heads: int, key: str, reductions: bool = True, layer: int = 0,
                      head: int = 0) -> tuple[int, int | str]:
    """:func:`layer_head_picker` from the counts alone (the long views read them before any run)."""
    options: list[int | str] = list(range(n_heads)) + (list(REDUCTIONS) if reductions else [])
    left, right = st.columns(2)
    with left:
        chosen_layer = integer("Layer", 0, n_layers - 1, f"{key}_layer", layer) if n_layers > 1 else 0
    with right:
        chosen_head = choice("Head", options, f"{key}_head", head if head < n_heads else 0,
                             widget="select_slider", format_func=lambda h: HEAD_NAMES.get(h, str(h)))
    return chosen_layer, chosen_head


def where_title(layer: int, head: int | str, layer_level: bool = False) -> str:
    """"layer 3, head 1" ("layer 3, mean of heads"); a layer-level measure (ALTI, value zeroing) is one
    map of the whole layer, whatever the head picked, so its title names the layer alone."""
    if layer_level:
        return f"layer {layer} (the whole layer)"
    return f"layer {layer}, {HEAD_NAMES.get(head, f'head {head}')}"


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


def weighting_picker(key: str = "weighting") -> str:
    """Attention weights or value-weighted norms (``weighting=weights|norms`` in the URL). One key
    for every view that draws patterns, so the choice stays when the view changes. Under it, what the
    chosen weighting is and how its rows differ from the weights'."""
    weighting = choice("Weighting", WEIGHTINGS, key, widget="radio", format_func=WEIGHTING_NAMES.get, horizontal=True,
                       label_visibility="collapsed")  # the options and the line under them say what it is
    plain.caption(EXPLANATIONS[weighting])
    return weighting


def weigh(result: AttentionResult, weighting: str, quiet: bool = False, group: Group | None = None) -> Weighted:
    """``result`` ready to draw under ``weighting``: the norms are computed once per run from what it
    captured (cached beside it, no forward), ALTI and value zeroing once per run from the model; a
    model without them falls back to the weights and the page says so (unless ``quiet``: a second
    result of the same model). ``group``: the attention drawn (:func:`for_group`)."""
    if weighting == "weights":
        return weighted(result, weighting)
    if weighting == "norms":
        shown = weighted(result, weighting, cache.value_norms(result, cache.identity(result)))
    else:
        try:
            maps = cache.mixing(result, cache.identity(result), weighting)
        except ServerBusy as busy:  # nothing cached: the next rerun tries again
            maps = f"{busy} Showing attention weights."
        shown = weighted(result, weighting, maps)
    if shown.note and not quiet:
        plain.caption(shown.note)
    return shown if group is None else for_group(shown, group, quiet)


def for_group(weighed: Weighted, group: Group, quiet: bool = False) -> Weighted:
    """``weighed`` as drawn for the attention ``group``: a layer-level measure (ALTI, value zeroing)
    says that every head shows its layer's map, and where it has none (cross-attention) the weights
    are drawn, with a sentence saying so."""
    shown = weighed.on(group)
    if not quiet and shown is not weighed:
        plain.caption(shown.note)
    elif not quiet and shown.layer_level:
        st.caption(f"{WEIGHTING_NAMES[shown.weighting]} measures a whole layer, not a head: every head of a layer "
                   "shows the layer's map.")
    return shown
