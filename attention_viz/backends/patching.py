"""Activation patching on our own Transformer, and on transformers' models whose attention runs through
our registered function (:mod:`attention_viz.backends.hf_model`): the runs behind
:mod:`attention_viz.analysis.patching`.

Three forwards' worth of work, whatever the number of sites: the *source* run (clean, or corrupt
when noising) with its values cached at the hook points the site needs; the *receiver* run (the
other input) for its metric; then the receiver again, batched, one site per batch item — item b's
intervention function overwrites only row b, at its one hook point, with the cached source value
(``hooks.intervene``; the attention recomputes what follows from a replaced pattern). Batches are
sized to a memory budget, so ``head_positions`` (layers × heads × positions sites) runs in a few
large forwards. A patched run of a decoder-only or encoder-only model starts at the site's layer,
from the receiver's cached residual stream there: the layers below it would only recompute the
receiver run (about half the work for ``heads`` or ``resid``).

Metrics, one scalar per run (what the issue and the patching papers use):

* decoder-only: logit(answer) − logit(wrong) at the last position (Wang et al. 2022's logit difference);
* encoder–decoder: log p(answer) − log p(wrong) at one target position, each run teacher-forced on
  its own greedy translation up to the position where the clean one writes ``answer``;
* encoder-only (no output vocabulary): cos(h_p, h_answer) − cos(h_p, h_wrong) on the final layer's
  states, p the pronoun (or ``token``): which candidate the pronoun's representation sits closer to.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch

from ..analysis.patching import Patching, check_restorable, check_site
from ..errors import ModelError
from ..core.hooks import capture, intervene
from ..core.attention import sliding_window_mask
from ..core.model import Transformer, decoder_mask
from ..core.names import CROSS, DECODER_SELF, ENCODER_SELF, GROUPS, Group, hook_name, layer_hook_name, parse_layer_hook_name
from ..inputs.tokens import Tokens
from .base import Backend, check_text
from .hf_model import RegistryModel
from .ours import attention_module, device_of

BUDGET = 2**26  # floats of activations a batch of patched runs may hold at its widest (256 MB)
PRONOUNS = ("it", "he", "she", "they", "him", "her", "them", "its", "his", "their")
ROW_NAMES = {ENCODER_SELF: "encoder", DECODER_SELF: "decoder", CROSS: "cross"}


@dataclass(frozen=True)
class Side:
    """One input, ready to run: ``model(*args)`` with batch 1, and the metric of its outputs."""

    tokens: Tokens  # what the text became (the source of an encoder–decoder)
    args: tuple[torch.Tensor, ...]
    measure: Callable[[torch.Tensor], torch.Tensor]  # model output (B, T, d_model) → (B,)
    target: tuple[str, ...] | None = None  # encoder–decoder: the decoder inputs, <bos> first


@dataclass(frozen=True)
class Site:
    """Patch ``index`` (into one batch item's tensor at hook ``name``); its result goes to ``cell``."""

    name: str
    index: tuple[int, ...]
    cell: tuple[int, ...]


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


# -- sites ----------------------------------------------------------------------------------------


def attentions(model: Transformer | RegistryModel) -> list[tuple[Group, int]]:
    """Every attention of the model, in the order rows are listed (encoder, decoder, cross)."""
    if isinstance(model, RegistryModel):
        return [(group, layer) for group in model.groups() for layer in range(model.layers(group))]
    out = []
    for group in GROUPS:
        layer = 0
        while attention_module(model, group, layer) is not None:
            out.append((group, layer))
            layer += 1
    return out


def _row_name(model: Transformer | RegistryModel, part_or_group: str | Group, layer: int) -> str:
    if _shape(model) != "encoder-decoder":
        return f"layer {layer}"
    name = part_or_group if isinstance(part_or_group, str) else ROW_NAMES[part_or_group]
    return f"{name} {layer}"


def hooks_for(model: Transformer | RegistryModel, site: str) -> tuple[list[str], list[str], list[int]]:
    """The hook name of each row, the rows' labels and each row's head count (0 for ``resid``)."""
    if site == "resid":
        if isinstance(model, RegistryModel):
            rows = [(g[0], i) for g in model.groups() if g != CROSS for i in range(model.layers(g))]
        else:
            parts = [p for p in ("encoder", "decoder") if getattr(model, p) is not None]
            rows = [(part, i) for part in parts for i in range(len(getattr(model, part).layers))]
        return ([layer_hook_name(part, i) for part, i in rows], [_row_name(model, part, i) for part, i in rows],
                [0] * len(rows))
    kind = "pattern" if site == "patterns" else "context"
    rows = attentions(model)
    return ([hook_name(group, i, kind) for group, i in rows], [_row_name(model, group, i) for group, i in rows],
            [_heads(model, group, i) for group, i in rows])


def _heads(model: Transformer | RegistryModel, group: Group, layer: int) -> int:
    if isinstance(model, RegistryModel):
        return model.heads(group, layer)
    return attention_module(model, group, layer).h


def enumerate_sites(site: str, names: Sequence[str], heads: Sequence[int],
                    positions: Sequence[int]) -> tuple[list[Site], tuple[int, ...]]:
    """Every site of ``site`` and the grid its results fill (rows padded to the longest)."""
    width, longest = max(heads), max(positions)
    sites = []
    for row, (name, h, n) in enumerate(zip(names, heads, positions)):
        if site in ("heads", "patterns"):
            sites += [Site(name, (head,), (row, head)) for head in range(h)]
        elif site == "resid":
            sites += [Site(name, (p,), (row, p)) for p in range(n)]
        else:
            sites += [Site(name, (head, p), (row, head, p)) for head in range(h) for p in range(n)]
    grid = {"heads": (len(names), width), "patterns": (len(names), width), "resid": (len(names), longest),
            "head_positions": (len(names), width, longest)}[site]
    return sites, grid


# -- the runs -------------------------------------------------------------------------------------


def replacement(source: torch.Tensor, rows: list[tuple[int, tuple[int, ...]]]):
    """An intervention function: batch item b's ``index`` takes the source run's value there."""
    def fn(x: torch.Tensor, hook) -> torch.Tensor:
        x = x.clone()
        for b, index in rows:
            x[(b, *index)] = source[(0, *index)]
        return x
    return fn


def _layer_of(name: str) -> int:
    return parse_layer_hook_name(name)[1]


def batch_size(model: Transformer | RegistryModel, side: Side, n: int) -> int:
    """How many patched runs go in one forward: the widest activation of a run times the batch
    stays within BUDGET floats."""
    length = max(a.size(1) for a in side.args)
    if isinstance(model, RegistryModel):
        widest = model.widest(length)
    else:
        c = model.config
        widest = max(c.h * length * length * 3, length * max(c.d_ff, c.d_model) * 4)
    return max(1, min(n, BUDGET // widest))


def run_from(model: Transformer, layer: int, x: torch.Tensor) -> torch.Tensor:
    """The final hidden states of a one-stack model whose residual stream entering ``layer`` is ``x``
    (B, T, d_model): the rest of ``Encoder.forward`` / ``Decoder.forward`` (inputs without padding)."""
    stack = model.encoder if model.config.shape == "encoder-only" else model.decoder
    if model.config.shape == "encoder-only":
        masks = [None] * len(stack.layers)
    else:
        causal = decoder_mask(x.size(1), None, x.device)
        masks = [causal if w is None else causal & sliding_window_mask(x.size(1), w, x.device) for w in stack.windows]
    for block, mask in zip(stack.layers[layer:], masks[layer:]):
        x = block(x, mask)
    return stack.norm(x) if stack.norm is not None else x


class Experiment:
    """A clean/corrupt pair on one model, the source run cached: patch sites one by one (batched)
    or together."""

    def __init__(self, backend: Backend, clean: str, corrupt: str, answer: str, wrong: str,
                 site: str, noising: bool = False, token: str | None = None) -> None:
        self.site = check_site(site)
        self.backend, self.noising = backend, noising
        self.model = patch_target(backend)
        found = sides(backend, clean, corrupt, answer, wrong, token)
        device = target_device(self.model)  # the inputs go where the model is (the sides build them on the CPU)
        self.clean_side, self.corrupt_side = (replace(s, args=tuple(a.to(device) for a in s.args)) for s in found[:2])
        self.metric = found[2]
        self.source, self.receiver = ((self.corrupt_side, self.clean_side) if noising
                                      else (self.clean_side, self.corrupt_side))
        self.names, self.rows, heads = hooks_for(self.model, site)
        kind = {"resid": "resid_pre", "patterns": "pattern"}.get(site, "context")
        # one stack: patched runs start at their layer, from the receiver's residual stream there
        self.resumable = isinstance(self.model, Transformer) and self.model.config.shape != "encoder-decoder"
        with torch.inference_mode():
            with capture(kinds=(kind,), names=self.names) as cache:
                source_metric = self._measure(self.source)
            with capture(kinds=("resid_pre",) if self.resumable else ()) as states:
                receiver_metric = self._measure(self.receiver)
        self.cache = {name: cache[name] for name in self.names}
        self.entering = [states[name] for name in sorted(states.names_recorded(), key=_layer_of)]
        self.clean, self.corrupt = ((receiver_metric, source_metric) if noising else (source_metric, receiver_metric))
        positions = [self.cache[n].size(1 if site == "resid" else 2) for n in self.names]
        self.sites, self.grid = enumerate_sites(site, self.names, heads, positions)

    def _measure(self, side: Side, hooks=()) -> float:
        with intervene(list(hooks)):
            return float(side.measure(self.model(*side.args))[0])

    def each(self) -> np.ndarray:
        """The metric with each site patched alone, in the grid (NaN where a row is shorter)."""
        check_restorable(self.clean, self.corrupt)  # before any patched run
        out = np.full(self.grid, np.nan)
        # a batch holds sites of one row (one layer), so a resumable run starts at that layer
        rows: dict[int, list[Site]] = {}
        for site in self.sites:
            rows.setdefault(site.cell[0], []).append(site)
        for row, sites in rows.items():
            chunk = batch_size(self.model, self.receiver, len(sites))
            for start in range(0, len(sites), chunk):
                part = sites[start : start + chunk]
                for site, value in zip(part, self._patched(part, row).tolist()):
                    out[site.cell] = value
        return out

    def _patched(self, part: Sequence[Site], row: int) -> torch.Tensor:
        """The metric of one forward per site of ``part`` (batch item b patches ``part[b]``), all in row ``row``."""
        by_name: dict[str, list[tuple[int, tuple[int, ...]]]] = {}
        for b, site in enumerate(part):
            by_name.setdefault(site.name, []).append((b, site.index))
        hooks = [(name, replacement(self.cache[name], rows)) for name, rows in by_name.items()]
        with torch.inference_mode(), intervene(hooks):
            if self.resumable:  # rows are layers here
                hidden = run_from(self.model, row, self.entering[row].expand(len(part), -1, -1))
            else:
                hidden = self.model(*[a.expand(len(part), *a.shape[1:]) for a in self.receiver.args])
            return self.receiver.measure(hidden)

    def together(self, sites: Sequence[Site]) -> float:
        """The metric with all ``sites`` patched in one run."""
        by_name: dict[str, list[tuple[int, tuple[int, ...]]]] = {}
        for site in sites:
            by_name.setdefault(site.name, []).append((0, site.index))
        with torch.inference_mode():
            return self._measure(self.receiver, [(n, replacement(self.cache[n], rows)) for n, rows in by_name.items()])

    def result(self) -> Patching:
        clean_target = self.clean_side.target
        return Patching(
            model=self.backend.name, site=self.site, metric=self.metric,
            tokens=self.clean_side.tokens.labels, corrupt_tokens=self.corrupt_side.tokens.labels,
            clean=self.clean, corrupt=self.corrupt, patched=self.each(), rows=tuple(self.rows),
            noising=self.noising, target_tokens=clean_target,
            corrupt_target_tokens=self.corrupt_side.target,
        )


def patch(backend: Backend, clean: str, corrupt: str, answer: str, wrong: str, site: str = "heads",
          noising: bool = False, token: str | None = None) -> Patching:
    """Patch every site of kind ``site`` from the clean run into the corrupt one (or, ``noising``,
    from the corrupt run into the clean one) and measure what each restores."""
    return Experiment(backend, clean, corrupt, answer, wrong, site, noising, token).result()
