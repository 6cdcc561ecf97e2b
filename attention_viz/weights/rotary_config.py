"""The rotary settings of a ``config.json``: base θ and the share of each head that rotates.

Two spellings exist. transformers 5.x writes ``rope_parameters`` ``{"rope_type", "rope_theta",
"partial_rotary_factor"}``; older checkpoints say ``rope_theta`` and ``rope_scaling`` (Llama family)
or ``rotary_emb_base`` and ``rotary_pct`` (GPT-NeoX). Only the original, unscaled rotary is ours;
any frequency rescaling (linear, dynamic, YaRN, llama3 …) is refused with a ModelError, so the
caller can leave such a model to ``transformers``.
"""

from __future__ import annotations

from ..errors import ModelError

DEFAULT_BASE = 10000.0


def rotary_settings(hf_config: dict, default_fraction: float = 1.0) -> tuple[float, float]:
    """(base, fraction) of a checkpoint's rotary position embedding."""
    params = hf_config.get("rope_parameters") or hf_config.get("rope_scaling") or {}
    if not isinstance(params, dict):
        raise ModelError(f"config.json: rope parameters must be an object, found {params!r}")
    rope_type = params.get("rope_type", params.get("type", "default"))
    if rope_type != "default":
        raise ModelError(f"rotary scaling {rope_type!r} is not implemented in the from-scratch model")
    base = params.get("rope_theta", hf_config.get("rope_theta", hf_config.get("rotary_emb_base", DEFAULT_BASE)))
    fraction = params.get(
        "partial_rotary_factor",
        hf_config.get("partial_rotary_factor", hf_config.get("rotary_pct", default_fraction)),
    )
    return float(base), float(fraction)
