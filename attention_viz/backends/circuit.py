"""Edges between heads on our own decoder: edge attribution patching and the circuit's own run
(plain data and the graph: :mod:`attention_viz.analysis.circuit`). transformers' decoders with our
attention function run the same scores and circuits through :mod:`.circuit_registry`, which gives
their forward the same receivers and nodes.

Both need a forward in which every *receiver* (a head's q, k or v input, a feed-forward block, the
unembedding) reads its own copy of the residual stream. That is one per-call intervention
(``hooks.intervene``), not a second model: at each layer's ``resid_pre`` the stream is kept; at the
``q``/``k``/``v`` hook points the projections are recomputed, one head at a time, from the copy each
head reads (the model's own norm, W_Q/W_K/W_V slices and rotary); at ``resid_mid`` the feed-forward
block is handed its copy, and at ``resid_post`` the stream goes on as the model's own plus what the
block wrote; the last ``resid_post`` hands the final norm the unembedding's copy. ``context`` gives
each head's output, its context through its slice of W_O. What the copies are is a *wiring*:

* :class:`Copies` — the stream plus a zero tensor per receiver that autograd differentiates: one
  backward gives ∂metric/∂(each receiver's input), every q, k and v separately;
* :class:`Patched` — the corrupt run's stream plus, for each edge of the circuit, the difference
  between what its node writes in this run and in the corrupt one (path patching: the circuit's
  edges carry this run, every other edge the corrupt run).

The metric is activation patching's (``backends.patching.sides``): logit(answer) − logit(wrong) at the
last position.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial

import numpy as np
import torch

from ..analysis.circuit import IG_STEPS, METHODS, QKV, Circuit, Graph, check_steps, top_edges
from ..analysis.patching import check_restorable, restored_fraction
from ..core.hooks import HookPoint, intervene
from ..core.model import Transformer
from ..core.names import DECODER_SELF, hook_name, layer_hook_name
from ..errors import ModelError
from .base import Backend
from .circuit_run import SplitRecord
from .circuit_registry import RegistryCircuit, RegistrySplitRun
from .hf_model import RegistryModel
from .patch_sides import Side, patch_target, patchable_model, sides, target_device


def circuit_model(backend: Backend) -> Transformer | RegistryCircuit:
    """The backend's decoder (ours, or a transformers decoder with our hook points), if its residual
    stream is a sum of what its components write."""
    target = patch_target(backend)
    if isinstance(target, RegistryModel):
        return RegistryCircuit.of(backend.name, target)
    model = patchable_model(backend)
    c = model.config
    if c.shape != "decoder-only" or c.norm != "pre" or c.parallel_residual:
        kind = ("an encoder" if c.shape == "encoder-only" else "an encoder–decoder" if c.shape != "decoder-only"
                else "a post-LN decoder" if c.norm != "pre" else "a parallel-residual decoder")
        raise ModelError(f"{backend.name} is {kind}: circuits are traced on pre-LN decoders (GPT-2, Llama, "
                         "induction), whose residual stream is the sum of what each head and block writes")
    return model


def graph_of(model: Transformer | RegistryCircuit) -> Graph:
    if isinstance(model, RegistryCircuit):
        return model.graph
    c = model.config
    return Graph(layers=c.decoder_layers, heads=c.h, kv_heads=c.kv_heads, mlp=c.feed_forward)


def split_run(model: Transformer | RegistryCircuit, wiring: Wiring, embed=None) -> SplitRun | RegistrySplitRun:
    """One forward of ``model`` with its receivers wired by ``wiring``."""
    return model.split(wiring, embed) if isinstance(model, RegistryCircuit) else SplitRun(model, wiring, embed)


# -- the wirings ----------------------------------------------------------------------------------


class Wiring:
    """What each receiver reads in one forward; this base reads the stream as the model does."""

    def attention(self, run: SplitRun, layer: int, kind: str, x: torch.Tensor) -> torch.Tensor | None:
        """(B, T, n, d_model): the copy each of the n heads of ``kind`` reads; None: the stream itself."""
        return None

    def mlp(self, run: SplitRun, layer: int, x: torch.Tensor) -> torch.Tensor:
        return x

    def logits(self, run: SplitRun, x: torch.Tensor) -> torch.Tensor:
        return x


class Copies(Wiring):
    """Each receiver reads the stream plus its own zero tensor, whose gradient is ∂metric/∂(its input)."""

    def __init__(self) -> None:
        self.zeros: dict[tuple[str, int], torch.Tensor] = {}  # (q|k|v|mlp|logits, layer) → leaf

    def _plus_zero(self, key: tuple[str, int], x: torch.Tensor) -> torch.Tensor:
        self.zeros[key] = torch.zeros_like(x, requires_grad=True)
        return x + self.zeros[key]

    def attention(self, run: SplitRun, layer: int, kind: str, x: torch.Tensor) -> torch.Tensor:
        n = run.heads_of(layer, kind)
        return self._plus_zero((kind, layer), x.unsqueeze(2).expand(-1, -1, n, -1))

    def mlp(self, run: SplitRun, layer: int, x: torch.Tensor) -> torch.Tensor:
        return self._plus_zero(("mlp", layer), x)

    def logits(self, run: SplitRun, x: torch.Tensor) -> torch.Tensor:
        return self._plus_zero(("logits", 0), x)

    def leaves(self, graph: Graph) -> list[torch.Tensor]:
        """The zero tensors in the order of ``graph.receivers``' blocks (per layer: q, k, v, mlp; logits)."""
        out = []
        for layer in range(graph.layers):
            out += [self.zeros[(kind, layer)] for kind in QKV] + ([self.zeros[("mlp", layer)]] if graph.mlp else [])
        return out + [self.zeros[("logits", 0)]]


class Patched(Wiring):
    """Path patching: receiver r of batch item b reads the corrupt stream plus Σ over the nodes u with
    ``chosen[b, u, r]`` of (u's output in this run − in the corrupt run)."""

    def __init__(self, corrupt: Recording, graph: Graph, chosen: np.ndarray) -> None:
        self.corrupt, self.graph = corrupt, graph
        self.chosen = torch.as_tensor(chosen, dtype=corrupt.outputs.dtype, device=corrupt.outputs.device)
        self.columns = {r: i for i, r in enumerate(graph.receivers)}

    def _read(self, run: SplitRun, base: torch.Tensor, receivers: list[str]) -> torch.Tensor:
        """(B, T, len(receivers), d_model)."""
        columns = [self.columns[r] for r in receivers]
        written = self.graph.writers_before(receivers[0])  # one block's receivers share their writers
        weights = self.chosen[:, :written][:, :, columns]  # (B, U, R)
        nodes = weights.sum((0, 2)).nonzero()[:, 0].tolist()  # the nodes some chosen edge reads
        if not nodes:
            return base.unsqueeze(2).expand(weights.size(0), -1, len(columns), -1)
        differences = torch.stack([run.written[u] - self.corrupt.outputs[u] for u in nodes])  # (U', B, T, d)
        return base.unsqueeze(2) + torch.einsum("bur,ubtd->btrd", weights[:, nodes], differences)

    def attention(self, run: SplitRun, layer: int, kind: str, x: torch.Tensor) -> torch.Tensor:
        receivers = [r for r in self.graph.attention_receivers(layer) if r.endswith(f".{kind}")]
        return self._read(run, self.corrupt.entering[layer], receivers)

    def mlp(self, run: SplitRun, layer: int, x: torch.Tensor) -> torch.Tensor:
        return self._read(run, self.corrupt.mids[layer], [f"mlp {layer}"])[:, :, 0]

    def logits(self, run: SplitRun, x: torch.Tensor) -> torch.Tensor:
        return self._read(run, self.corrupt.final, ["logits"])[:, :, 0]


# -- one forward with every receiver on its own copy ----------------------------------------------


class SplitRun(SplitRecord):
    """The interventions of one forward: receivers read what ``wiring`` gives them, every node's
    output is kept (``embed``, each head's context through its W_O slice, each block's output)."""

    def __init__(self, model: Transformer, wiring: Wiring, embed=None) -> None:
        super().__init__(wiring, embed)
        self.model = model
        self.layers = model.decoder.layers

    def heads_of(self, layer: int, kind: str) -> int:
        attn = self.layers[layer].self_attn
        return attn.h if kind == "q" else attn.h_kv

    def hooks(self) -> list[tuple[str, object]]:
        last = len(self.layers) - 1
        out = []
        for layer, block in enumerate(self.layers):
            out.append((layer_hook_name("decoder", layer, "resid_pre"), partial(self._enter, layer)))
            out += [(hook_name(DECODER_SELF, layer, kind), partial(self._project, layer, kind)) for kind in QKV]
            out.append((hook_name(DECODER_SELF, layer, "context"), partial(self._heads, layer)))
            if block.feed_forward is not None:
                out.append((layer_hook_name("decoder", layer, "resid_mid"), partial(self._mlp_in, layer)))
            if block.feed_forward is not None or layer == last:
                out.append((layer_hook_name("decoder", layer, "resid_post"), partial(self._leave, layer)))
        return out

    def _project(self, layer: int, kind: str, original: torch.Tensor, hook: HookPoint) -> torch.Tensor | None:
        copies = self.wiring.attention(self, layer, kind, self.entering[layer])
        if copies is None:
            return None
        block = self.layers[layer]
        attn, n = block.self_attn, copies.size(2)
        linear = getattr(attn, f"w_{kind}")
        y = torch.einsum("btnd,nkd->bntk", block.sublayers[0].norm(copies), linear.weight.view(n, attn.d_k, -1))
        if linear.bias is not None:
            y = y + linear.bias.view(n, 1, attn.d_k)  # (B, n, T, d_k)
        if kind != "v" and attn.rotary is not None:
            y = attn.rotary(y, y)[0]
        return y

    def _heads(self, layer: int, context: torch.Tensor, hook: HookPoint) -> None:
        attn = self.layers[layer].self_attn
        w_o = attn.w_o.weight.view(-1, attn.h, attn.d_k)  # (d_model, h, d_k)
        per_head = torch.einsum("bhtk,dhk->hbtd", context, w_o)  # (h, B, T, d_model)
        self.written += list(per_head)

    def _mlp_in(self, layer: int, x: torch.Tensor, hook: HookPoint) -> torch.Tensor:
        self.mids[layer] = x
        self.mlp_inputs[layer] = self.wiring.mlp(self, layer, x)
        return self.mlp_inputs[layer]

    def _leave(self, layer: int, x: torch.Tensor, hook: HookPoint) -> torch.Tensor:
        if self.layers[layer].feed_forward is not None:
            written = x - self.mlp_inputs[layer]  # what the block wrote, from the copy it read
            self.written.append(written)
            x = self.mids[layer] + written  # the stream goes on as the model's own
        if layer < len(self.layers) - 1:
            return x
        self.final = x
        return self.wiring.logits(self, x)

    def forward(self, side: Side, batch: int = 1) -> torch.Tensor:
        """The metric of each batch item (B,)."""
        with intervene(self.hooks()):
            args = [a.expand(batch, *a.shape[1:]) for a in side.args]
            return side.measure(self.model(*args))


@dataclass(frozen=True)
class Recording:
    """What a run wrote and read: node outputs (U, B, T, d_model), the stream entering each layer,
    entering each feed-forward block and leaving the last layer, and the metric."""

    outputs: torch.Tensor
    entering: dict[int, torch.Tensor]
    mids: dict[int, torch.Tensor]
    final: torch.Tensor
    metric: float


def recorded(run: SplitRun, metric: torch.Tensor) -> Recording:
    detach = lambda kept: {k: v.detach() for k, v in kept.items()}  # noqa: E731
    return Recording(run.outputs_so_far().detach(), detach(run.entering), detach(run.mids), run.final.detach(),
                     float(metric[0]))


def record(model: Transformer | RegistryCircuit, side: Side) -> Recording:
    """A plain run of ``side`` with every node's output kept."""
    run = split_run(model, Wiring())
    with torch.no_grad():  # not inference mode: eap-ig's runs with gradients read these tensors
        return recorded(run, run.forward(side))


# -- scores and faithfulness ----------------------------------------------------------------------


def receiver_gradients(model: Transformer | RegistryCircuit, side: Side, embed=None,
                       batch: int = 1) -> tuple[torch.Tensor, SplitRun | RegistrySplitRun, torch.Tensor]:
    """∂metric/∂(each receiver's input) (R, T, d_model) in the graph's receiver order, summed over the
    batch items; with the run (its recorded outputs) and the metrics (B,)."""
    wiring = Copies()
    run = split_run(model, wiring, embed)
    with torch.enable_grad():
        metric = run.forward(side, batch)
        graph = graph_of(model)
        leaves = wiring.leaves(graph)
        grads = torch.autograd.grad(metric.sum(), leaves)
    # per layer: q, k, v as (B, T, n, d) → n receivers each; mlp and logits one receiver each
    rows = [g.sum(0).movedim(1, 0) if g.dim() == 4 else g.sum(0, keepdim=True) for g in grads]
    return torch.cat(rows), run, metric.detach()


def edge_scores(model: Transformer | RegistryCircuit, clean: Side, corrupt: Side, method: str = "eap",
                steps: int = IG_STEPS) -> tuple[np.ndarray, Recording, Recording]:
    """(nodes, receivers) scores, NaN where no edge exists, and the clean and corrupt recordings.

    eap: (a_u^clean − a_u^corrupt) · ∂metric/∂(input of v) at the corrupt run. eap-ig: that gradient
    averaged over the ``steps`` inputs whose embeddings lie k/steps of the way from corrupt to clean.
    """
    if method not in METHODS:
        raise ModelError(f"unknown method {method!r}: choose {', '.join(METHODS)}")
    steps = check_steps(steps)
    clean_run = record(model, clean)
    if method == "eap":
        grads, run, metric = receiver_gradients(model, corrupt)
        corrupt_run = recorded(run, metric)
    else:
        corrupt_run = record(model, corrupt)
        start, end = corrupt_run.outputs[0], clean_run.outputs[0]  # the embeddings (1, T, d)
        alphas = torch.arange(1, steps + 1, dtype=start.dtype, device=start.device).view(-1, 1, 1) / steps
        grads, _, _ = receiver_gradients(model, corrupt, lambda x: start + alphas * (end - start), steps)
        grads = grads / steps
    difference = (clean_run.outputs - corrupt_run.outputs)[:, 0].flatten(1)  # (U, T·d)
    scores = (difference @ grads.flatten(1).T).double().cpu().numpy()  # (U, R)
    scores[~graph_of(model).allowed()] = np.nan
    return scores, clean_run, corrupt_run


def circuit_metrics(model: Transformer | RegistryCircuit, clean: Side, corrupt_run: Recording, chosen: np.ndarray) -> np.ndarray:
    """The metric of the clean input run with only each ``chosen[b]`` (nodes × receivers) carrying it:
    one batch item per circuit."""
    chosen = np.asarray(chosen, dtype=bool).reshape(-1, *chosen.shape[-2:])
    run = split_run(model, Patched(corrupt_run, graph_of(model), chosen))
    with torch.inference_mode():
        return run.forward(clean, len(chosen)).double().cpu().numpy()


class CircuitSearch:
    """A clean/corrupt pair on one decoder, its edges scored once; circuits of any size measured after."""

    def __init__(self, backend: Backend, clean: str, corrupt: str, answer: str, wrong: str,
                 method: str = "eap", steps: int = IG_STEPS) -> None:
        self.backend, self.method = backend, method
        self.steps = check_steps(steps) if method == "eap-ig" else None
        self.model = circuit_model(backend)
        found = sides(backend, clean, corrupt, answer, wrong)
        device = target_device(self.model.registry if isinstance(self.model, RegistryCircuit) else self.model)
        self.clean_side, self.corrupt_side = (replace(s, args=tuple(a.to(device) for a in s.args)) for s in found[:2])
        self.metric, self.graph = found[2], graph_of(self.model)
        self.scores, self.clean_run, self.corrupt_run = edge_scores(self.model, self.clean_side, self.corrupt_side,
                                                                    method, self.steps or IG_STEPS)
        check_restorable(self.clean_run.metric, self.corrupt_run.metric)

    def circuit_metric(self, top: int) -> float:
        chosen = top_edges(np.nan_to_num(self.scores), self.graph.allowed(), top)
        return float(circuit_metrics(self.model, self.clean_side, self.corrupt_run, chosen)[0])

    def kept_curve(self, sizes: list[int]) -> np.ndarray:
        """The share of the clean − corrupt gap kept by the top ``k`` edges, for each k of ``sizes`` (one
        batched forward)."""
        allowed, scores = self.graph.allowed(), np.nan_to_num(self.scores)
        chosen = np.stack([top_edges(scores, allowed, k) for k in sizes])
        metrics = circuit_metrics(self.model, self.clean_side, self.corrupt_run, chosen)
        return restored_fraction(metrics, self.clean_run.metric, self.corrupt_run.metric)

    def result(self, top: int) -> Circuit:
        return Circuit(model=self.backend.name, method=self.method, metric=self.metric,
                       tokens=tuple(self.clean_side.tokens.labels), graph=self.graph, scores=self.scores,
                       clean=self.clean_run.metric, corrupt=self.corrupt_run.metric, top=top,
                       circuit_metric=self.circuit_metric(top), steps=self.steps)


def circuit(backend: Backend, clean: str, corrupt: str, answer: str, wrong: str, method: str = "eap",
            top: int = 20, steps: int = IG_STEPS) -> Circuit:
    """Score every edge between ``clean`` and ``corrupt`` (eap-ig: over ``steps`` interpolations) and
    measure the top ``top`` as a circuit."""
    return CircuitSearch(backend, clean, corrupt, answer, wrong, method, steps).result(top)
