"""Our own Transformer (model.py) carrying real weights: the BERT-family encoder (``minilm``)."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

import torch
from tokenizers import Tokenizer

from ..hooks import KINDS, capture
from ..model import Transformer
from ..result import AttentionResult
from ..tokens import Tokens, load_tokenizer, tokenize
from ..weights.bert import build_bert
from ..weights.safetensors_io import read_config, read_safetensors
from ..errors import ModelError
from .base import Backend, check_text, require_readable


class ScratchEncoderBackend(Backend):
    """An encoder-only model of ours with a WordPiece tokenizer; every hook kind is available."""

    shape = "encoder-only"
    kinds = KINDS

    def __init__(self, name: str, model: Transformer, tokenizer: Tokenizer) -> None:
        self.name = name
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.max_tokens = model.config.max_len

    @classmethod
    def from_bert_folder(cls, name: str, folder: Path) -> ScratchEncoderBackend:
        """A folder with ``config.json``, ``model.safetensors`` and ``tokenizer.json`` or ``vocab.txt``."""
        model = build_bert(read_config(folder), read_safetensors(folder))
        return cls(name, model, load_tokenizer(folder))

    def tokenize(self, text: str) -> tuple[Tokens, int]:
        tokens, dropped = tokenize(self.tokenizer, check_text(text), self.max_tokens)
        return require_readable(tokens), dropped

    def run(
        self,
        text: str,
        target: str | None = None,
        kinds: Collection[str] = ("pattern",),
        use_positions: bool = True,
    ) -> AttentionResult:
        """``use_positions=False`` drops the position embeddings (the "without positions" view)."""
        if target is not None:
            raise ModelError(f"{self.name} is an encoder-only model: it takes no target text")
        tokens, dropped = self.tokenize(text)
        ids = torch.tensor([tokens.ids])
        with torch.inference_mode(), capture(kinds=kinds) as recorded:
            self.model(ids, use_positions=use_positions)
        return AttentionResult.from_recorder(self.name, tokens, recorded, meta={"dropped": dropped})
