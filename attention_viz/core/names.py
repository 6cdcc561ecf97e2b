"""Hook names: the one place where a captured tensor's name is built or taken apart.

A name says where the tensor lives: ``{part}.layers.{layer}.{attn}.{kind}``, e.g.
``encoder.layers.3.self_attn.pattern`` or ``decoder.layers.0.cross_attn.context``. Our model's
HookPoints get the same names from their module paths (checked by a test), and every other module
builds or parses names through these functions. No torch here: results and figures use it.
"""

from __future__ import annotations

import re

Group = tuple[str, str]  # (part, attention), e.g. ("decoder", "cross_attn")
ENCODER_SELF: Group = ("encoder", "self_attn")
DECODER_SELF: Group = ("decoder", "self_attn")
CROSS: Group = ("decoder", "cross_attn")
GROUPS: tuple[Group, ...] = (ENCODER_SELF, DECODER_SELF, CROSS)  # the order views list them in
KINDS = ("q", "k", "v", "scores", "pattern", "context")  # what a hook point of an attention captures

# hook points of a whole layer: the residual stream entering it; in decoder layers also entering the
# feed-forward sublayer and leaving the layer (TransformerLens's resid_mid and resid_post)
LAYER_KINDS = ("resid_pre", "resid_mid", "resid_post")
_LAYER_NAME = re.compile(r"^(encoder|decoder)\.layers\.(\d+)\.(\w+)$")
_NAME = re.compile(r"^(encoder|decoder)\.layers\.(\d+)\.(self_attn|cross_attn)\.(\w+)$")


def hook_name(group: Group, layer: int, kind: str) -> str:
    """(("decoder", "cross_attn"), 2, "pattern") → ``decoder.layers.2.cross_attn.pattern``."""
    part, attn = group
    if group not in GROUPS:
        raise ValueError(f"not an attention: {part}.{attn}")
    return f"{part}.layers.{int(layer)}.{attn}.{kind}"


def parse_hook_name(name: str) -> tuple[Group, int, str]:
    """``decoder.layers.2.cross_attn.pattern`` → (("decoder", "cross_attn"), 2, "pattern")."""
    match = _NAME.match(name)
    if match is None:
        raise ValueError(f"not an attention hook name: {name!r}")
    part, layer, attn, kind = match.groups()
    return (part, attn), int(layer), kind


def layer_hook_name(part: str, layer: int, kind: str = "resid_pre") -> str:
    """("decoder", 3) → ``decoder.layers.3.resid_pre``: the residual stream entering that layer."""
    if part not in ("encoder", "decoder") or kind not in LAYER_KINDS:
        raise ValueError(f"not a layer hook: {part} {kind}")
    return f"{part}.layers.{int(layer)}.{kind}"


def parse_layer_hook_name(name: str) -> tuple[str, int, str]:
    """``decoder.layers.3.resid_pre`` → ("decoder", 3, "resid_pre")."""
    match = _LAYER_NAME.match(name)
    if match is None or match.group(3) not in LAYER_KINDS:
        raise ValueError(f"not a layer hook name: {name!r}")
    part, layer, kind = match.groups()
    return part, int(layer), kind
