"""The ``induction`` demo model (attention_viz/trained/induction.py): a decoder-only Transformer of
ours that reads space-separated single symbols (lowercase letters, digits) after a ``<bos>``.

``run`` captures the decoder self-attention; ``meta["predicted"]`` holds the model's most likely
next symbol after every position. ``forward`` also gives log p(the next symbol) at every position:
the numbers the page and the model card compare with and without heads.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

import torch

from ..analysis.ablation import Ablation
from ..analysis.probes import sequence_probes
from ..errors import ModelError, UnreadableText
from ..core.hooks import KINDS, capture
from ..core.names import Group
from ..core.result import AttentionResult
from ..core.provenance import run_of
from ..inputs.tokens import Tokens, from_words
from ..trained import checkpoint
from ..trained.vocab import Vocab
from ..trained.induction_data import MAX_SEGMENT, MIN_SEGMENT, SYMBOLS
from .base import Backend, Outputs, check_text
from .ours import ablation_context, input_ids, output_projection, placed, to_numpy
from ..runtime.device import Placement

# What a person would type to see induction (no symbol twice within a segment, so each copy is found once)
INDUCTION_EXAMPLES = {
    "A segment typed twice (induction)": "k 3 p q 7 m x 2 k 3 p q 7 m x 2",
    "A longer segment typed twice": "a 7 q z 3 m k 9 w e b 5 a 7 q z 3 m k 9 w e b 5",
    "Three copies": "p 2 x f p 2 x f p 2 x f",
    "No repeat (nothing to copy)": "j 4 u c 8 n r 1 y g 6 d v 0 h s",
}


class InductionBackend(Backend):
    shape = "decoder-only"
    kinds = KINDS
    can_ablate = True

    def __init__(self, name: str, trained: checkpoint.TrainedModel) -> None:
        self.name = name
        self.model = trained.model.eval()
        self.vocab = trained.src_vocab
        self.max_tokens = trained.max_len

    @classmethod
    def from_folder(cls, name: str, folder: Path) -> InductionBackend:
        try:
            return cls(name, checkpoint.load(folder))
        except ValueError as error:
            raise ModelError(str(error)) from None

    def place(self, placement: Placement) -> None:
        self.model, self.placement = placed(self.model, placement), placement

    def tokenize(self, text: str) -> tuple[Tokens, int]:
        symbols = check_text(text).lower().split()
        wrong = sorted({s for s in symbols if s not in self.vocab or s in Vocab.SPECIALS})
        if wrong:
            raise UnreadableText(
                f"{self.name} reads single lowercase letters and digits separated by spaces (e.g. 'a 7 q a 7'); "
                f"not: {' '.join(wrong[:5])}"
            )
        dropped = max(0, len(symbols) - (self.max_tokens - 1))
        symbols = symbols[: self.max_tokens - 1]
        ids = [Vocab.BOS, *self.vocab.encode(symbols)]
        return from_words(["<bos>", *symbols], ids, [True] + [False] * len(symbols)), dropped

    def run(self, text: str, target: str | None = None, kinds: Collection[str] = ("pattern",)) -> AttentionResult:
        return self.forward(text, target, kinds)[0]

    def forward(
        self, text: str, target: str | None = None, kinds: Collection[str] = ("pattern",), ablation: Ablation | None = None
    ) -> tuple[AttentionResult, Outputs]:
        if target is not None:
            raise ModelError(f"{self.name} is a decoder-only model: it takes no target text")
        tokens, dropped = self.tokenize(text)
        ids = input_ids(self.model, tokens.ids)
        meta: dict = {"dropped": dropped, "implementation": self.implementation}
        meta["provenance"] = run_of(self.name, self.implementation, text, None, ablation and ablation.describe())
        if ablation is not None:
            meta["ablation"] = ablation.to_dict()
        with torch.inference_mode(), ablation_context(self.model, ablation), capture(kinds=kinds) as recorded:
            hidden = self.model(ids)  # (1, T, d_model)
        with torch.inference_mode():
            log_probs = self.model.logits(hidden).float().log_softmax(-1)[0]  # (T, V)
            following = log_probs[:-1].gather(-1, ids[0, 1:, None])[:, 0]  # log p(token t+1 | ..t)
        meta["predicted"] = self.vocab.decode(log_probs.argmax(-1).tolist(), strip=False)
        result = AttentionResult.from_recorder(self.name, tokens, recorded, meta=meta)
        return result, Outputs(to_numpy(hidden[0]), to_numpy(following))

    def output_projection(self, group: Group, layer: int):
        return output_projection(self.model, group, layer)

    def probe_texts(self, n: int = 24, seed: int = 0) -> list[str]:
        return sequence_probes(SYMBOLS, n, seed, min_length=MIN_SEGMENT, max_length=MAX_SEGMENT)

    def examples(self) -> dict[str, str]:
        return dict(INDUCTION_EXAMPLES)
