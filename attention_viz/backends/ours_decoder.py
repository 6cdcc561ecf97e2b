"""``hf:`` checkpoints whose architecture we implement, run in our own decoder (model.py).

A folder (or a hub snapshot already in the local Hugging Face cache) whose ``config.json`` names a
Llama, Mistral, Qwen2, GPT-NeoX or GPT-2 model, in a variant our config switches reproduce, opens
here: every hook kind is captured (q, k, v, scores, pattern, context), K and V per key/value head
under grouped-query attention; heads can be removed (ablation) and W_O is read (value norms).
Anything else — other architectures, rotary scalings other than ``linear`` and ``llama3``, unknown
activations — returns None from :func:`open_in_ours` and ``transformers`` runs it as before.

A checkpoint saved as the bare model (``LlamaModel``, ``Qwen2Model``, ``MistralModel``,
``GPTNeoXModel``: how embedding models ship) has no LM head: it runs here all the same, and what
needs next-token logits (an ablation's loss, :meth:`OursDecoderBackend.forward`) says so in one sentence.

The tokenizer is the folder's own, read by the ``tokenizers`` library (``tokenizer.json``, or
GPT-2's ``vocab.json`` + ``merges.txt``). Nothing here touches the network.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

import numpy as np
import torch
from tokenizers import Tokenizer

from ..analysis.ablation import Ablation
from ..analysis.long_input import LongInput
from ..errors import ModelError
from ..core.hooks import KINDS, capture
from ..core.longcontext import queries_and_keys
from ..core.model import Transformer, TransformerConfig
from ..core.names import Group
from ..core.result import AttentionResult
from ..core.provenance import run_of
from ..inputs.tokens import Tokens, load_tokenizer, tokenize
from ..runtime.memory_plan import check_capture, check_long, layer_room
from ..weights.gpt2 import build_gpt2, gpt2_config
from ..weights.llama import build_llama, llama_config
from ..weights.neox import build_neox, neox_config
from ..weights.safetensors_io import SafetensorsFolder, read_config, safetensors_files
from .base import Backend, Outputs, check_text, require_readable
from .hub import local_folder
from .long_passes import passes_for
from .ours import ablation_context, input_ids, output_projection, placed, to_numpy
from ..runtime.device import CPU, Placement

MAX_TOKENS_CAP = 1024  # a capture keeps layers × heads × T² floats; the head view reads longer inputs blockwise
LOGIT_ROWS = 256  # positions scored at once: a (rows, vocab) block, not (T, vocab) (150k-word vocabularies)

# model_type → (config.json → our config, config.json + tensors → our model); the config step raises
# ModelError for variants we do not reproduce, which sends the model to transformers instead.
ARCHITECTURES: dict[str, tuple[Callable[[dict], TransformerConfig], Callable[[dict, dict], Transformer]]] = {
    "llama": (llama_config, build_llama),
    "mistral": (llama_config, build_llama),
    "qwen2": (llama_config, build_llama),
    "gpt_neox": (neox_config, build_neox),
    "gpt2": (gpt2_config, build_gpt2),
}
# the class a checkpoint without an LM head was saved from, when its config.json does not say
BASE_MODELS = {"llama": "LlamaModel", "mistral": "MistralModel", "qwen2": "Qwen2Model", "gpt_neox": "GPTNeoXModel"}


def supported_config(hf_config: dict) -> TransformerConfig | None:
    """Our config for a ``config.json``, or None when our model cannot reproduce it."""
    entry = ARCHITECTURES.get(hf_config.get("model_type"))
    if entry is None:
        return None
    try:
        return entry[0](hf_config)
    except ModelError:
        return None


def open_in_ours(spec: str, placement: Placement = CPU) -> Backend | None:
    """Our decoder for ``hf:spec`` when the checkpoint's architecture is one we implement, else None.
    Its weights are read tensor by tensor straight onto ``placement``'s device, in its dtype.

    Problems with the folder itself (broken config.json, pickle-only weights, tensors that do not
    match the config, no tokenizer) raise ModelError, as they would in the ``transformers`` backend.
    """
    folder = local_folder(spec)
    if folder is None:
        return None
    hf_config = read_config(folder)
    if supported_config(hf_config) is None:
        return None
    safetensors_files(folder)  # refuses pickle-only folders before anything is read
    try:
        tokenizer = load_tokenizer(folder)
    except (FileNotFoundError, ValueError, OSError) as error:
        raise ModelError(f"hf:{spec} has no usable tokenizer ({error}); expected tokenizer.json") from None
    architecture = hf_config["model_type"]
    model = ARCHITECTURES[architecture][1](hf_config, SafetensorsFolder(folder), device=placement.device,
                                            dtype=placement.torch_dtype)
    saved_as = (hf_config.get("architectures") or [BASE_MODELS.get(architecture, "a base model")])[0]
    backend = OursDecoderBackend(f"hf:{spec}", model, tokenizer, architecture, saved_as)
    backend.placement = placement
    return backend


class OursDecoderBackend(Backend):
    """A decoder-only checkpoint in our Transformer, with its own tokenizer; every hook kind, head
    ablation, and log p(next token) when the checkpoint has its LM head."""

    shape = "decoder-only"
    kinds = KINDS
    can_ablate = True

    def __init__(self, name: str, model: Transformer, tokenizer: Tokenizer, architecture: str, saved_as: str) -> None:
        """``saved_as``: the class the checkpoint was saved from (config.json's ``architectures``)."""
        self.name = name
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.architecture = architecture
        self.max_tokens = min(model.config.max_len, MAX_TOKENS_CAP)
        # what forward() says instead of next-token log-probs (the outputs an ablation is measured on)
        self._no_head = None if model.decoder.generator is not None else (
            f"{name}: this checkpoint has no LM head (saved as {saved_as}): next-token views need one")

    def place(self, placement: Placement) -> None:
        if placement.key != self.placement.key:  # open_in_ours reads the weights where they go
            self.model = placed(self.model, placement)
        self.placement = placement

    def tokenize(self, text: str) -> tuple[Tokens, int]:
        tokens, dropped = tokenize(self.tokenizer, check_text(text), self.max_tokens)
        return require_readable(tokens), dropped

    def run(
        self, text: str, target: str | None = None, kinds: Collection[str] | None = ("pattern",)
    ) -> AttentionResult:
        """One forward of our decoder with capture (``kinds=None``: every kind)."""
        return self._capture(text, target, kinds, None)[0]

    def forward(
        self,
        text: str,
        target: str | None = None,
        kinds: Collection[str] | None = ("pattern",),
        ablation: Ablation | None = None,
    ) -> tuple[AttentionResult, Outputs]:
        """:meth:`run` without ``ablation``'s heads, plus the final hidden states and log p(token t+1 |
        tokens ..t) at every position but the last: a ModelError for a checkpoint without its LM head."""
        if self._no_head:
            raise ModelError(self._no_head)
        result, hidden, ids = self._capture(text, target, kinds, ablation)
        return result, Outputs(to_numpy(hidden), to_numpy(self._following(hidden, ids)))

    def _capture(
        self, text: str, target: str | None, kinds: Collection[str] | None, ablation: Ablation | None
    ) -> tuple[AttentionResult, torch.Tensor, torch.Tensor]:
        if target is not None:
            raise ModelError(f"{self.name} is decoder-only: it takes no target text")
        tokens, dropped = self.tokenize(text)
        longer = "; the head view reads longer texts blockwise" if self.can_read_long else ""
        check_capture(self.model, self.name, len(tokens), kinds, longer=longer)
        ids = input_ids(self.model, tokens.ids)  # (1, T)
        meta = self.meta(dropped)
        meta["provenance"] = run_of(self.name, self.implementation, text, None, ablation and ablation.describe())
        if ablation is not None:
            meta["ablation"] = ablation.to_dict()
        with torch.inference_mode(), ablation_context(self.model, ablation), capture(kinds=kinds) as recorded:
            hidden = self.model(ids)  # (1, T, d_model)
        return AttentionResult.from_recorder(self.name, tokens, recorded, meta=meta), hidden[0], ids[0]

    def _following(self, hidden: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """``(T - 1,)`` log p(ids[t + 1] | ids[..t]), from ``hidden`` ``(T, d_model)``."""
        parts = []
        with torch.inference_mode():
            for start in range(0, len(ids) - 1, LOGIT_ROWS):
                rows = slice(start, min(start + LOGIT_ROWS, len(ids) - 1))
                logits = self.model.logits(hidden[rows]).float()  # (rows, vocab)
                chosen = logits.gather(-1, ids[rows.start + 1 : rows.stop + 1, None])[:, 0]
                parts.append(chosen - logits.logsumexp(-1))
        return torch.cat(parts) if parts else torch.empty(0)

    def output_projection(self, group: Group, layer: int) -> np.ndarray | None:
        return output_projection(self.model, group, layer)

    @property
    def can_read_long(self) -> bool:  # type: ignore[override]
        """Past max_tokens, up to the model's own limit (sliding windows included)."""
        return self.model.config.max_len > self.max_tokens

    def long_tokens(self, text: str) -> tuple[Tokens, int]:
        if not self.can_read_long:
            return super().long_tokens(text)
        tokens, dropped = tokenize(self.tokenizer, check_text(text), self.model.config.max_len)
        return require_readable(tokens), dropped

    def long_input(self, tokens: Tokens, dropped: int = 0) -> LongInput:
        if not self.can_read_long:
            return super().long_input(tokens, dropped)
        check_long(self.model, self.name, len(tokens))  # the first layer a view reads; the others as they come
        room = layer_room(self.model, self.name, len(tokens))
        kept = queries_and_keys(self.model, input_ids(self.model, tokens.ids), room=room)  # layers run as views ask
        return LongInput(self.name, tokens, kept, dropped, passes_for(kept))

    def meta(self, dropped: int) -> dict:
        config = self.model.config
        return {
            "dropped": dropped,
            "implementation": self.implementation,
            "architecture": self.architecture,
            "heads": config.h,
            "kv_heads": config.kv_heads,  # query head i reads K/V head i // (heads / kv_heads)
            "sliding_window": config.sliding_window,
        }
