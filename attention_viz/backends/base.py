"""The one interface every model source implements: text in, AttentionResult out."""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..runtime import memory
from ..runtime.device import CPU, Placement
from ..analysis.ablation import Ablation
from ..analysis.long_input import LongInput
from ..analysis.probes import english_probes
from ..errors import ModelError
from ..core.model import Shape
from ..core.names import Group
from ..core.result import AttentionResult
from ..inputs.examples import ENGLISH as ENGLISH_EXAMPLES
from ..inputs.tokens import Tokens

if TYPE_CHECKING:  # both need torch; a backend that has neither capability never imports them
    from .inside import InsideHead
    from .padding import PaddedBatch


def check_text(text: str, what: str = "text") -> str:
    """The text if a model can read it; a ModelError that says why otherwise."""
    if not text or not text.strip():
        raise ModelError(f"the {what} is empty: type a sentence")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:  # lone surrogates, e.g. undecodable bytes from a shell
        raise ModelError(f"the {what} is not valid Unicode (character {error.start + 1} is a lone surrogate)") from None
    return text


def require_readable(tokens: Tokens) -> Tokens:
    """Refuse a text whose every token was added by the tokenizer (e.g. only zero-width spaces)."""
    if all(span is None for span in tokens.offsets):
        raise ModelError("the text has nothing the model can read (only invisible or control characters)")
    return tokens


@dataclass(frozen=True)
class Outputs:
    """What a forward computed besides attention, as plain numpy: what an ablation's effect is measured on."""

    hidden: np.ndarray  # (T, d_model) final hidden states: the encoder's (encoder-only), else the decoder's
    log_probs: np.ndarray | None = None  # decoders: (T,) log p(the token that follows each decoder input)


class Backend(ABC):
    """A loaded model that turns text into captured attention.

    ``shape`` tells the views what exists: ``encoder.*`` hooks (encoder-only), ``decoder.*`` hooks
    (decoder-only), or both plus ``decoder.layers.{i}.cross_attn.*`` (encoder-decoder).
    Implementations must be safe to call from several threads at once on one object.
    """

    name: str
    shape: Shape
    max_tokens: int  # longest input, special tokens included
    kinds: tuple[str, ...]  # which hook kinds this backend can capture
    can_ablate: bool = False  # whether forward() can remove heads (ours, and transformers' through our registry)
    # whose code runs the forward: "ours" (model.py, the trained models) or "transformers"; every
    # result's meta["implementation"] says the same
    implementation: str = "ours"
    placement: Placement = CPU  # where the weights are and their dtype (see place)

    def place(self, placement: Placement) -> None:
        """Move the model to ``placement``'s device and dtype (once, right after loading). Backends
        that run on the CPU in float32 only stay there under ``auto`` and refuse anything else."""
        self.placement = placement.on_cpu(self.name)

    @abstractmethod
    def tokenize(self, text: str) -> tuple[Tokens, int]:
        """Tokens of ``text`` (truncated to ``max_tokens``) and how many tokens were dropped."""

    @abstractmethod
    def run(self, text: str, target: str | None = None, kinds: Collection[str] = ("pattern",)) -> AttentionResult:
        """One forward with capture.

        Encoder–decoder models translate ``text``: teacher-forced on ``target`` when given,
        greedy otherwise. ``result.meta["dropped"]`` counts tokens cut by truncation.
        """

    def recycled_memory(self) -> contextlib.AbstractContextManager[None]:
        """Runs inside this block take their (query × key) tensors from recycled memory (the app's
        cache and the benchmarks opt in; see :mod:`attention_viz.runtime.memory`)."""
        return memory.recycling()

    def keep_memory_ready(self) -> None:
        """The caller keeps the last run's result (the app's cache): have the memory for a next run
        of the same size mapped in the background meanwhile (see :mod:`attention_viz.runtime.memory`)."""
        memory.keep_ready()

    def forward(
        self, text: str, target: str | None = None, kinds: Collection[str] = ("pattern",), ablation: Ablation | None = None
    ) -> tuple[AttentionResult, Outputs]:
        """:meth:`run` that also returns the model's outputs, with ``ablation``'s heads removed during
        the forward (per call: concurrent calls keep their own heads)."""
        raise self.ablation_refusal()

    def ablation_refusal(self) -> ModelError:
        """Why :meth:`forward` cannot remove heads here, in one true sentence."""
        if self.implementation == "transformers":
            return ModelError(f"{self.name} cannot remove heads: its attention does not go through transformers' "
                              "attention registry, where our hook points sit")
        return ModelError(f"{self.name} cannot remove heads: it has no multi-head attention")

    def output_projection(self, group: Group, layer: int) -> np.ndarray | None:
        """``W_O`` of one attention as ``(h·d_k, d_model)`` (``x W_O``, rows of head h at h·d_k..),
        or None when the backend cannot see it (value-weighted norms then cannot be computed)."""
        return None

    def context_mixing(self, result: AttentionResult, measures: Collection[str]) -> dict[str, np.ndarray]:
        """``measures`` ("value_zeroing", "alti") of every self-attention layer for the tokens of
        ``result``, ``[query, key]`` keyed by hook name (:mod:`attention_viz.backends.mixing`); a
        ModelError in one sentence where this model cannot give them."""
        from .mixing import mixing_arrays  # the layer re-runs need torch: loaded when first asked

        return mixing_arrays(self, result, measures)

    def probe_texts(self, n: int = 24, seed: int = 0) -> list[str]:
        """Built-in probe inputs this model can read (head detector, mean ablation), seeded."""
        return english_probes(n, seed)

    def examples(self) -> dict[str, str]:
        """What the sidebar's Examples offer (label → text), the first being what the page shows when
        the user's text is one this model cannot read (:class:`~attention_viz.errors.UnreadableText`)."""
        return dict(ENGLISH_EXAMPLES)

    # What the teaching pages need beyond run(); only our own Transformers can. Pages ask these, they
    # never look at a backend's class or inside it.
    can_run_without_positions: bool = False
    can_open_heads: bool = False  # inside_head(): one encoder head recomputed step by step
    can_batch_with_padding: bool = False  # padded_batch(): the encoder on a right-padded batch

    def run_without_positions(self, text: str) -> AttentionResult:
        """:meth:`run` with the position embeddings switched off."""
        raise ModelError(f"{self.name} cannot switch its positions off (minilm, our BERT encoder, can)")

    def position_table(self) -> np.ndarray | None:
        """The learned position embeddings ``(positions, d_model)``, or None (sinusoids, or not ours)."""
        return None

    def inside_head(self, ids: Sequence[int], layer: int, head: int, scale: bool = True) -> InsideHead:
        """Every matrix of one encoder self-attention head on token ``ids`` (see attention_viz.inside)."""
        raise ModelError(f"{self.name} cannot be opened up head by head (minilm, our BERT encoder, can)")

    def padded_batch(self, sentences: Sequence[Sequence[int]], layer: int) -> PaddedBatch:
        """Token id lists as one right-padded batch through the encoder (see attention_viz.masking)."""
        raise ModelError(f"{self.name} cannot run a padded batch here (the encoders of minilm and toy-translate can)")

    can_read_long: bool = False  # long_tokens(), long_input(): texts past max_tokens, patterns rebuilt blockwise

    def long_tokens(self, text: str) -> tuple[Tokens, int]:
        """The tokens of a long ``text`` up to the model's own limit (beyond ``max_tokens``), and how
        many were dropped past it: what :meth:`long_input` reads (tokenized once, 0.3 s at 32k tokens)."""
        raise self._cannot_read_long()

    def long_input(self, tokens: Tokens, dropped: int = 0) -> LongInput:
        """The whole of a long text from its :meth:`long_tokens`: each layer's rotated queries and
        keys, from which any head's pattern is computed block by block."""
        raise self._cannot_read_long()

    def _cannot_read_long(self) -> ModelError:
        return ModelError(f"{self.name} cannot read inputs longer than {self.max_tokens} tokens here "
                          "(decoders can — ours, and transformers' through our attention function — up to their own "
                          "position limit)")

    def layer_states(self, text: str, kinds: Collection[str] = ("pattern",)) -> tuple[AttentionResult, "np.ndarray | None"]:
        """:meth:`run` plus every layer's output token representations ``(layers, T, d_model)`` from
        the same forward (what exBERT searches for similar contexts), or None when the backend cannot
        give them."""
        return self.run(text, kinds=kinds), None
