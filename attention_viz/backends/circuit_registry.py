"""Edges between heads on transformers' decoders whose attention runs through our registered function:
the forward of :mod:`attention_viz.backends.circuit` in which every receiver reads its own copy of the
residual stream, written with transformers' own modules.

Each receiver's input is handed over where the layer reads it:

* a head's q, k or v input: before the layer's input norm. Where nothing after the projections mixes
  heads (rotary, a q/k norm over one head's width: every family but OLMo 2), the projection module's
  output is replaced in the real call: head h's slice of W_Q (W_K, W_V; or of a fused qkv) applied to
  the input norm of head h's copy, so the module's own q/k norms and rotary then run once, on what
  each head reads (and the projection's own product is skipped, its input emptied). Otherwise a
  pre-hook on the attention module runs the module's own forward once on all the copies side by
  side (each known projection on the copies of its own kind only), stopped right after v at our hook
  points; head h's query is taken from the copy of head h, and our ``q``/``k``/``v`` hook points hand
  those to the real call;
* a feed-forward block: its first module (the norm before it, or the block itself in OLMo 2) reads
  the copy, and the stream goes on as the model's own plus what the block wrote from it;
* the unembedding: the final norm reads the copy.

A head writes its context through its columns of W_O; where the family norms the attention's output
before the residual (Gemma 2/3, OLMo 2) the heads' writes go through that norm with its scale frozen
at the run's own value, so they still add up to what the attention wrote. The module hooks last one
call and act only in the caller's context (:mod:`.hf_module_hooks`).
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass
from functools import partial
from itertools import accumulate

import torch
from torch import nn

from ..analysis.circuit import QKV, Graph
from ..core.hooks import HookPoint, intervene
from ..core.names import DECODER_SELF, hook_name, layer_hook_name
from ..errors import ModelError
from .circuit_run import SplitRecord
from .hf_attention import layer_path
from .hf_logit_attribution import check_decoder, frozen_registry_norm
from .hf_model import RegistryModel
from .hf_module_hooks import module_hooks


@dataclass(frozen=True)
class LayerParts:
    """The modules of one decoder layer where the split forward reads and writes."""

    attention: nn.Module
    input_norm: nn.Module | None  # before the attention (None: OLMo 2 reads the stream itself)
    output_norm: nn.Module | None  # on the attention's output before the residual (sandwich layouts)
    projection: nn.Module  # W_O
    mlp_in: nn.Module  # reads the stream entering the feed-forward block
    mlp_out: nn.Module  # writes what the block adds to the stream
    heads: int
    kv_heads: int
    qkv: tuple[tuple[nn.Linear, int, int], ...] | None  # per kind of QKV: its projection, where its heads lie
    per_head: bool  # nothing between the projections and the attention function mixes heads


def head_projections(attention: nn.Module, heads: int, kv_heads: int) -> tuple[tuple[nn.Linear, int, int], ...] | None:
    """Per kind of QKV the ``nn.Linear`` whose output holds that kind for every head (q_proj, k_proj,
    v_proj, or Phi-3's fused qkv_proj) and the columns it fills there; None where they are not found."""
    children = dict(attention.named_children())
    separate = [children.get(f"{kind}_proj") for kind in QKV]
    fused = children.get("qkv_proj")
    if all(isinstance(m, nn.Linear) for m in separate):
        d = separate[0].out_features // heads
        found = tuple((m, 0, m.out_features) for m in separate)
    elif isinstance(fused, nn.Linear):
        d = fused.out_features // (heads + 2 * kv_heads)
        ends = [0, heads * d, (heads + kv_heads) * d, fused.out_features]
        found = tuple((fused, ends[i], ends[i + 1]) for i in range(3))
    else:
        return None
    return found if [stop - start for _, start, stop in found] == [heads * d, kv_heads * d, kv_heads * d] else None


def heads_mix(attention: nn.Module, qkv: tuple[tuple[nn.Linear, int, int], ...], output: nn.Module,
              heads: int) -> bool:
    """Whether a module of the attention other than the projections and W_O (``output``) has parameters
    wider than one head (OLMo 2's q/k norms over all heads): then a head's q or k depends on the
    other heads' projections of the same copy."""
    d = (qkv[0][2] - qkv[0][1]) // heads  # one head's width
    used = {id(m) for m, _, _ in qkv} | {id(output)}
    return any(p.size(-1) != d for child in attention.children() if id(child) not in used for p in child.parameters())


def layer_parts(name: str, registry: RegistryModel) -> list[LayerParts]:
    """Each decoder layer's parts; a ModelError in one sentence for a model whose stream is not a sum
    of what its heads and blocks write one after the other."""
    check_decoder(name, registry, "a circuit")
    config = registry.model.config
    out = []
    for site in sorted((s for s in registry.sites if s.group == DECODER_SELF), key=lambda s: s.layer):
        layer = registry.model.get_submodule(layer_path(site.path))
        names = {child for child, _ in layer.named_children()}
        output_norm = registry.attention_output_norm(site)
        mlp_norm = "pre_feedforward_layernorm" if output_norm is not None else "post_attention_layernorm"
        if getattr(config, "use_parallel_residual", False) or not names & {"pre_feedforward_layernorm",
                                                                              "post_attention_layernorm"}:
            raise ModelError(f"{name} is a parallel-residual decoder: circuits are traced on decoders whose "
                             "feed-forward block reads the stream after its layer's attention")
        projection = registry.projection(DECODER_SELF, site.layer)
        if projection is None or "mlp" not in names:
            raise ModelError(f"{name}: cannot find the output projection and the feed-forward block of {site.path}")
        mlp_in = getattr(layer, mlp_norm, None) or layer.mlp
        heads = registry.heads(DECODER_SELF, site.layer)
        kv_heads = int(getattr(config, "num_key_value_heads", None) or heads)
        attention = registry.module(site)
        qkv = head_projections(attention, heads, kv_heads)
        per_head = qkv is not None and not heads_mix(attention, qkv, projection, heads)
        out.append(LayerParts(attention, getattr(layer, "input_layernorm", None), output_norm,
                              projection, mlp_in, getattr(layer, "post_feedforward_layernorm", None) or layer.mlp,
                              heads, kv_heads, qkv, per_head))
    if len({(p.heads, p.kv_heads) for p in out}) != 1:
        raise ModelError(f"{name}'s layers have different numbers of heads: the circuit graph needs one")
    return out


@dataclass(frozen=True)
class RegistryCircuit:
    """A transformers decoder as the circuit runs see it: the model and each layer's parts."""

    registry: RegistryModel
    parts: list[LayerParts]

    @classmethod
    def of(cls, name: str, registry: RegistryModel) -> RegistryCircuit:
        return cls(registry, layer_parts(name, registry))

    @property
    def graph(self) -> Graph:
        return Graph(layers=len(self.parts), heads=self.parts[0].heads, kv_heads=self.parts[0].kv_heads, mlp=True)

    def split(self, wiring, embed=None) -> RegistrySplitRun:
        return RegistrySplitRun(self.registry, self.parts, wiring, embed)


class _Stop(Exception):
    """Ends the side call on the copies once q, k and v are known."""


def projections(part: LayerParts, layer: int, copies: torch.Tensor, rows: dict[str, slice], args: tuple,
                kwargs: dict) -> dict[str, torch.Tensor]:
    """q, k and v (each (C, heads, T, d_head), as they reach the attention function: after q/k norms
    and rotary) of C copies of the stream (C, T, d_model), by the attention module's own forward. Where
    the projections are known, each projects only the ``rows`` (copies) of its own kind (the others
    are left 0: what they would give is not read)."""
    normed = part.input_norm(copies) if part.input_norm is not None else copies
    seen: dict[str, torch.Tensor] = {}
    inputs: dict[nn.Module, torch.Tensor] = {}

    def empty(linear: nn.Module, args: tuple) -> tuple:
        inputs[linear] = args[0]
        return (args[0].narrow(-2, 0, 0), *args[1:])

    def own_rows(linear: nn.Linear, args: tuple, output: torch.Tensor) -> torch.Tensor:
        x = inputs.pop(linear)
        out = x.new_zeros(*x.shape[:-1], linear.out_features)
        for kind, (module, start, stop) in zip(QKV, part.qkv):
            if module is linear:
                bias = None if linear.bias is None else linear.bias[start:stop]
                out[rows[kind], ..., start:stop] = nn.functional.linear(x[rows[kind]], linear.weight[start:stop], bias)
        return out

    def keep(x: torch.Tensor, hook: HookPoint) -> None:
        seen[hook.kind] = x
        if hook.kind == "v":
            raise _Stop

    def run() -> None:
        linears = list(dict.fromkeys(m for m, _, _ in part.qkv or ()))
        with intervene([(hook_name(DECODER_SELF, layer, kind), keep) for kind in QKV]), \
                module_hooks(pre=[(m, empty) for m in linears], post=[(m, own_rows) for m in linears]):
            if args:  # the module's own forward, past the hooks on it
                part.attention.forward(normed, *args[1:], **kwargs)
            else:
                part.attention.forward(**{**kwargs, "hidden_states": normed})

    try:
        contextvars.Context().run(run)  # a fresh context: none of the caller's interventions apply here
    except _Stop:
        pass
    return seen


class RegistrySplitRun(SplitRecord):
    """:class:`attention_viz.backends.circuit.SplitRun` on a transformers decoder: receivers read what
    ``wiring`` gives them, every node's output is kept (``embed``, each head's write, each block's)."""

    def __init__(self, registry: RegistryModel, parts: list[LayerParts], wiring, embed=None) -> None:
        super().__init__(wiring, embed)
        self.registry, self.parts = registry, parts
        self.reads: dict[int, dict[str, torch.Tensor | None]] = {}  # layer → kind → (B, T, n, d_model) copies
        self.qkv: dict[int, dict[str, torch.Tensor]] = {}  # layer → kind → (B, n, T, d_head) from the side call

    def heads_of(self, layer: int, kind: str) -> int:
        return self.parts[layer].heads if kind == "q" else self.parts[layer].kv_heads

    def _attention_in(self, layer: int, module: nn.Module, args: tuple, kwargs: dict) -> None:
        """What each head's q, k and v read, before the real call reads them: kept for the projections'
        hooks, or (heads mixed after the projections) projected here by the side call."""
        reads = {kind: self.wiring.attention(self, layer, kind, self.entering[layer]) for kind in QKV}
        if all(copies is None for copies in reads.values()):
            return None
        if self.parts[layer].per_head:
            self.reads[layer] = reads
            return None
        x = self.entering[layer]
        copies = [(reads[kind] if reads[kind] is not None
                   else x.unsqueeze(2).expand(-1, -1, self.heads_of(layer, kind), -1)) for kind in QKV]
        batch = torch.cat([c.movedim(2, 0) for c in copies]).flatten(0, 1)  # (Σn·B, T, d_model)
        ends = list(accumulate((c.size(2) * x.size(0) for c in copies), initial=0))
        rows = {kind: slice(ends[i], ends[i + 1]) for i, kind in enumerate(QKV)}
        seen = projections(self.parts[layer], layer, batch, rows, args, kwargs)
        out = {}
        for kind, c in zip(QKV, copies):
            per_copy = seen[kind][rows[kind]].unflatten(0, (c.size(2), x.size(0)))
            out[kind] = per_copy.diagonal(dim1=0, dim2=2).movedim(-1, 1)  # copy h's head h: (B, n, T, d)
        self.qkv[layer] = out
        return None

    def _project(self, layer: int, kind: str, original: torch.Tensor, hook: HookPoint) -> torch.Tensor | None:
        return self.qkv.get(layer, {}).get(kind)

    def _kinds_of(self, layer: int, linear: nn.Module) -> list[str]:
        return [kind for kind, (m, _, _) in zip(QKV, self.parts[layer].qkv) if m is linear]

    def _skip_projection(self, layer: int, linear: nn.Module, args: tuple) -> tuple | None:
        """Empty the projection's input when every kind it writes is replaced: its product is not needed."""
        reads = self.reads.get(layer)
        if reads is None or any(reads[kind] is None for kind in self._kinds_of(layer, linear)):
            return None
        return (args[0].narrow(-2, 0, 0), *args[1:])

    def _head_projection(self, layer: int, linear: nn.Linear, args: tuple, output: torch.Tensor) -> torch.Tensor | None:
        """The projection's output with head h's slice from head h's copy: the input norm of the copy
        through that head's rows of the weight (kinds side by side, as the module writes them)."""
        reads = self.reads.get(layer)
        if reads is None:
            return None
        part, out = self.parts[layer], []
        for kind in self._kinds_of(layer, linear):
            _, start, stop = part.qkv[QKV.index(kind)]
            copies = reads[kind]  # (B, T, n, d_model), or None: this kind reads the stream itself
            if copies is None:
                out.append(output[..., start:stop])
                continue
            normed = part.input_norm(copies) if part.input_norm is not None else copies
            weight = linear.weight[start:stop].view(copies.size(2), -1, linear.in_features)  # (n, d_head, d_model)
            y = torch.einsum("btnm,nkm->btnk", normed, weight)
            if linear.bias is not None:
                y = y + linear.bias[start:stop].view(weight.shape[:2])
            out.append(y.flatten(2))
        return torch.cat(out, -1) if len(out) > 1 else out[0]

    def _heads(self, layer: int, context: torch.Tensor, hook: HookPoint) -> None:
        part = self.parts[layer]
        w_o = part.projection.weight  # (d_model, h·d_head)
        per_head = torch.einsum("bhtk,dhk->hbtd", context, w_o.view(w_o.size(0), part.heads, -1))
        if part.output_norm is not None:  # sandwich: the attention's output normed with its scale frozen
            bias = getattr(part.projection, "bias", None)
            apply, _ = frozen_registry_norm(part.output_norm, per_head.sum(0) + (0 if bias is None else bias))
            per_head = apply(per_head)
        self.written += list(per_head)

    def _mlp_in(self, layer: int, module: nn.Module, args: tuple) -> tuple:
        self.mids[layer] = args[0]
        self.mlp_inputs[layer] = self.wiring.mlp(self, layer, args[0])
        return (self.mlp_inputs[layer], *args[1:])

    def _mlp_out(self, layer: int, module: nn.Module, args: tuple, output) -> None:
        self.written.append(output[0] if isinstance(output, tuple) else output)

    def _final(self, module: nn.Module, args: tuple) -> tuple:
        self.final = args[0]
        return (self.wiring.logits(self, args[0]), *args[1:])

    def hooks(self) -> list[tuple[str, object]]:
        out = []
        for layer in range(len(self.parts)):
            out.append((layer_hook_name("decoder", layer, "resid_pre"), partial(self._enter, layer)))
            out += [(hook_name(DECODER_SELF, layer, kind), partial(self._project, layer, kind)) for kind in QKV]
            out.append((hook_name(DECODER_SELF, layer, "context"), partial(self._heads, layer)))
        return out

    def forward(self, side, batch: int = 1) -> torch.Tensor:
        """The metric of each batch item (B,)."""
        parts = self.parts
        linears = [(i, m) for i, p in enumerate(parts) if p.per_head for m in dict.fromkeys(m for m, _, _ in p.qkv)]
        with module_hooks(pre=[*((p.mlp_in, partial(self._mlp_in, i)) for i, p in enumerate(parts)),
                               (self.registry.final_norm(), self._final),
                               *((m, partial(self._skip_projection, i)) for i, m in linears)],
                          post=[*((p.mlp_out, partial(self._mlp_out, i)) for i, p in enumerate(parts)),
                                *((m, partial(self._head_projection, i)) for i, m in linears)],
                          pre_with_kwargs=[(p.attention, partial(self._attention_in, i)) for i, p in enumerate(parts)]):
            with intervene(self.hooks()):
                args = [a.expand(batch, *a.shape[1:]) for a in side.args]
                return side.measure(self.registry(*args))
