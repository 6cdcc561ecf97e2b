"""The ``hf:`` backend: any model ``transformers`` can run, its forward done by ``transformers`` itself.

We ask for ``attn_implementation="eager"`` and ``output_attentions=True``. Eager matters: in
transformers 5.x the default SDPA kernel never materializes the softmax, and ``output_attentions``
then silently returns nothing. What comes back is renamed to our hook names:

==================================  ====================================================================
encoder-only (BERT …)               ``attentions`` → ``encoder.layers.{i}.self_attn.pattern``
decoder-only (GPT-2 …)              ``attentions`` → ``decoder.layers.{i}.self_attn.pattern``
encoder–decoder (T5, BART, Marian)  ``encoder_attentions`` → ``encoder.layers.{i}.self_attn.pattern``,
                                    ``decoder_attentions`` → ``decoder.layers.{i}.self_attn.pattern``,
                                    ``cross_attentions`` → ``decoder.layers.{i}.cross_attn.pattern``
==================================  ====================================================================

Patterns are ``[heads, query, key]`` float32, batch dropped. One sentence is run at a time, so there
is no padding. Encoder–decoder runs are teacher-forced on a target, or greedy-generated without one.

Only ``pattern`` exists here: ``transformers`` hands out the attention weights and nothing else
(q, k, v, scores and context stay inside its modules). The from-scratch backends have every kind.

A checkpoint that does not fit its config.json (weights missing, mis-shaped, or extra inside the
model) is refused naming the tensors (:func:`check_loading`): transformers would otherwise fill the
gaps with its random initialisation and show made-up attention without a word.

Safety and the network: weights are loaded from safetensors only (pickles can run code), custom
model code is never run (``trust_remote_code=False``), and nothing is fetched unless the user sets
``ATTENTION_VIZ_ALLOW_DOWNLOAD=1``. Without it a hub id is looked up in the local Hugging Face cache
only, so an unknown id fails at once instead of waiting on DNS.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from huggingface_hub import try_to_load_from_cache
from tokenizers import Tokenizer
from transformers import AutoConfig, AutoModel, AutoModelForSeq2SeqLM, AutoTokenizer, PretrainedConfig
from transformers.cache_utils import DynamicCache, EncoderDecoderCache
from transformers.models.auto.modeling_auto import (
    MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
    MODEL_FOR_MASKED_LM_MAPPING_NAMES,
)

from ..core.model import Shape
from ..core.result import AttentionResult
from ..core.provenance import run_of
from ..inputs.tokens import Tokens, from_encoding, tokenize
from ..weights.matching import NAMED, mismatch
from ..weights.folder_checks import check_model_folder
from ..weights.safetensors_io import check_folder
from ..errors import ModelError
from ..runtime.access import HUB_ID
from ..runtime.device import CPU, Placement
from ..runtime.settings import ALLOW_DOWNLOAD_ENV, downloads_allowed
from ..core.names import CROSS, DECODER_SELF, ENCODER_SELF, Group, hook_name
from .base import Backend, check_text, require_readable

if TYPE_CHECKING:  # the class itself loads transformers' modelling code, which sets process environment
    from transformers import PreTrainedModel

MAX_NEW_TOKENS = 64  # greedy generation budget for encoder–decoder models without a target
DEFAULT_MAX_TOKENS = 512  # when neither tokenizer nor config states a limit (T5: relative positions)
MAX_TOKENS_CAP = 2048  # eager attention is quadratic, and a longer heatmap is unreadable anyway
# A pooler turns the last layer's first token into a sentence vector after every attention has run.
UNUSED_WHEN_MISSING = ("pooler.",)
# Buffers older checkpoints saved beside the weights (causal masks, rotary frequencies, position ids):
# computed now, never read, so left over without meaning anything.
STALE_BUFFER = re.compile(r"(\.(attn|attention)\.(bias|masked_bias)|\.rotary_emb\.inv_freq|position_ids)$")


def model_shape(config: PretrainedConfig) -> Shape:
    """Which of our three shapes a ``transformers`` config describes.

    Causal LMs are recognized by type: in 5.x most configs (GPT-2's among them) no longer carry an
    ``is_decoder`` flag. Types with both a causal and a masked LM head (BERT, RoBERTa …) are
    encoders unless their config says ``is_decoder``.
    """
    if getattr(config, "is_encoder_decoder", False):
        return "encoder-decoder"
    model_type = getattr(config, "model_type", "")
    causal_only = (
        model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and model_type not in MODEL_FOR_MASKED_LM_MAPPING_NAMES
    )
    if getattr(config, "is_decoder", False) or causal_only:
        return "decoder-only"
    return "encoder-only"


def check_loading(name: str, model: PreTrainedModel, loading: dict) -> None:
    """ModelError unless every weight ``model`` runs on came from the checkpoint.

    ``loading`` is ``from_pretrained``'s loading info. transformers itself has already left out what
    it re-ties (tied embeddings) or ignores (``_keys_to_ignore_on_load_*``, position_ids buffers).
    Three kinds of difference remain harmless and pass: a pooler that is missing (it runs after every
    attention and feeds nothing shown here; ``BertModel(add_pooling_layer=False)`` saves none),
    unexpected tensors outside the model's own modules (the task head of a ``*ForMaskedLM`` or
    ``*ForCausalLM`` checkpoint, loaded here as the bare model), and stale buffers of old checkpoints.
    Anything else is refused: a missing or mis-shaped weight would be transformers' random
    initialisation, and an extra one inside the model (a layer the config does not have) means the
    config describes another model than the checkpoint.
    """
    own = {child for child, _ in model.named_children()} | {p for p, _ in model.named_parameters(recurse=False)}
    prefix = f"{model.base_model_prefix}." if model.base_model_prefix else ""

    def inside(key: str) -> bool:
        return key.removeprefix(prefix).split(".", 1)[0] in own

    missing = [key for key in loading["missing_keys"] if not key.startswith(UNUSED_WHEN_MISSING)]
    unexpected = [key for key in loading["unexpected_keys"] if inside(key) and not STALE_BUFFER.search(key)]
    problems = [mismatch(missing, unexpected)] if missing or unexpected else []
    shapes = sorted(loading["mismatched_keys"])
    if shapes:
        problems.append("mis-shaped " + ", ".join(
            f"{key} {tuple(found)} (expected {tuple(wanted)})" for key, found, wanted in shapes[:NAMED]
        ) + (f" and {len(shapes) - NAMED} more" if len(shapes) > NAMED else ""))
    problems += [message.strip().splitlines()[0] for message in loading["error_msgs"][:1] if message.strip()]
    if problems:
        raise ModelError(f"{name}: the checkpoint does not match its config.json (the attention shown would not be "
                         f"the checkpoint's): {'; '.join(problems)}")


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


@dataclass(frozen=True)
class _DecoderEncoding:
    """The four fields of a ``tokenizers.Encoding`` that :func:`from_encoding` reads, for decoder ids
    that no single ``encode`` call produced (start token + target, or generated ids)."""

    ids: list[int]
    tokens: list[str]
    special_tokens_mask: list[int]
    offsets: list[tuple[int, int]]


class HFBackend(Backend):
    """A ``transformers`` model (hub id or local folder) with its fast tokenizer, in eval mode.

    Shared by all sessions: each call's attention comes back in its own return value (5.x collects
    it through a ContextVar), and nothing is written to the object after construction.
    """

    implementation = "transformers"
    kinds = ("pattern",)

    def __init__(self, spec: str, placement: Placement = CPU) -> None:
        """Weights are read in ``placement``'s dtype directly (no float32 copy of a large model first)."""
        self.spec = spec
        self.name = f"hf:{spec}"
        source = self._locate(spec)
        self.config = self._load("config", AutoConfig, source)
        self.shape = model_shape(self.config)
        hf_tokenizer = self._load("tokenizer", AutoTokenizer, source)
        self.tokenizer = self._backend_tokenizer(hf_tokenizer)
        self.unk_id: int | None = hf_tokenizer.unk_token_id
        added = self.tokenizer.get_added_tokens_decoder().items()
        # The unk token stands for real text and is shown as such (as tokens.tokenize does).
        self.special_ids = {i for i, token in added if token.special and i != self.unk_id}
        parts = (self.tokenizer.pre_tokenizer, self.tokenizer.decoder)
        self.byte_level = any("ByteLevel" in repr(part) for part in parts)
        self.max_tokens = self._max_tokens(hf_tokenizer.model_max_length)
        model_class = AutoModelForSeq2SeqLM if self.shape == "encoder-decoder" else AutoModel
        # Mis-shaped tensors are reported with the rest below (transformers alone raises without naming them).
        model, loading = self._load(
            "model", model_class, source, attn_implementation="eager", use_safetensors=True,
            dtype=placement.torch_dtype, output_loading_info=True, ignore_mismatched_sizes=True,
        )
        check_loading(self.name, model, loading)
        self.model = model.eval().to(placement.device)
        self.placement = placement
        self.decoder_start_id = self._decoder_start_id() if self.shape == "encoder-decoder" else None

    # -- loading ---------------------------------------------------------------------------------
    def _locate(self, spec: str) -> Path | str:
        """A local folder to load from, or (downloads allowed) the hub id itself.

        Offline, a hub id resolves to its snapshot folder in the Hugging Face cache, so cached
        models get the same checks as local folders and nothing ever touches the network.
        """
        path = Path(spec).expanduser()
        if path.exists() or not HUB_ID.fullmatch(spec):
            folder = check_folder(path)
            check_model_folder(folder, self.name)  # our loader's checks, before transformers reads anything
            return folder
        if downloads_allowed():
            return spec
        cached = try_to_load_from_cache(spec, "config.json")
        if not isinstance(cached, str):
            raise ModelError(
                f"{self.name} is not available offline (no such local folder, not in the Hugging Face "
                f"cache); set {ALLOW_DOWNLOAD_ENV}=1 to fetch it from the hub"
            )
        snapshot = Path(cached).parent
        check_model_folder(snapshot, self.name)
        return snapshot

    def _load(self, what: str, loader: type, source: Path | str, **kwargs):
        """``loader.from_pretrained`` with our safety settings; its errors become one-line ModelErrors."""
        try:
            return loader.from_pretrained(
                source, local_files_only=not downloads_allowed(), trust_remote_code=False, **kwargs
            )
        except (OSError, ValueError, KeyError, RuntimeError) as error:
            message = _first_line(error)
            if "trust_remote_code" in str(error) or "custom code" in message:
                message = "it needs custom model code, and attention-viz never runs trust_remote_code"
            elif "safetensors" in message:
                message += " (attention-viz loads safetensors weights only: pickles can run arbitrary code)"
            elif downloads_allowed() and os.environ.get("HF_HUB_OFFLINE") == "1":
                message += " (HF_HUB_OFFLINE=1 is set, which blocks the download)"
            raise ModelError(f"{self.name}: cannot load the {what}: {message}") from error

    def _backend_tokenizer(self, hf_tokenizer) -> Tokenizer:
        """The Rust tokenizer behind a fast ``transformers`` tokenizer, with padding/truncation off."""
        backend = getattr(hf_tokenizer, "backend_tokenizer", None)
        # 5.x quirk: a folder without tokenizer files still yields a tokenizer, with an empty vocabulary.
        if not isinstance(backend, Tokenizer) or backend.get_vocab_size(with_added_tokens=False) == 0:
            raise ModelError(
                f"{self.name} has no usable fast tokenizer (expected tokenizer.json, or vocab files "
                "next to config.json)"
            )
        # A private copy: tokens.tokenize would otherwise copy a padding/truncating tokenizer per call.
        tokenizer = Tokenizer.from_str(backend.to_str())
        tokenizer.no_padding()
        tokenizer.no_truncation()
        return tokenizer

    def _max_tokens(self, tokenizer_limit: int) -> int:
        """The smallest sane stated limit (tokenizers often say 1e30), at most MAX_TOKENS_CAP."""
        stated = (tokenizer_limit, getattr(self.config, "max_position_embeddings", None))
        sane = [int(v) for v in stated if isinstance(v, int) and 0 < v <= 1_000_000]
        return min(min(sane, default=DEFAULT_MAX_TOKENS), MAX_TOKENS_CAP)

    def _decoder_start_id(self) -> int:
        for source in (self.model.generation_config, self.config):
            start = getattr(source, "decoder_start_token_id", None)
            if isinstance(start, int):
                return start
        raise ModelError(f"{self.name} has no decoder_start_token_id in its config")

    def place(self, placement: Placement) -> None:
        if placement.key != self.placement.key:
            self.model = self.model.to(device=placement.device, dtype=placement.torch_dtype)
        self.placement = placement

    # -- running ---------------------------------------------------------------------------------
    def tokenize(self, text: str) -> tuple[Tokens, int]:
        tokens, dropped = tokenize(self.tokenizer, check_text(text), self.max_tokens)
        return require_readable(tokens), dropped

    def run(
        self, text: str, target: str | None = None, kinds: Collection[str] | None = ("pattern",)
    ) -> AttentionResult:
        """One forward through ``transformers`` (``kinds=None``: every kind this backend has).

        Encoder–decoder: teacher-forced on ``target`` (decoder input = start token + target ids);
        without a target, greedy ``generate`` first, then one teacher-forced forward on the
        generated ids. The decoder is causal, so that forward's rows equal what each generation
        step computed, and it yields every step's attention in one ``[heads, T, T]`` pattern.
        """
        unsupported = sorted(set(kinds or ()) - set(self.kinds))
        if unsupported:
            raise ModelError(
                f"{self.name} can capture only 'pattern', not {unsupported}: transformers returns the "
                "attention weights only; q, k, v, scores and context need a from-scratch model (e.g. minilm)"
            )
        if target is not None and self.shape != "encoder-decoder":
            raise ModelError(f"{self.name} is {self.shape}: it takes no target text")
        tokens, dropped = self.tokenize(text)
        if not tokens.ids:
            raise ModelError("the text gives no tokens; type something")
        ids = torch.tensor([tokens.ids], device=self.model.device)  # (1, S): one sentence, so no padding anywhere
        meta: dict = {"dropped": dropped, "implementation": self.implementation,
                      "provenance": run_of(self.name, self.implementation, text, target)}
        with torch.inference_mode():
            if self.shape == "encoder-decoder":
                return self._run_encoder_decoder(tokens, ids, target, meta)
            extra = {"use_cache": False} if self.shape == "decoder-only" else {}
            out = self.model(input_ids=ids, attention_mask=torch.ones_like(ids), output_attentions=True, **extra)
        part = "encoder" if self.shape == "encoder-only" else "decoder"
        arrays = self._patterns(out.attentions, (part, "self_attn"), len(tokens), len(tokens))
        return AttentionResult(self.name, tokens, arrays, meta=meta)

    def _run_encoder_decoder(
        self, tokens: Tokens, ids: torch.Tensor, target: str | None, meta: dict
    ) -> AttentionResult:
        if target is None:
            decoder_ids = self._generate(ids)
            target = meta["generated_text"] = self.tokenizer.decode(decoder_ids, skip_special_tokens=True)
        else:
            target_tokens, meta["target_dropped"] = tokenize(self.tokenizer, target, self.max_tokens - 1)
            decoder_ids = [self.decoder_start_id, *target_tokens.ids]
        out = self.model(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            decoder_input_ids=torch.tensor([decoder_ids], device=ids.device),
            output_attentions=True,  # in 5.x this also returns cross_attentions
            use_cache=False,
        )
        source, decoder = len(tokens), len(decoder_ids)
        arrays = {
            **self._patterns(out.encoder_attentions, ENCODER_SELF, source, source),
            **self._patterns(out.decoder_attentions, DECODER_SELF, decoder, decoder),
            **self._patterns(out.cross_attentions, CROSS, decoder, source),
        }
        return AttentionResult(self.name, tokens, arrays, self._decoder_tokens(target, decoder_ids), meta)

    def _generate(self, ids: torch.Tensor) -> list[int]:
        """Greedy decoding; returns the decoder ids, start token first."""
        generated = self.model.generate(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=min(MAX_NEW_TOKENS, self.max_tokens - 1),
            num_beams=1,
            do_sample=False,
            # A growing cache: 5.x sizes the default one from the encoder's layer count, which
            # breaks models whose decoder is deeper (T5 with num_decoder_layers > num_layers).
            past_key_values=EncoderDecoderCache(DynamicCache(), DynamicCache()),
        )
        return generated[0].tolist()

    def _decoder_tokens(self, text: str, decoder_ids: Sequence[int]) -> Tokens:
        """Tokens for decoder ids, with labels and spans cut from ``text`` where the ids spell it.

        The ids are the start token (plus any special prefix), then text tokens, then special ones
        (eos). When the text tokens are a prefix of the tokenization of ``text`` (always, unless
        truncated mid-way or a model generated a non-canonical tokenization) they get its offsets;
        otherwise labels fall back to the cleaned token strings.
        """
        ids = list(decoder_ids)
        is_special = [k == 0 or i in self.special_ids for k, i in enumerate(ids)]  # 0: the start token
        text_positions = [k for k, special in enumerate(is_special) if not special]
        start, end = (text_positions[0], text_positions[-1] + 1) if text_positions else (len(ids), len(ids))
        content = self.tokenizer.encode(text, add_special_tokens=False)
        no_span = (0, 0)  # what from_encoding reads as "no position in the text"
        if content.ids[: end - start] == ids[start:end]:
            offsets = [no_span] * start + list(content.offsets[: end - start]) + [no_span] * (len(ids) - end)
        else:
            offsets = [no_span] * len(ids)
        encoding = _DecoderEncoding(
            ids=ids,
            tokens=[self.tokenizer.id_to_token(i) or "" for i in ids],
            special_tokens_mask=[int(s) for s in is_special],
            offsets=offsets,
        )
        return from_encoding(text, encoding, self.unk_id, self.special_ids, byte_level=self.byte_level)

    def _patterns(self, attentions, group: Group, queries: int, keys: int) -> dict[str, np.ndarray]:
        """Per-layer ``[1, heads, ≥q, ≥k]`` weights → ``{hook name: [heads, q, k] float32}``.

        Slicing to the real lengths drops padding, should a model ever pad internally. In bfloat16 or
        float16 the weights are transformers' own, in that dtype (some eager code computes the softmax
        in float32 and rounds it, some does not): our Transformer keeps them float32.
        """
        if not attentions:
            raise ModelError(f"{self.name} returned no attention weights for {'.'.join(group)}")
        arrays = {}
        for i, weights in enumerate(attentions):
            if weights.dim() != 4 or weights.shape[-2] < queries or weights.shape[-1] < keys:
                shape = tuple(weights.shape)
                raise ModelError(f"{self.name}: unexpected attention shape {shape} for {hook_name(group, i, 'pattern')}")
            arrays[hook_name(group, i, "pattern")] = weights[0, :, :queries, :keys].float().cpu().numpy()
        return arrays
