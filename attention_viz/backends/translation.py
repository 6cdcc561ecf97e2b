"""Our trained demo translation models (``toy-translate``, ``toy-translate-rnn``): text in,
captured encoder–decoder attention out.

Tokenization is the corpus's: lower-case, split on whitespace, trailing punctuation (".", ",",
"!" ...) as tokens of its own; words the model never saw become ``<unk>`` and are flagged
``unknown``. The models were trained on the bare words, every sentence ending in "." (their
end-of-source marker): a text without a final "." gets one, flagged ``special`` because it is
not in the text. (Without it the decoder never stops.)

Two data flows of an encoder–decoder (Vaswani et al. 2017):

* ``run(text)`` — inference: greedy decoding, the decoder re-reading ``<bos>`` + its own output at
  every step. Every step is captured; the result keeps the last one (the decoder is causal, so
  its rows for earlier positions equal the earlier steps'). ``meta["translation"]`` holds the
  generated words.
* ``run(text, target=...)`` — training: teacher forcing, the decoder reads ``<bos> target`` at once.

In both, ``target_tokens`` are the decoder's **inputs** (``<bos>`` + words), one per row of the
decoder self- and cross-attention: row ``i`` reads ``target_tokens[0..i]`` and predicts the next
word, listed in ``meta["predicted"]`` (its last entry is usually ``<eos>``).
"""

from __future__ import annotations

import re
from itertools import zip_longest
from contextlib import nullcontext
from collections.abc import Collection, Sequence
from pathlib import Path

import torch

from ..trained import checkpoint
from ..trained.decoding import greedy
from ..trained.corpus import generate
from ..trained.vocab import Vocab
from ..core.hooks import capture
from ..analysis.ablation import Ablation
from ..analysis.probes import sequence_probes
from ..core.names import Group
from .ours import ablation_context, output_projection
from .padding import PaddedBatch, padded_batch
from ..core.result import AttentionResult
from ..core.provenance import run_of
from ..inputs.tokens import Tokens, from_words
from ..errors import ModelError
from .base import Backend, Outputs

_PUNCTUATION = re.compile(r"^(.*?)([.,;:!?]*)$")
END = "."  # every corpus sentence ends with it


def split_words(text: str) -> list[str]:
    """Lower-cased whitespace words, trailing punctuation split off: "Signed." → "signed", "."."""
    words: list[str] = []
    for raw in text.lower().split():
        body, punctuation = _PUNCTUATION.match(raw).groups()  # type: ignore[union-attr]
        if body:
            words.append(body)
        words.extend(punctuation)
    return words

# Sentences of the corpus grammar (attention_viz/trained/corpus), one per thing the French side does
TRANSLATION_EXAMPLES = {
    "Word order: adjectives follow the noun": "this official financial area that this consumer has created reacted in september 2023 .",
    "Agreement after a relative clause": "the industrial local summit that the councils drafted has been launched by the company .",
    "A bare plural gets an article": "waters reacted .",
    "Contractions (du, des, aux)": "some partners protect the text with a debate of annual procedures .",
}


class TranslationBackend(Backend):
    """An encoder–decoder demo model loaded from its folder (see :mod:`attention_viz.trained.checkpoint`).

    The Transformer and the GRUs share one decoding interface (:class:`attention_viz.trained.decoding.Seq2Seq`):
    nothing here asks which one it is.
    """

    shape = "encoder-decoder"

    def __init__(self, name: str, trained: checkpoint.TrainedModel) -> None:
        self.name = name
        self.trained = trained
        self.model = trained.model.eval()
        self.src_vocab, self.tgt_vocab = trained.src_vocab, trained.tgt_vocab
        self.max_tokens = trained.max_len
        self.kinds = self.model.kinds
        self.can_batch_with_padding = self.model.multi_head
        if not trained.has_attention:
            raise ModelError(f"{name} has no attention to show")

    @classmethod
    def from_folder(cls, name: str, folder: Path) -> TranslationBackend:
        try:
            return cls(name, checkpoint.load(folder))
        except ValueError as error:
            raise ModelError(str(error)) from None

    def padded_batch(self, sentences: Sequence[Sequence[int]], layer: int) -> PaddedBatch:
        if not self.can_batch_with_padding:
            return super().padded_batch(sentences, layer)
        return padded_batch(self.model, sentences, layer, pad_id=Vocab.PAD)

    # -- tokens ---------------------------------------------------------------------------------
    def tokenize(self, text: str) -> tuple[Tokens, int]:
        """Words of ``text``, ending in ".": the corpus ends every sentence with it, so it is the
        models' end-of-source marker; when the text has none it is added as a special token (no
        span in the text). Texts longer than ``max_tokens`` keep their first words (and the ".")."""
        words = split_words(text)
        if not words:
            return from_words([], [], []), 0
        body = words[:-1] if words[-1] == END else words
        dropped = max(0, len(body) - (self.max_tokens - 1))
        body = body[: self.max_tokens - 1]
        typed_end = words[-1] == END and not dropped
        words = [*body, END]
        special = [False] * len(body) + [not typed_end]
        return from_words(words, self.src_vocab.encode(words), special, unk_id=Vocab.UNK), dropped

    def _decoder_tokens(self, ids: list[int], words: list[str] | None = None) -> Tokens:
        """``<bos>`` + words as Tokens (``words`` default: the vocabulary's words for ``ids``)."""
        labels = words if words is not None else self.tgt_vocab.decode(ids, strip=False)
        return from_words(
            ["<bos>", *labels], [Vocab.BOS, *ids], [True] + [False] * len(ids), unk_id=Vocab.UNK
        )

    # -- runs -----------------------------------------------------------------------------------
    def run(self, text: str, target: str | None = None, kinds: Collection[str] = ("pattern",)) -> AttentionResult:
        return self.forward(text, target, kinds)[0]

    @property
    def can_ablate(self) -> bool:  # type: ignore[override]
        return self.model.multi_head

    def output_projection(self, group: Group, layer: int):
        return output_projection(self.model, group, layer) if self.can_ablate else None

    def probe_texts(self, n: int = 24, seed: int = 0) -> list[str]:
        """Sentences of the corpus generator (the only English it knows) and repeated random
        sequences of its words, alternating."""
        sentences = [" ".join(p.source) for p in generate((n + 1) // 2, seed)]
        known = [w for w in self.src_vocab.itos[len(Vocab.SPECIALS) :] if w.isalpha()]
        sequences = sequence_probes(known, n // 2, seed)
        return [text for pair in zip_longest(sentences, sequences) for text in pair if text is not None]

    def examples(self) -> dict[str, str]:
        """Sentences of its training grammar (other English reads as unknown words)."""
        return dict(TRANSLATION_EXAMPLES)

    def forward(
        self, text: str, target: str | None = None, kinds: Collection[str] = ("pattern",), ablation: Ablation | None = None
    ) -> tuple[AttentionResult, Outputs]:
        """Also the log-probability of every word the decoder produced (greedy) or was given (target)."""
        if ablation is not None and not self.can_ablate:
            raise ModelError(f"{self.name} has no heads to remove (its attention is a single additive one)")
        kinds = tuple(kinds)
        refused = [k for k in kinds if k not in self.kinds]
        if refused:
            raise ModelError(
                f"{self.name} captures only {', '.join(self.kinds)} (its attention is additive: "
                f"there are no {', '.join(refused)})"
            )
        tokens, dropped = self.tokenize(text)
        if not len(tokens):
            raise ModelError("empty text")
        src = torch.tensor([tokens.ids])
        meta: dict = {"dropped": dropped, "implementation": self.implementation}
        meta["provenance"] = run_of(self.name, self.implementation, text, target, ablation and ablation.describe())
        if ablation is not None:
            meta["ablation"] = ablation.to_dict()
        with ablation_context(self.model, ablation) if self.can_ablate else nullcontext():
            if target is None:
                return self._greedy(tokens, src, kinds, meta)
            return self._teacher_forced(tokens, src, target, kinds, meta)

    def _outputs(self, src: torch.Tensor, ys: torch.Tensor) -> Outputs:
        """Teacher-forced on ``ys`` (``<bos>`` first): log p of every following id, and the decoder states."""
        with torch.inference_mode():
            states, logits = self.model.decoder_states(src, ys[:, :-1])
            hidden = None if states is None else states[0].numpy()
            log_probs = logits.log_softmax(-1)[0].gather(-1, ys[0, 1:, None])[:, 0]
        return Outputs(hidden, log_probs.numpy())

    def _greedy(
        self, tokens: Tokens, src: torch.Tensor, kinds: tuple[str, ...], meta: dict
    ) -> tuple[AttentionResult, Outputs]:
        with torch.inference_mode(), capture(kinds=kinds) as recorded:
            ys = greedy(self.model, src, None, self.max_tokens)
        outputs = self._outputs(src, ys)
        generated = ys[0, 1:].tolist()
        # The last captured step read ys[:-1] and predicted ys[-1] (normally <eos>).
        read = generated[:-1]
        meta["translation"] = " ".join(self.tgt_vocab.decode(generated))
        meta["predicted"] = self.tgt_vocab.decode(generated, strip=False)
        meta["steps"] = len(generated)
        meta["finished"] = bool(generated) and generated[-1] == Vocab.EOS
        meta["flow"] = "greedy decoding (inference)"
        return AttentionResult.from_recorder(self.name, tokens, recorded, self._decoder_tokens(read), meta), outputs

    def _teacher_forced(
        self, tokens: Tokens, src: torch.Tensor, target: str, kinds: tuple[str, ...], meta: dict
    ) -> tuple[AttentionResult, Outputs]:
        words = split_words(target)
        if not words:
            raise ModelError("empty target text")
        budget = self.max_tokens - 1  # <bos> takes one decoder position
        meta["target_dropped"] = max(0, len(words) - budget)
        words = words[:budget]
        ids = self.tgt_vocab.encode(words)
        tgt = torch.tensor([[Vocab.BOS, *ids]])
        with torch.inference_mode(), capture(kinds=kinds) as recorded:
            logits = self.model.teacher_forced(src, tgt)
        meta["predicted"] = self.tgt_vocab.decode(logits[0].argmax(-1).tolist(), strip=False)
        meta["target"] = " ".join(words)
        meta["flow"] = "teacher forcing (training)"
        outputs = self._outputs(src, torch.tensor([[Vocab.BOS, *ids, Vocab.EOS]]))
        result = AttentionResult.from_recorder(self.name, tokens, recorded, self._decoder_tokens(ids, words), meta)
        return result, outputs
