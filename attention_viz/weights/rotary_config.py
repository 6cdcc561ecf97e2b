"""The rotary settings of a ``config.json``: base θ, the share of each head that rotates, and how a
long-context checkpoint rescales the frequencies.

Two spellings exist. transformers 5.x writes ``rope_parameters`` ``{"rope_type", "rope_theta",
"partial_rotary_factor", …}``; older checkpoints (every Llama 3.1/3.2 on the hub) say ``rope_theta``
and ``rope_scaling`` (Llama family) or ``rotary_emb_base`` and ``rotary_pct`` (GPT-NeoX). The
unscaled rotary and two rescalings that change only the frequencies are ours: ``linear`` and
``llama3`` (:class:`~attention_viz.core.positional.RotaryScaling`). Any other (dynamic NTK, whose
frequencies change with the input's length; YaRN and LongRoPE, which also rescale the scores …) is
refused with a ModelError naming it, so the caller can leave such a model to ``transformers``.
"""

from __future__ import annotations

from ..core.positional import RotaryScaling
from ..errors import ModelError

DEFAULT_BASE = 10000.0
LLAMA3_KEYS = ("factor", "low_freq_factor", "high_freq_factor")


def rotary_settings(
    hf_config: dict, default_fraction: float = 1.0
) -> tuple[float, float, RotaryScaling | None]:
    """(base, fraction, scaling) of a checkpoint's rotary position embedding."""
    params = hf_config.get("rope_parameters") or hf_config.get("rope_scaling") or {}
    if not isinstance(params, dict):
        raise ModelError(f"config.json: rope parameters must be an object, found {params!r}")
    base = params.get("rope_theta", hf_config.get("rope_theta", hf_config.get("rotary_emb_base", DEFAULT_BASE)))
    fraction = params.get(
        "partial_rotary_factor",
        hf_config.get("partial_rotary_factor", hf_config.get("rotary_pct", default_fraction)),
    )
    return float(base), float(fraction), rotary_scaling(hf_config, params)


def rotary_scaling(hf_config: dict, params: dict) -> RotaryScaling | None:
    """The frequency rescaling ``params`` names, None for the original rotary."""
    rope_type = params.get("rope_type", params.get("type", "default"))
    if rope_type == "default":
        return None
    if rope_type not in ("linear", "llama3"):
        raise ModelError(f"rotary scaling {rope_type!r} is not implemented in the from-scratch model")
    needed = ("factor",) if rope_type == "linear" else LLAMA3_KEYS
    missing = [key for key in needed if key not in params]
    if missing:
        raise ModelError(f"config.json: {rope_type} rotary scaling lacks {', '.join(missing)}")
    try:
        if rope_type == "linear":
            return RotaryScaling("linear", float(params["factor"]))
        # the pretraining length: outside the parameters on some checkpoints, as transformers reads it
        original = hf_config.get("original_max_position_embeddings") or params.get(
            "original_max_position_embeddings", hf_config.get("max_position_embeddings")
        )
        if original is None:
            raise ModelError("config.json: llama3 rotary scaling lacks original_max_position_embeddings")
        return RotaryScaling("llama3", *(float(params[key]) for key in LLAMA3_KEYS), original_max_len=int(original))
    except (TypeError, ValueError) as error:
        raise ModelError(f"config.json: {error}") from error
