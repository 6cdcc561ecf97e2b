"""What attention patterns say beyond one heatmap: pure numpy, no torch, no plotting. One file per
analysis; the names most views use are re-exported here.

Inputs are plain arrays as :class:`~attention_viz.core.result.AttentionResult` hands them out: one
layer's patterns ``[heads, query, key]`` or a stack ``[layers, heads, query, key]`` (float32; rows
sum to 1, or are all 0 where a query had every key masked), plus token flags as plain sequences
(``special[i]`` is True for [CLS], [SEP], <s> ...). Nothing here returns NaN: empty or all-zero
rows stay zero, and non-finite input is refused with a ValueError instead of spreading.

* :mod:`.heads` — mean / max over heads, hiding special tokens.
* :mod:`.rollout`, :mod:`.flow` — Abnar & Zuidema (2020): how much of a token's representation
  comes from each input token, through every layer.
* :mod:`.stats` — one row per head (entropy, distance, where the weight goes) and a role label.
* :mod:`.focus` — which heads link two tokens; what changed between two sentences.
"""

from .flow import FLOW_MAX_WORK, FLOW_SECONDS_PER_WORK, FlowTooLarge, attention_flow, flow_max_tokens, flow_work
from .focus import difference, focus_matrix, top_heads
from .heads import drop_special, head_max, head_mean
from .rollout import layer_attention, rollout
from .stats import BROAD_ENTROPY, ROLE_SHARE, ROLES, head_stats

__all__ = [
    "BROAD_ENTROPY",
    "FLOW_MAX_WORK",
    "FLOW_SECONDS_PER_WORK",
    "ROLES",
    "ROLE_SHARE",
    "FlowTooLarge",
    "attention_flow",
    "difference",
    "drop_special",
    "flow_max_tokens",
    "flow_work",
    "focus_matrix",
    "head_max",
    "head_mean",
    "head_stats",
    "layer_attention",
    "rollout",
    "top_heads",
]
