"""Our Transformer as a translation model: the encoder–decoder of model.py with the small decoding
interface the GRU models share (:class:`attention_viz.trained.decoding.Seq2Seq`), so training,
evaluation and the backend treat both alike. No parameters of its own: checkpoints are the
Transformer's."""

from __future__ import annotations

import torch

from ..core.hooks import KINDS
from ..core.model import Transformer


class TranslationTransformer(Transformer):
    """An encoder–decoder :class:`Transformer` with ``start`` / ``step`` / ``teacher_forced``."""

    kinds = KINDS  # every hook kind: q, k, v, scores, pattern, context
    multi_head = True

    def start(self, src: torch.Tensor, src_padding: torch.Tensor | None = None) -> tuple:
        """Encode the source once: the decoding state is (memory (B, S, d_model), src_padding)."""
        return self.encode(src, src_padding), src_padding

    def step(self, state: tuple, ys: torch.Tensor) -> tuple[torch.Tensor, tuple]:
        """Next-word logits (B, V) after the prefix ``ys`` (B, t). The whole prefix is re-run (no
        key/value cache), so a capture sees every step's full causal pattern."""
        memory, src_padding = state
        hidden = self.decode(ys, memory, src_padding)  # (B, t, d_model)
        return self.logits(hidden[:, -1]), state

    def teacher_forced(
        self,
        src: torch.Tensor,
        tgt: torch.Tensor,
        src_padding: torch.Tensor | None = None,
        tgt_padding: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """(B, T, V) next-word logits for every decoder input position."""
        return self.logits(self(src, tgt, src_padding, tgt_padding))

    def decoder_states(self, src: torch.Tensor, tgt: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The decoder's output states (B, T, d_model) and their (B, T, V) logits."""
        states = self(src, tgt)
        return states, self.logits(states)
