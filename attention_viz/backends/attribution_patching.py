"""Attribution patching (Nanda 2023, "Attribution Patching: Activation Patching At Industrial
Scale"; Syed, Rager & Conmy 2023): every site's activation patch estimated at once, to first order.

Patching site a from the source run into the receiver run moves the metric by about

    (a_source − a_receiver) · ∂metric/∂a  (the gradient taken at the receiver run)

so one forward of the source (its values cached), one forward of the receiver with gradients on and
one backward give every site of a kind. The estimate is returned as an activation patching result
would be (:class:`~attention_viz.analysis.patching.Patching`, the patched metric = the receiver's
metric + the estimate), so the restored fractions, the JSON and the heatmap are the same.

Gradients reach each site's tensor through a zero added at its hook point (``x + δ``, δ a leaf):
the forward is unchanged, the graph stays whole (an earlier site's gradient still flows through
the later ones), and ``torch.autograd.grad`` fills nothing on the shared model's parameters. The
backward runs with inference mode switched off, whatever the caller had on.
"""

from __future__ import annotations

import numpy as np
import torch

from ..analysis.patching import Patching, check_restorable, check_site
from ..core.hooks import capture, intervene
from .base import Backend
from .patch_sides import Side, patch_target, sides, target_device
from .patching import enumerate_sites, hooks_for

KINDS = {"heads": "context", "head_positions": "context", "resid": "resid_pre", "patterns": "pattern"}


def _per_site(product: torch.Tensor, site: str) -> np.ndarray:
    """One row's products (1, ...) summed over what a site covers: heads and patterns (h,), resid
    (T,) from (T, d_model), head_positions (h, T) from (h, T, d_k)."""
    x = product[0]
    return (x.flatten(1).sum(1) if site in ("heads", "patterns") else x.sum(-1)).cpu().numpy()


def _gradients(model, side: Side, names: list[str], kind: str) -> tuple[float, dict, dict]:
    """The receiver's metric, its activations at ``names`` and the metric's gradient there."""
    zeros: dict[str, torch.Tensor] = {}

    def add_zero(x: torch.Tensor, hook) -> torch.Tensor:
        zeros[hook.name] = torch.zeros_like(x, requires_grad=True)
        return x + zeros[hook.name]

    with torch.inference_mode(False), torch.enable_grad():
        args = [a.clone() for a in side.args]  # made under an outer inference mode, autograd could not save them
        with intervene([(name, add_zero) for name in names]), capture(kinds=(kind,), names=names) as seen:
            metric = side.measure(model(*args))[0]
        gradients = torch.autograd.grad(metric, [zeros[name] for name in names], allow_unused=True)
    grads = {name: torch.zeros_like(zeros[name]) if g is None else g for name, g in zip(names, gradients)}
    return float(metric.detach()), {name: seen[name] for name in names}, grads


def attribution_patch(backend: Backend, clean: str, corrupt: str, answer: str, wrong: str, site: str = "heads",
                      noising: bool = False, token: str | None = None) -> Patching:
    """Activation patching's result for ``site``, every patch estimated by attribution patching."""
    site = check_site(site)
    model = patch_target(backend)
    found = sides(backend, clean, corrupt, answer, wrong, token)
    device = target_device(model)
    clean_side, corrupt_side = (Side(s.tokens, tuple(a.to(device) for a in s.args), s.measure, s.target)
                                for s in found[:2])
    source, receiver = (corrupt_side, clean_side) if noising else (clean_side, corrupt_side)
    names, rows, heads = hooks_for(model, site)
    kind = KINDS[site]
    with torch.inference_mode(), capture(kinds=(kind,), names=names) as cached:
        source_metric = float(source.measure(model(*source.args))[0])
    receiver_metric, at_receiver, grads = _gradients(model, receiver, names, kind)
    clean_metric, corrupt_metric = ((receiver_metric, source_metric) if noising else (source_metric, receiver_metric))
    check_restorable(clean_metric, corrupt_metric)
    estimates = {name: _per_site((cached[name].double() - at_receiver[name].double()) * grads[name].double(), site)
                 for name in names}
    positions = [at_receiver[n].size(1 if site == "resid" else 2) for n in names]
    every, grid = enumerate_sites(site, names, heads, positions)
    patched = np.full(grid, np.nan)
    for s in every:
        patched[s.cell] = receiver_metric + estimates[s.name][s.index]
    return Patching(
        model=backend.name, site=site, metric=found[2], tokens=clean_side.tokens.labels,
        corrupt_tokens=corrupt_side.tokens.labels, clean=clean_metric, corrupt=corrupt_metric,
        patched=patched, rows=tuple(rows), noising=noising, target_tokens=clean_side.target,
        corrupt_target_tokens=corrupt_side.target,
    )
