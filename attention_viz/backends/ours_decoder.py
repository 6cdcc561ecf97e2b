"""``hf:`` checkpoints whose architecture we implement, run in our own decoder (model.py).

A folder (or a hub snapshot already in the local Hugging Face cache) whose ``config.json`` names a
Llama, Mistral, Qwen2, GPT-NeoX or GPT-2 model, in a variant our config switches reproduce, opens
here: every hook kind is captured (q, k, v, scores, pattern, context), K and V per key/value head
under grouped-query attention. Anything else — other architectures, rotary scaling, unknown
activations — returns None from :func:`open_in_ours` and ``transformers`` runs it as before.

The tokenizer is the folder's own, read by the ``tokenizers`` library (``tokenizer.json``, or
GPT-2's ``vocab.json`` + ``merges.txt``). Nothing here touches the network.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

import torch
from tokenizers import Tokenizer

from ..analysis.long_input import LongInput
from ..errors import ModelError
from ..hooks import KINDS, capture
from ..longcontext import queries_and_keys
from ..model import Transformer, TransformerConfig
from ..result import AttentionResult
from ..tokens import Tokens, load_tokenizer, tokenize
from ..weights.gpt2 import gpt2_config, load_gpt2_state
from ..weights.llama import FAMILIES, llama_config, load_llama_state
from ..weights.neox import load_neox_state, neox_config
from ..weights.safetensors_io import read_config, read_safetensors, safetensors_files
from .base import Backend, check_text, require_readable
from .hub import local_folder

MAX_TOKENS_CAP = 1024  # a capture keeps layers × heads × T² floats; the head view reads longer inputs blockwise


def _llama_state(model: Transformer, tensors: dict, hf_config: dict) -> None:
    load_llama_state(model, tensors, FAMILIES[hf_config["model_type"]])


# model_type → (config.json → our config, tensors → model); the config step raises ModelError for
# variants we do not reproduce, which sends the model to transformers instead.
ARCHITECTURES: dict[str, tuple[Callable[[dict], TransformerConfig], Callable[[Transformer, dict, dict], None]]] = {
    "llama": (llama_config, _llama_state),
    "mistral": (llama_config, _llama_state),
    "qwen2": (llama_config, _llama_state),
    "gpt_neox": (neox_config, lambda model, tensors, _: load_neox_state(model, tensors)),
    "gpt2": (gpt2_config, lambda model, tensors, _: load_gpt2_state(model, tensors)),
}


def supported_config(hf_config: dict) -> TransformerConfig | None:
    """Our config for a ``config.json``, or None when our model cannot reproduce it."""
    entry = ARCHITECTURES.get(hf_config.get("model_type"))
    if entry is None:
        return None
    try:
        return entry[0](hf_config)
    except ModelError:
        return None


def open_in_ours(spec: str) -> Backend | None:
    """Our decoder for ``hf:spec`` when the checkpoint's architecture is one we implement, else None.

    Problems with the folder itself (broken config.json, pickle-only weights, tensors that do not
    match the config, no tokenizer) raise ModelError, as they would in the ``transformers`` backend.
    """
    folder = local_folder(spec)
    if folder is None:
        return None
    hf_config = read_config(folder)
    config = supported_config(hf_config)
    if config is None:
        return None
    safetensors_files(folder)  # refuses pickle-only folders before anything is read
    try:
        tokenizer = load_tokenizer(folder)
    except (FileNotFoundError, ValueError, OSError) as error:
        raise ModelError(f"hf:{spec} has no usable tokenizer ({error}); expected tokenizer.json") from None
    model = Transformer(config)
    ARCHITECTURES[hf_config["model_type"]][1](model, read_safetensors(folder), hf_config)
    return OursDecoderBackend(f"hf:{spec}", model.eval(), tokenizer, hf_config["model_type"])


class OursDecoderBackend(Backend):
    """A decoder-only checkpoint in our Transformer, with its own tokenizer; every hook kind."""

    shape = "decoder-only"
    kinds = KINDS

    def __init__(self, name: str, model: Transformer, tokenizer: Tokenizer, architecture: str) -> None:
        self.name = name
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.architecture = architecture
        self.max_tokens = min(model.config.max_len, MAX_TOKENS_CAP)

    def tokenize(self, text: str) -> tuple[Tokens, int]:
        tokens, dropped = tokenize(self.tokenizer, check_text(text), self.max_tokens)
        return require_readable(tokens), dropped

    def run(
        self, text: str, target: str | None = None, kinds: Collection[str] | None = ("pattern",)
    ) -> AttentionResult:
        """One forward of our decoder with capture (``kinds=None``: every kind)."""
        if target is not None:
            raise ModelError(f"{self.name} is decoder-only: it takes no target text")
        tokens, dropped = self.tokenize(text)
        ids = torch.tensor([tokens.ids])  # (1, T)
        with torch.inference_mode(), capture(kinds=kinds) as recorded:
            self.model(ids)
        return AttentionResult.from_recorder(self.name, tokens, recorded, meta=self.meta(dropped))

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
        kept = queries_and_keys(self.model, torch.tensor([tokens.ids]))  # layers run as views ask
        return LongInput(self.name, tokens, kept, dropped)

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
