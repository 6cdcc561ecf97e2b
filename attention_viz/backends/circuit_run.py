"""What every split forward of :mod:`attention_viz.backends.circuit` keeps, on our decoder
(``circuit.SplitRun``) and on transformers' decoders (``circuit_registry.RegistrySplitRun``): the
stream entering each layer and each feed-forward block, what each block read, every node's output in
the graph's order, and the stream the final norm reads."""

from __future__ import annotations

import torch

from ..core.hooks import HookPoint


class SplitRecord:
    """One forward's record; ``wiring`` says what each receiver reads, ``embed`` (optional) replaces
    the embeddings (eap-ig's interpolations)."""

    def __init__(self, wiring, embed=None) -> None:
        self.wiring, self.embed = wiring, embed
        self.entering: dict[int, torch.Tensor] = {}
        self.mids: dict[int, torch.Tensor] = {}
        self.mlp_inputs: dict[int, torch.Tensor] = {}
        self.written: list[torch.Tensor] = []  # node outputs (B, T, d_model), in the graph's order
        self.final: torch.Tensor | None = None

    def outputs_so_far(self) -> torch.Tensor:
        return torch.stack(self.written)  # (U, B, T, d_model)

    def _enter(self, layer: int, x: torch.Tensor, hook: HookPoint) -> torch.Tensor | None:
        """At ``resid_pre``: keep the stream; layer 0's is the embeddings node (replaced if asked)."""
        if layer == 0 and self.embed is not None:
            x = self.embed(x)
        if layer == 0:
            self.written.append(x)
        self.entering[layer] = x
        return x if layer == 0 and self.embed is not None else None
