"""The two inputs of a patching experiment and their metric: which model the runs go through (our
Transformer, or a transformers model with our hook points), the answer and wrong tokens as each model
reads them, and each model kind's metric (see :mod:`attention_viz.backends.patching` for the runs).

Metrics, one scalar per run (what the patching papers use):

* decoder-only: logit(answer) − logit(wrong) at the last position (Wang et al. 2022's logit difference);
* encoder–decoder: log p(answer) − log p(wrong) at one target position, each run teacher-forced on
  its own greedy translation up to the position where the clean one writes ``answer``;
* encoder-only (no output vocabulary): cos(h_p, h_answer) − cos(h_p, h_wrong) on the final layer's
  states, p the pronoun (or ``token``): which candidate the pronoun's representation sits closer to.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from ..errors import ModelError
from ..core.model import Transformer
from ..inputs.tokens import Tokens
from .base import Backend, check_text
from .hf_model import RegistryModel
from .ours import device_of

PRONOUNS = ("it", "he", "she", "they", "him", "her", "them", "its", "his", "their")


@dataclass(frozen=True)
class Side:
    """One input, ready to run: ``model(*args)`` with batch 1, and the metric of its outputs."""

    tokens: Tokens  # what the text became (the source of an encoder–decoder)
    args: tuple[torch.Tensor, ...]
    measure: Callable[[torch.Tensor], torch.Tensor]  # model output (B, T, d_model) → (B,)
    target: tuple[str, ...] | None = None  # encoder–decoder: the decoder inputs, <bos> first


# -- which model, which words ---------------------------------------------------------------------


def patchable_model(backend: Backend) -> Transformer:
    """The backend's Transformer of ours; a ModelError says why any other model cannot be patched."""
    model = patch_target(backend)
    if not isinstance(model, Transformer):
        raise ModelError(f"{backend.name} runs in transformers: this needs a model that runs in our own Transformer")
    return model


def patch_target(backend: Backend) -> Transformer | RegistryModel:
    """The model the patching runs go through: our Transformer, or a transformers model with our hook
    points (its attention through the registry); a ModelError says why any other cannot be patched."""
    from .induction import InductionBackend
    from .ours_decoder import OursDecoderBackend
    from .scratch import ScratchEncoderBackend
    from .translation import TranslationBackend

    if isinstance(backend, (ScratchEncoderBackend, OursDecoderBackend, InductionBackend)):
        return backend.model
    if isinstance(backend, TranslationBackend) and backend.model.multi_head:
        return backend.model
    registry = getattr(backend, "registry", None)
    if isinstance(registry, RegistryModel):
        return registry
    if backend.implementation == "transformers":
        raise ModelError(f"{backend.name} cannot be patched: its attention does not go through transformers' "
                         "attention registry, where our hook points sit")
    raise ModelError(f"{backend.name} cannot be patched: it has no multi-head attention")


def _shape(model: Transformer | RegistryModel) -> str:
    return model.config.shape if isinstance(model, Transformer) else model.shape


def target_device(model: Transformer | RegistryModel) -> torch.device:
    """Where the model's weights are: its inputs go there."""
    return device_of(model if isinstance(model, Transformer) else model.model)


def _one_token(word: str, pieces: Sequence[str], model: str) -> None:
    if len(pieces) != 1:
        shown = ", ".join(repr(p) for p in pieces)
        raise ModelError(f"{word!r} is {len(pieces)} tokens in {model} ({shown}): the answer and the wrong "
                         "word must be one token each")


def _appended_id(backend: Backend, text: str, word: str) -> int:
    """The one token ``word`` adds after ``text`` in the backend's tokenizer (so GPT-2 reads
    " Mary" and SentencePiece "▁Mary", as they would in running text)."""
    tokenizer = backend.tokenizer  # type: ignore[attr-defined]
    before = tokenizer.encode(text)
    after = tokenizer.encode(f"{text} {word.strip()}")
    if after.ids[: len(before.ids)] == before.ids:
        ids, pieces = after.ids[len(before.ids):], after.tokens[len(before.ids):]
    else:  # the word merged with the text's end: read it on its own
        alone = tokenizer.encode(" " + word.strip(), add_special_tokens=False)
        ids, pieces = alone.ids, alone.tokens
    _one_token(word, pieces, backend.name)
    unk = tokenizer.token_to_id(getattr(tokenizer.model, "unk_token", None) or "<unk>")
    if ids[0] == unk:
        raise ModelError(f"{word!r} is not in {backend.name}'s vocabulary")
    return ids[0]


def _vocab_id(vocab, word: str, model: str, what: str) -> int:
    if word not in vocab or word in vocab.SPECIALS:
        raise ModelError(f"{word!r} is not in {model}'s {what} vocabulary")
    return vocab.stoi[word]


def whole(backend: Backend, text: str, what: str) -> Tokens:
    """Every token of ``text``, or a ModelError naming the model's limit: a patch of a cut text would
    measure inputs that differ nowhere and say only "nothing to restore"."""
    tokens, dropped = backend.tokenize(check_text(text, what))
    if dropped:
        raise ModelError(f"the {what} is {len(tokens) + dropped} tokens and patching in {backend.name} reads at "
                         f"most {backend.max_tokens} tokens: shorten both texts")
    return tokens


def _check_same_length(clean: Sequence[str], corrupt: Sequence[str], what: str) -> None:
    if len(clean) == len(corrupt):
        return
    first = next((i for i, (a, b) in enumerate(zip(clean, corrupt)) if a != b), min(len(clean), len(corrupt)))
    where = (f"they first differ at token {first} ({clean[first]!r} vs {corrupt[first]!r})"
             if first < min(len(clean), len(corrupt)) else f"one ends at token {first}")
    raise ModelError(f"the clean {what} has {len(clean)} tokens and the corrupt {len(corrupt)}; patching needs "
                     f"the same number ({where})")


# -- the two inputs and their metric --------------------------------------------------------------


def decoder_sides(backend: Backend, model: Transformer | RegistryModel, clean: str, corrupt: str, answer: str,
                  wrong: str) -> tuple[Side, Side, str]:
    from .induction import InductionBackend

    if not (model.has_lm_head if isinstance(model, RegistryModel) else model.decoder.generator is not None):
        raise ModelError(f"{backend.name} has no LM head: the logit difference patching measures needs one")
    if isinstance(backend, InductionBackend):
        ids = [_vocab_id(backend.vocab, w.strip().lower(), backend.name, "symbol") for w in (answer, wrong)]
    else:
        ids = [_appended_id(backend, check_text(clean, "clean text"), w) for w in (answer, wrong)]
    if ids[0] == ids[1]:
        raise ModelError(f"the answer and the wrong word are the same token ({answer!r})")

    def measure(hidden: torch.Tensor) -> torch.Tensor:
        # our decoder hands over hidden states; a transformers decoder its own last-position logits
        logits = (model.logits(hidden[:, -1]) if isinstance(model, Transformer) else hidden[:, -1]).float()  # (B, V)
        return logits[:, ids[0]] - logits[:, ids[1]]

    sides = []
    for text, what in ((clean, "clean text"), (corrupt, "corrupt text")):
        tokens = whole(backend, text, what)
        sides.append(Side(tokens, (torch.tensor([tokens.ids]),), measure))
    return sides[0], sides[1], f"logit({answer}) − logit({wrong}) at the last position"


def encoder_sides(backend: Backend, clean: str, corrupt: str, answer: str, wrong: str,
                  token: str | None) -> tuple[Side, Side, str]:
    def position(tokens: Tokens, word: str, what: str) -> int:
        labels = [label.strip().lower() for label in tokens.labels]
        if word.lower() in labels:
            return labels.index(word.lower())
        pieces = backend.tokenizer.encode(word, add_special_tokens=False).tokens  # type: ignore[attr-defined]
        _one_token(word, pieces, backend.name)
        raise ModelError(f"{word!r} is not a token of the {what}")

    def side(text: str, what: str) -> tuple[Side, str]:
        tokens = whole(backend, text, what)
        labels = [label.strip().lower() for label in tokens.labels]
        chosen = token or next((p for p in PRONOUNS if p in labels), None)
        if chosen is None:
            raise ModelError(f"the {what} has no pronoun ({', '.join(PRONOUNS[:4])} ...): name the token whose "
                             "representation is compared (--token)")
        p, a, w = (position(tokens, word, what) for word in (chosen, answer, wrong))

        def measure(hidden: torch.Tensor) -> torch.Tensor:
            h = hidden.float()
            cos = torch.nn.functional.cosine_similarity
            return cos(h[:, p], h[:, a], dim=-1) - cos(h[:, p], h[:, w], dim=-1)

        return Side(tokens, (torch.tensor([tokens.ids]),), measure), chosen

    (clean_side, chosen), (corrupt_side, _) = side(clean, "clean text"), side(corrupt, "corrupt text")
    return clean_side, corrupt_side, f"cos({chosen}, {answer}) − cos({chosen}, {wrong}) on the final layer"


def translation_sides(backend: Backend, clean: str, corrupt: str, answer: str,
                      wrong: str) -> tuple[Side, Side, str]:
    from ..trained.vocab import Vocab
    from ..trained.decoding import greedy

    model, vocab = backend.model, backend.tgt_vocab  # type: ignore[attr-defined]
    ids = [_vocab_id(vocab, w.strip().lower(), backend.name, "French") for w in (answer, wrong)]
    translations = []
    sources = []
    for text, what in ((clean, "clean text"), (corrupt, "corrupt text")):
        tokens = whole(backend, text, what)
        src = torch.tensor([tokens.ids])
        with torch.inference_mode():
            words = vocab.decode(greedy(model, src, None, backend.max_tokens)[0, 1:].tolist())
        sources.append((tokens, src))
        translations.append(words)
    if answer.lower() not in translations[0]:
        raise ModelError(f"{backend.name} translates the clean text as {' '.join(translations[0])!r}: "
                         f"{answer!r} is not in it")
    t = translations[0].index(answer.lower())  # the position whose next word is measured
    if len(translations[1]) < t:
        raise ModelError(f"the corrupt translation {' '.join(translations[1])!r} is shorter than the "
                         f"{t} words before {answer!r}")

    def measure(hidden: torch.Tensor) -> torch.Tensor:
        log_probs = model.logits(hidden[:, -1]).float().log_softmax(-1)  # (B, V)
        return log_probs[:, ids[0]] - log_probs[:, ids[1]]

    sides = []
    for (tokens, src), words in zip(sources, translations):
        prefix = words[:t]
        tgt = torch.tensor([[Vocab.BOS, *vocab.encode(prefix)]])
        sides.append(Side(tokens, (src, tgt), measure, ("<bos>", *prefix)))
    return sides[0], sides[1], f"log p({answer}) − log p({wrong}) after '{' '.join(translations[0][:t])}'"


def seq2seq_sides(backend: Backend, clean: str, corrupt: str, answer: str,
                  wrong: str) -> tuple[Side, Side, str]:
    """A transformers encoder–decoder: the same metric as our translation models', log p(answer) −
    log p(wrong) where the clean greedy translation writes ``answer``, each run teacher-forced on its own
    greedy translation up to there."""
    ids = [_appended_id(backend, "", w) for w in (answer, wrong)]
    if ids[0] == ids[1]:
        raise ModelError(f"the answer and the wrong word are the same token ({answer!r})")
    runs = []
    for text, what in ((clean, "clean text"), (corrupt, "corrupt text")):
        tokens, _ = backend.tokenize(check_text(text, what))
        src = torch.tensor([tokens.ids])
        with torch.inference_mode():
            generated = backend._generate(src.to(backend.model.device))  # type: ignore[attr-defined]
        runs.append((tokens, src, generated))
    clean_ids = runs[0][2]
    if ids[0] not in clean_ids[1:]:
        said = backend.tokenizer.decode(clean_ids, skip_special_tokens=True)  # type: ignore[attr-defined]
        raise ModelError(f"{backend.name} translates the clean text as {said!r}: {answer!r} is not in it")
    t = clean_ids.index(ids[0], 1)  # the decoder reads ids[:t] and writes the answer next
    if len(runs[1][2]) < t:
        raise ModelError(f"the corrupt translation is shorter than the {t - 1} tokens before {answer!r}")

    def measure(logits: torch.Tensor) -> torch.Tensor:
        log_probs = logits[:, -1].float().log_softmax(-1)  # (B, V)
        return log_probs[:, ids[0]] - log_probs[:, ids[1]]

    out = []
    for tokens, src, generated in runs:
        prefix = generated[:t]
        labels = tuple(backend.tokenizer.id_to_token(i) or "" for i in prefix)  # type: ignore[attr-defined]
        out.append(Side(tokens, (src, torch.tensor([prefix])), measure, labels))
    before = backend.tokenizer.decode(clean_ids[:t], skip_special_tokens=True)  # type: ignore[attr-defined]
    return out[0], out[1], f"log p({answer}) − log p({wrong}) after '{before}'"


def sides(backend: Backend, clean: str, corrupt: str, answer: str, wrong: str,
          token: str | None = None) -> tuple[Side, Side, str]:
    """The clean and corrupt inputs with their metric, checked to be patchable against each other."""
    model = patch_target(backend)
    answer, wrong = answer.strip(), wrong.strip()
    if not answer or not wrong:
        raise ModelError("give the answer and the wrong word (one token each)")
    shape = _shape(model)
    if shape == "decoder-only":
        pair = decoder_sides(backend, model, clean, corrupt, answer, wrong)
    elif shape == "encoder-only":
        pair = encoder_sides(backend, clean, corrupt, answer, wrong, token)
    elif isinstance(model, RegistryModel):
        pair = seq2seq_sides(backend, clean, corrupt, answer, wrong)
    else:
        pair = translation_sides(backend, clean, corrupt, answer, wrong)
    what = "text" if shape != "encoder-decoder" else "source"
    _check_same_length(pair[0].tokens.labels, pair[1].tokens.labels, what)
    if pair[0].target is not None:
        _check_same_length(pair[0].target, pair[1].target or (), "target prefix")
    return pair
