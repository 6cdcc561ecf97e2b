"""Our own Transformer (model.py) carrying real weights: the BERT-family encoder (``minilm``)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path

import numpy as np
import torch
from tokenizers import Tokenizer

from ..core.hooks import KINDS, capture
from .inside import InsideHead, inside_head
from .padding import PaddedBatch, padded_batch
from ..core.positional import LearnedEncoding
from ..core.model import Transformer
from ..core.result import AttentionResult
from ..core.provenance import run_of
from ..inputs.tokens import Tokens, load_tokenizer, tokenize
from ..weights.bert import build_bert
from ..weights.folder_checks import check_model_folder
from ..weights.safetensors_io import read_config
from ..errors import ModelError
from ..analysis.ablation import Ablation
from ..core.names import Group
from .base import Backend, Outputs, check_text, require_readable
from .ours import ablation_context, input_ids, output_projection, placed, to_numpy
from ..runtime.device import Placement


class ScratchEncoderBackend(Backend):
    """An encoder-only model of ours with a WordPiece tokenizer; every hook kind is available."""

    shape = "encoder-only"
    kinds = KINDS
    can_ablate = True

    def __init__(self, name: str, model: Transformer, tokenizer: Tokenizer) -> None:
        self.name = name
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.max_tokens = model.config.max_len

    @classmethod
    def from_bert_folder(cls, name: str, folder: Path) -> ScratchEncoderBackend:
        """A folder with ``config.json``, ``model.safetensors`` and ``tokenizer.json`` or ``vocab.txt``."""
        weights = check_model_folder(folder, name)
        return cls(name, build_bert(read_config(folder), weights), load_tokenizer(folder))

    def place(self, placement: Placement) -> None:
        self.model, self.placement = placed(self.model, placement), placement

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
        return self.forward(text, target, kinds, use_positions=use_positions)[0]

    def forward(
        self,
        text: str,
        target: str | None = None,
        kinds: Collection[str] = ("pattern",),
        ablation: Ablation | None = None,
        use_positions: bool = True,
    ) -> tuple[AttentionResult, Outputs]:
        if target is not None:
            raise ModelError(f"{self.name} is an encoder-only model: it takes no target text")
        tokens, dropped = self.tokenize(text)
        ids = input_ids(self.model, tokens.ids)
        meta: dict = {"dropped": dropped, "implementation": self.implementation}
        meta["provenance"] = run_of(self.name, self.implementation, text, None, ablation and ablation.describe(),
                                    None if use_positions else "positions off")
        if ablation is not None:
            meta["ablation"] = ablation.to_dict()
        with torch.inference_mode(), ablation_context(self.model, ablation), capture(kinds=kinds) as recorded:
            hidden = self.model(ids, use_positions=use_positions)
        result = AttentionResult.from_recorder(self.name, tokens, recorded, meta=meta)
        return result, Outputs(to_numpy(hidden[0]))

    def output_projection(self, group: Group, layer: int):
        return output_projection(self.model, group, layer)

    can_run_without_positions = can_open_heads = can_batch_with_padding = True

    def run_without_positions(self, text: str) -> AttentionResult:
        return self.run(text, use_positions=False)

    def position_table(self) -> np.ndarray | None:
        positions = self.model.encoder.embed.positions
        return to_numpy(positions.weight).copy() if isinstance(positions, LearnedEncoding) else None

    def inside_head(self, ids: Sequence[int], layer: int, head: int, scale: bool = True) -> InsideHead:
        return inside_head(self.model, list(ids), layer, head, scale)

    def padded_batch(self, sentences: Sequence[Sequence[int]], layer: int) -> PaddedBatch:
        return padded_batch(self.model, sentences, layer, pad_id=self.tokenizer.token_to_id("[PAD]") or 0)

    def layer_states(self, text: str, kinds: Collection[str] = ("pattern",)) -> tuple[AttentionResult, "np.ndarray"]:
        """The encoder's forward layer by layer (as ``Encoder.forward`` does it), keeping each layer's output."""
        tokens, dropped = self.tokenize(text)
        encoder = self.model.encoder
        states = []
        with torch.inference_mode(), capture(kinds=kinds) as recorded:
            x = encoder.embed(input_ids(self.model, tokens.ids))  # (1, T, d_model)
            for layer in encoder.layers:
                x = layer(x, None)
                states.append(x[0])
        result = AttentionResult.from_recorder(self.name, tokens, recorded,
                                               meta={"dropped": dropped, "implementation": self.implementation,
                                                     "provenance": run_of(self.name, self.implementation, text)})
        return result, to_numpy(torch.stack(states))  # (layers, T, d_model)
