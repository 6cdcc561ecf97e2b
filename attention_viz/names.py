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
