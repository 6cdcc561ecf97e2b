"""The ``hf:`` backend: any model ``transformers`` can run, its forward done by ``transformers`` itself.

Every family whose attention goes through transformers' registry (nearly all in 5.x: Llama 3.x, Qwen,
Gemma, OLMo, Phi, Mistral/Mixtral, GPT-OSS, Cohere, GPT-2, BERT, BART, T5 …) is loaded with our
registered attention function (:mod:`attention_viz.backends.hf_attention`): the same hook points as
our own Transformer, per call — every kind captured, heads removed, patching, value norms — with
``meta["attention"] == "registry"``. A family that computes attention in code of its own (DeBERTa-v2)
runs eager with ``output_attentions``; only ``pattern`` exists there (``meta["attention"] == "eager"``),
renamed to our hook names:

==================================  ====================================================================
encoder-only (BERT …)               ``attentions`` → ``encoder.layers.{i}.self_attn.pattern``
decoder-only (GPT-2 …)              ``attentions`` → ``decoder.layers.{i}.self_attn.pattern``
encoder–decoder (T5, BART, Marian)  ``encoder_attentions`` → ``encoder.layers.{i}.self_attn.pattern``,
                                    ``decoder_attentions`` → ``decoder.layers.{i}.self_attn.pattern``,
                                    ``cross_attentions`` → ``decoder.layers.{i}.cross_attn.pattern``
==================================  ====================================================================

Patterns are ``[heads, query, key]`` float32, batch dropped. One sentence is run at a time, so there
is no padding. Encoder–decoder runs are teacher-forced on a target, or greedy-generated without one.

A checkpoint that does not fit its config.json (weights missing, mis-shaped, or extra inside the
model) is refused naming the tensors (:func:`check_loading`): transformers would otherwise fill the
gaps with its random initialisation and show made-up attention without a word.

Safety and the network: weights are loaded from safetensors only (pickles can run code), custom
model code is never run unless the operator sets ``ATTENTION_VIZ_ALLOW_REMOTE_CODE=1`` (it is a
checkpoint's own Python; such code rarely calls the registry, and then runs eager), and nothing is fetched unless the user sets
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
from transformers import (
    AutoConfig, AutoModel, AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer, PretrainedConfig,
)
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
from ..runtime.settings import ALLOW_DOWNLOAD_ENV, ALLOW_REMOTE_CODE_ENV, downloads_allowed, remote_code_allowed
from ..analysis.ablation import Ablation
from ..analysis.long_input import LongInput
from ..core.hooks import KINDS, ablate, capture
from ..core.names import CROSS, DECODER_SELF, ENCODER_SELF, Group, hook_name
from .base import Backend, Outputs, check_text, require_readable
from .hf_attention import IMPLEMENTATION, register
from .hf_long import long_refusal, queries_keys
from .hf_model import RegistryModel
from .ours import head_removals

if TYPE_CHECKING:  # the class itself loads transformers' modelling code, which sets process environment
    from transformers import PreTrainedModel

MAX_NEW_TOKENS = 64  # greedy generation budget for encoder–decoder models without a target
DEFAULT_MAX_TOKENS = 512  # when neither tokenizer nor config states a limit (T5: relative positions)
MAX_TOKENS_CAP = 2048  # eager attention is quadratic, and a longer heatmap is unreadable anyway
LONG_FROM = 1024  # a decoder that reads long inputs captures up to here; past it, the long path (as ours)
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
        model_class = self._model_class()
        register()
        # Mis-shaped tensors are reported with the rest below (transformers alone raises without naming them).
        options = dict(use_safetensors=True, dtype=placement.torch_dtype, output_loading_info=True,
                       ignore_mismatched_sizes=True)
        try:
            model, loading = self._load("model", model_class, source, attn_implementation=IMPLEMENTATION, **options)
        except ModelError as refused:  # a family that takes no attention function but its own
            if "attention" not in str(refused).lower():
                raise
            model, loading = self._load("model", model_class, source, attn_implementation="eager", **options)
        check_loading(self.name, model, loading)
        self.model = model.eval().to(placement.device)
        self.placement = placement
        self.decoder_start_id = self._decoder_start_id() if self.shape == "encoder-decoder" else None
        self.registry = self._attach_registry()
        self._long_refusal = (long_refusal(self.registry, self.name) if self.registry is not None
                              else f"{self.name}'s attention does not go through transformers' attention registry")
        if self.can_read_long:  # past LONG_FROM tokens the views rebuild patterns blockwise from q/k
            self.max_tokens = min(self.max_tokens, LONG_FROM)

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
                source, local_files_only=not downloads_allowed(), trust_remote_code=remote_code_allowed(), **kwargs
            )
        except (OSError, ValueError, KeyError, RuntimeError) as error:
            message = _first_line(error)
            if "trust_remote_code" in str(error) or "custom code" in message:
                message = (f"it needs custom model code, which runs only where the operator allows it "
                           f"({ALLOW_REMOTE_CODE_ENV}=1)")
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

    def _model_class(self) -> type:
        """The seq2seq class, the causal-LM class where the checkpoint holds its LM head (so patching and
        ablation have logits), else the bare model."""
        if self.shape == "encoder-decoder":
            return AutoModelForSeq2SeqLM
        saved_as = getattr(self.config, "architectures", None) or []
        if self.shape == "decoder-only" and any(a.endswith(("ForCausalLM", "LMHeadModel")) for a in saved_as):
            return AutoModelForCausalLM
        return AutoModel

    def _attach_registry(self) -> RegistryModel | None:
        """Our hook points inside the model when its attention goes through the registry (one probe
        forward names each attention); else eager attention, as before, and None."""
        if getattr(self.model.config, "_attn_implementation", None) != IMPLEMENTATION:
            return None
        vocab = int(getattr(self.config, "vocab_size", 0) or self.tokenizer.get_vocab_size())
        source = torch.arange(3, device=self.model.device)[None] % max(vocab, 1)  # (1, 3): any ids will do
        extra: dict = {"use_cache": False} if self.shape != "encoder-only" else {}
        if self.shape == "encoder-decoder":
            extra["decoder_input_ids"] = source[:, :2]
        registry = RegistryModel.attach(self.model, self.shape, lambda: self.model(input_ids=source, **extra),
                                        decoder_length=2, name=self.name)
        if registry is None:
            self.model.set_attn_implementation("eager")
        else:
            self.kinds = KINDS
        return registry

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
                f"{self.name} can capture only 'pattern', not {unsupported}: its attention does not go through "
                "transformers' attention registry, so only the weights eager attention returns can be shown"
            )
        if self.registry is not None:
            return self._forward(text, target, kinds, None)[0]
        tokens, meta, inputs, decoder_tokens = self._inputs(text, target)
        with torch.inference_mode():
            out = self.model(**inputs, output_attentions=True)  # in 5.x this also returns cross_attentions
        if self.shape != "encoder-decoder":
            part = "encoder" if self.shape == "encoder-only" else "decoder"
            arrays = self._patterns(out.attentions, (part, "self_attn"), len(tokens), len(tokens))
            return AttentionResult(self.name, tokens, arrays, meta=meta)
        source, decoder = len(tokens), len(decoder_tokens)
        arrays = {
            **self._patterns(out.encoder_attentions, ENCODER_SELF, source, source),
            **self._patterns(out.decoder_attentions, DECODER_SELF, decoder, decoder),
            **self._patterns(out.cross_attentions, CROSS, decoder, source),
        }
        return AttentionResult(self.name, tokens, arrays, decoder_tokens, meta)

    @property
    def can_ablate(self) -> bool:  # type: ignore[override]
        return self.registry is not None

    @property
    def can_read_long(self) -> bool:  # type: ignore[override]
        return self._long_refusal is None and self._position_limit() > LONG_FROM

    def _position_limit(self) -> int:
        limit = getattr(self.config, "max_position_embeddings", None)
        return int(limit) if isinstance(limit, int) and limit > 0 else 0

    def long_tokens(self, text: str) -> tuple[Tokens, int]:
        if not self.can_read_long:
            return super().long_tokens(text)
        tokens, dropped = tokenize(self.tokenizer, check_text(text), self._position_limit())
        return require_readable(tokens), dropped

    def long_input(self, tokens: Tokens, dropped: int = 0) -> LongInput:
        if not self.can_read_long:
            return super().long_input(tokens, dropped)
        ids = torch.tensor([tokens.ids], device=self.model.device)
        return LongInput(self.name, tokens, queries_keys(self.registry, ids, self.name), dropped)

    def _cannot_read_long(self) -> ModelError:
        if self._long_refusal is not None:
            return ModelError(f"{self.name} cannot read inputs longer than {self.max_tokens} tokens here: "
                              f"{self._long_refusal.removeprefix(self.name + ' ')}")
        return super()._cannot_read_long()

    def forward(self, text: str, target: str | None = None, kinds: Collection[str] | None = ("pattern",),
                ablation: Ablation | None = None) -> tuple[AttentionResult, Outputs]:
        """:meth:`run` without ``ablation``'s heads (per call, through the context hook points), plus the
        final hidden states and, where the checkpoint has its LM head, log p(each next token)."""
        if self.registry is None:
            raise self.ablation_refusal()
        result, out, ids = self._forward(text, target, kinds, ablation)
        hidden = (out.decoder_hidden_states if self.shape == "encoder-decoder" else out.hidden_states)[-1][0]
        log_probs = None
        if getattr(out, "logits", None) is not None:
            chosen = ids[1:]
            log_probs = out.logits[0, :-1].float().log_softmax(-1).gather(-1, chosen[:, None])[:, 0]
            log_probs = log_probs.cpu().numpy()
        return result, Outputs(hidden.float().cpu().numpy(), log_probs)

    def output_projection(self, group: Group, layer: int) -> np.ndarray | None:
        return None if self.registry is None else self.registry.output_projection(group, layer)

    def _forward(self, text: str, target: str | None, kinds: Collection[str] | None,
                 ablation: Ablation | None) -> tuple[AttentionResult, object, torch.Tensor]:
        """One forward through our attention function with capture and the ablation's heads removed;
        the result, transformers' output (hidden states included) and the ids that were read last
        (the decoder's for an encoder–decoder)."""
        tokens, meta, inputs, decoder_tokens = self._inputs(text, target)
        removals = {}
        if ablation is not None:
            meta["ablation"] = ablation.to_dict()
            meta["provenance"] = run_of(self.name, self.implementation, text, target, ablation.describe())
            removals = head_removals(ablation, self.registry.heads, self.model.device)
        with torch.inference_mode(), ablate(removals), capture(kinds=kinds) as recorded:
            out = self.model(**inputs, output_hidden_states=True)
        result = AttentionResult.from_recorder(self.name, tokens, recorded, decoder_tokens, meta)
        last = inputs.get("decoder_input_ids", inputs["input_ids"])[0]
        return result, out, last

    def _inputs(self, text: str, target: str | None) -> tuple[Tokens, dict, dict, Tokens | None]:
        """The text's tokens, the result's meta, transformers' inputs and the decoder's tokens."""
        if target is not None and self.shape != "encoder-decoder":
            raise ModelError(f"{self.name} is {self.shape}: it takes no target text")
        tokens, dropped = self.tokenize(text)
        if not tokens.ids:
            raise ModelError("the text gives no tokens; type something")
        ids = torch.tensor([tokens.ids], device=self.model.device)  # (1, S): one sentence, so no padding anywhere
        meta: dict = {"dropped": dropped, "implementation": self.implementation,
                      "attention": "registry" if self.registry is not None else "eager",
                      "provenance": run_of(self.name, self.implementation, text, target)}
        decoder_tokens, inputs = None, {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
        if self.shape == "encoder-decoder":
            decoder_ids, target = self._decoder_ids(ids, target, meta)
            decoder_tokens = self._decoder_tokens(target, decoder_ids)
            inputs["decoder_input_ids"] = torch.tensor([decoder_ids], device=ids.device)
        if self.shape != "encoder-only":
            inputs["use_cache"] = False
        return tokens, meta, inputs, decoder_tokens

    def _decoder_ids(self, ids: torch.Tensor, target: str | None, meta: dict) -> tuple[list[int], str]:
        """The decoder's input ids (start token first) and the text they spell: the target's, or the
        greedy translation's."""
        if target is None:
            with torch.inference_mode():
                decoder_ids = self._generate(ids)
            target = meta["generated_text"] = self.tokenizer.decode(decoder_ids, skip_special_tokens=True)
            return decoder_ids, target
        target_tokens, meta["target_dropped"] = tokenize(self.tokenizer, target, self.max_tokens - 1)
        return [self.decoder_start_id, *target_tokens.ids], target

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
