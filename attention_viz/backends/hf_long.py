"""Long inputs through a transformers decoder whose attention runs through our registered function,
without any (T, T) tensor: one forward in which every layer's context comes from transformers' own SDPA
(nobody asks for a pattern), reading each layer's q and k at their hook points. The patterns are then
rebuilt block by block on demand (:mod:`attention_viz.analysis.blockwise`), as for our own decoder.

The blockwise passes read logits as q·k/√d_k; a family's own scaling (Gemma's query scalar, say) is
folded into the kept queries, and each layer's sliding window, logit soft-cap (Gemma 2) and sinks
(GPT-OSS: the module's ``sinks``, one logit a query head, which it passes the registry as ``s_aux``)
come from what the family passed the registry, for the passes to apply where they make logits and
normalizers. Memory: layers × (h + h_kv) × T × d_head floats of q/k, kept on the host as float32 numpy.
"""

from __future__ import annotations

import math
import threading

import numpy as np
import torch

from ..analysis.blockwise import head_logits, normalizers
from ..core.hooks import capture, intervene
from ..core.names import DECODER_SELF, hook_name
from ..errors import ModelError
from .hf_attention import Site
from .hf_model import RegistryModel


def _sink_logits(registry: RegistryModel, site: Site) -> torch.Tensor | None:
    """The (h,) sink logits a module with sinks passes the registry (its ``sinks``), else None."""
    sinks = getattr(registry.module(site), "sinks", None)
    return sinks if isinstance(sinks, torch.Tensor) and sinks.dim() == 1 else None


def long_refusal(registry: RegistryModel, name: str) -> str | None:
    """Why the long path cannot rebuild this model's patterns, or None when it can."""
    if registry.shape != "decoder-only":
        return f"{name} is {registry.shape}: long inputs are read by decoder-only models"
    for site in registry.sites:
        if site.sinks and _sink_logits(registry, site) is None:
            return (f"{name} passes attention sinks from a module without a sinks tensor of one logit a head, so the "
                    "blockwise passes behind long inputs cannot read their logits")
    return None


class _Stop(Exception):
    """Ends the forward once the layers a view asked for have their q/k."""


def _stop(x: torch.Tensor, hook: object) -> None:
    raise _Stop


class RegistryQueriesKeys:
    """:class:`~attention_viz.analysis.blockwise.QueriesKeys` of one long input. The landing view reads
    layer 0: the first forward stops at layer 0's values (an intervention that raises there, for this
    call only); a view asking for a later layer runs the forward through once more, keeping every
    layer's q/k. Each head's normalizers from a float64 row pass when first asked. One lock."""

    def __init__(self, registry: RegistryModel, ids: torch.Tensor) -> None:
        self._sites = sorted((s for s in registry.sites if s.group == DECODER_SELF), key=lambda s: s.layer)
        self._registry, self._ids = registry, ids
        self.n_layers = len(self._sites)
        self.n_heads = registry.heads(DECODER_SELF, 0)
        self.window = [s.window if s.window is not None and s.window < ids.shape[1] else None for s in self._sites]
        self.softcap = [s.softcap for s in self._sites]
        self.sinks = [_sink_logits(registry, s).detach().float().cpu().numpy() if s.sinks else None
                      for s in self._sites]  # fmt: skip
        self._q: list[np.ndarray | None] = [None] * self.n_layers
        self._k: list[np.ndarray | None] = [None] * self.n_layers
        self._lse: dict[tuple[int, int], np.ndarray] = {}
        self._lock = threading.Lock()

    def _reach(self, layer: int) -> None:
        """Make the q/k of ``layer`` (lock held): layer 0 alone, or every layer in one forward."""
        upto = 0 if layer == 0 else self.n_layers - 1
        sites = self._sites[: upto + 1]
        names = [hook_name(DECODER_SELF, s.layer, kind) for s in sites for kind in ("q", "k")]
        stop = [(hook_name(DECODER_SELF, upto, "v"), _stop)] if upto < self.n_layers - 1 else []
        try:
            with torch.inference_mode(), intervene(stop), capture(kinds=("q", "k"), names=names) as recorded:
                self._registry.model.base_model(input_ids=self._ids, use_cache=False)
        except _Stop:
            pass
        for site in sites:
            q = recorded[hook_name(DECODER_SELF, site.layer, "q")][0].float()  # (h, T, d)
            # the passes divide by √d: the family's own scaling goes into q
            self._k[site.layer] = recorded[hook_name(DECODER_SELF, site.layer, "k")][0].float().numpy()
            self._q[site.layer] = (q * (site.scaling * math.sqrt(q.shape[-1]))).numpy()

    def layer(self, layer: int) -> tuple[np.ndarray, np.ndarray]:
        if self._q[layer] is None:
            with self._lock:
                if self._q[layer] is None:
                    self._reach(layer)
        return self._q[layer], self._k[layer]

    def head(self, layer: int, head: int) -> tuple[np.ndarray, np.ndarray]:
        q, k = self.layer(layer)
        return q[head], k[head // (q.shape[0] // k.shape[0])]

    def normalizers(self, layer: int, head: int | None = None) -> np.ndarray:
        heads = range(self.n_heads) if head is None else [head]
        for h in heads:
            if (layer, h) not in self._lse:
                q, k = self.head(layer, h)
                lse = normalizers(q, k, range(q.shape[0]), **head_logits(self, layer, h).options)
                with self._lock:
                    self._lse[(layer, h)] = lse
        if head is not None:
            return self._lse[(layer, head)]
        return np.stack([self._lse[(layer, h)] for h in heads])


def queries_keys(registry: RegistryModel, ids: torch.Tensor, name: str) -> RegistryQueriesKeys:
    """``ids`` (1, T) through the model once; a ModelError in one sentence where this path cannot run."""
    refusal = long_refusal(registry, name)
    if refusal is not None:
        raise ModelError(refusal)
    return RegistryQueriesKeys(registry, ids)
