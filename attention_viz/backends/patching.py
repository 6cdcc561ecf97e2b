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
receiver run (about half the work for ``heads`` or ``resid``). The two inputs and each model kind's
metric: :mod:`attention_viz.backends.patch_sides`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch

from ..analysis.patching import Patching, check_restorable, check_site
from ..core.hooks import capture, intervene
from ..core.attention import sliding_window_mask
from ..core.model import Transformer, decoder_mask
from ..core.names import CROSS, DECODER_SELF, ENCODER_SELF, GROUPS, Group, hook_name, layer_hook_name, parse_layer_hook_name
from .base import Backend
from .hf_model import RegistryModel
from .ours import attention_module
from .patch_sides import Side, _shape, patch_target, sides, target_device

BUDGET = 2**26  # floats of activations a batch of patched runs may hold at its widest (256 MB)
ROW_NAMES = {ENCODER_SELF: "encoder", DECODER_SELF: "decoder", CROSS: "cross"}


@dataclass(frozen=True)
class Site:
    """Patch ``index`` (into one batch item's tensor at hook ``name``); its result goes to ``cell``."""

    name: str
    index: tuple[int, ...]
    cell: tuple[int, ...]


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
