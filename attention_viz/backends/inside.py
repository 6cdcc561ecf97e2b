"""Inside one head: every matrix of one attention head, recomputed by hand from the model's weights.

``X → Q, K, V`` through the head's slices of W_Q, W_K, W_V, then ``QKᵀ``, ``÷√d_k``, softmax,
``× V``, the concatenation of all heads and ``W_O``: the steps of Vaswani et al. 2017 (section 3.2), on the real model and
the real sentence. X is the input of the chosen layer (the embeddings for layer 0, the previous
layer's output otherwise), obtained by running the model's own embeddings and layers < L.

Weights are shown in the paper's orientation (``x · W``): an ``nn.Linear`` stores ``W`` transposed
(out × in), so the head's W_Q is ``w_q.weight[rows].T``, ``d_model × d_k``.

The hand computation is checked against the hook captures of the model (tests/test_inside.py),
so what the page shows is what the model computes. With ``scale=False`` every head of the layer is
recomputed without ``1/√d_k``: that is a hypothetical model, shown to make the saturation visible.

Pure: torch in, numpy out; no streamlit, no plotly.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from ..core.attention import padding_mask
from ..core.model import Transformer


@dataclass(frozen=True)
class InsideHead:
    """Every matrix of one head of one encoder self-attention layer (numpy float32, n = tokens)."""

    layer: int
    head: int
    scale: bool  # whether QKᵀ was divided by √d_k (the real model: True)
    d_model: int
    d_k: int
    h: int
    x: np.ndarray  # (n, d_model)  the layer's input
    w_q: np.ndarray  # (d_model, d_k)  this head's slice, so that q = x · w_q + b_q
    w_k: np.ndarray  # (d_model, d_k)
    w_v: np.ndarray  # (d_model, d_k)
    b_q: np.ndarray  # (d_k,)
    b_k: np.ndarray  # (d_k,)
    b_v: np.ndarray  # (d_k,)
    q: np.ndarray  # (n, d_k)
    k: np.ndarray  # (n, d_k)
    v: np.ndarray  # (n, d_k)
    scores_raw: np.ndarray  # (n, n)  Q Kᵀ
    scores: np.ndarray  # (n, n)  Q Kᵀ / √d_k (or Q Kᵀ again when scale=False); what softmax sees
    mask: np.ndarray  # (n, n) bool, True = may attend; all True for one unpadded sentence
    pattern: np.ndarray  # (n, n)  softmax(scores), rows sum to 1
    context: np.ndarray  # (n, d_k)  pattern · V: this head's output
    concat: np.ndarray  # (n, d_model)  Concat(head_0 … head_{h−1}); this head is columns head·d_k …
    w_o: np.ndarray  # (d_model, d_model)  output projection, output = concat · w_o + b_o
    b_o: np.ndarray  # (d_model,)
    output: np.ndarray  # (n, d_model)  the attention sublayer's output (before residual and norm)
    raw_scores: np.ndarray  # (n, n)  X Xᵀ  (self-attention without projections, on the same X)
    raw_pattern: np.ndarray  # (n, n)  softmax(X Xᵀ)
    raw_context: np.ndarray  # (n, d_model)  softmax(X Xᵀ) X

    @property
    def n(self) -> int:
        return self.x.shape[0]

    @property
    def columns(self) -> slice:
        """This head's columns in ``concat`` (and its rows in ``w_o``)."""
        return slice(self.head * self.d_k, (self.head + 1) * self.d_k)

    def equations(self) -> dict[str, str]:
        """Shape-annotated steps, written out with their shapes ("X (1×512) · W_Q (512×64) = Q (1×64)")."""
        n, d, dk, h = self.n, self.d_model, self.d_k, self.h
        divide = f" ÷ √{dk} (= {math.sqrt(dk):.3g})" if self.scale else " (not scaled)"
        return {
            "q": f"X ({n}×{d}) · W_Q ({d}×{dk}) + b_Q = Q ({n}×{dk})",
            "k": f"X ({n}×{d}) · W_K ({d}×{dk}) + b_K = K ({n}×{dk})",
            "v": f"X ({n}×{d}) · W_V ({d}×{dk}) + b_V = V ({n}×{dk})",
            "scores_raw": f"Q ({n}×{dk}) · Kᵀ ({dk}×{n}) = QKᵀ ({n}×{n})",
            "scores": f"QKᵀ ({n}×{n}){divide} = scores ({n}×{n})",
            "pattern": f"softmax(scores) row by row = weights ({n}×{n}), each row sums to 1",
            "context": f"weights ({n}×{n}) · V ({n}×{dk}) = head {self.head} ({n}×{dk})",
            "concat": f"Concat(head 0 … head {h - 1}) = {h} × ({n}×{dk}) side by side = ({n}×{d})",
            "output": f"Concat ({n}×{d}) · W_O ({d}×{d}) + b_O = output ({n}×{d})",
            "raw": f"softmax(X ({n}×{d}) · Xᵀ ({d}×{n})) · X = ({n}×{d})",
        }


def layer_input(
    model: Transformer, ids: torch.Tensor, layer: int, use_positions: bool = True
) -> torch.Tensor:
    """The input X (1, n, d_model) of encoder layer ``layer``: embeddings, then layers 0 … layer−1."""
    encoder = model.encoder
    if encoder is None or model.config.shape != "encoder-only":
        raise ValueError("inside_head needs an encoder-only model of ours (such as minilm)")
    if not 0 <= layer < len(encoder.layers):
        raise ValueError(f"layer must be in 0..{len(encoder.layers) - 1}, got {layer}")
    with torch.inference_mode():
        x = encoder.embed(ids, None, use_positions)  # (1, n, d_model)
        for block in encoder.layers[:layer]:
            x = block(x, None)  # one sentence: no padding, no mask
    return x


def inside_head(model: Transformer, ids: torch.Tensor | list[int], layer: int, head: int,
                scale: bool = True) -> InsideHead:
    """Recompute head ``head`` of encoder layer ``layer`` step by step on token ``ids`` (one sentence).

    ``ids``: (n,) or (1, n). ``scale=False`` drops the 1/√d_k in every head of the layer (so
    ``concat`` and ``output`` are those of that hypothetical layer).
    """
    ids = torch.as_tensor(ids, dtype=torch.long, device=next(model.parameters()).device)
    ids = ids.unsqueeze(0) if ids.dim() == 1 else ids
    if ids.size(0) != 1:
        raise ValueError("inside_head takes one sentence")
    x = layer_input(model, ids, layer)[0].float().cpu()  # (n, d_model): the head is recomputed in float32 here
    attn = _float32_on_cpu(model.encoder.layers[layer].self_attn)
    h, d_k = attn.h, attn.d_k
    if not 0 <= head < h:
        raise ValueError(f"head must be in 0..{h - 1}, got {head}")
    n = x.size(0)
    with torch.inference_mode():
        # every head's projections, (n, d_model) → (h, n, d_k); the same F.linear as the model
        q_all = F.linear(x, attn.w_q.weight, attn.w_q.bias).view(n, h, d_k).transpose(0, 1)
        k_all = F.linear(x, attn.w_k.weight, attn.w_k.bias).view(n, h, d_k).transpose(0, 1)
        v_all = F.linear(x, attn.w_v.weight, attn.w_v.bias).view(n, h, d_k).transpose(0, 1)
        scores_raw = q_all @ k_all.transpose(-2, -1)  # (h, n, n)
        scores = scores_raw * (1.0 / math.sqrt(d_k)) if scale else scores_raw
        mask = padding_mask([n])[0].expand(n, n)  # one sentence has no padding: every key allowed
        pattern = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)  # (h, n, n)
        context = pattern @ v_all  # (h, n, d_k)
        concat = context.transpose(0, 1).reshape(n, h * d_k)  # (n, d_model)
        output = F.linear(concat, attn.w_o.weight, attn.w_o.bias)  # (n, d_model)
        raw_scores = x @ x.T  # (n, n)
        raw_pattern = torch.softmax(raw_scores, dim=-1)
        raw_context = raw_pattern @ x  # (n, d_model)

    rows = slice(head * d_k, (head + 1) * d_k)

    def np32(t: torch.Tensor) -> np.ndarray:
        return t.detach().float().cpu().numpy().copy()

    return InsideHead(
        layer=layer, head=head, scale=scale, d_model=h * d_k, d_k=d_k, h=h,
        x=np32(x),
        w_q=np32(attn.w_q.weight[rows].T), w_k=np32(attn.w_k.weight[rows].T), w_v=np32(attn.w_v.weight[rows].T),
        b_q=np32(_bias(attn.w_q, rows, d_k)), b_k=np32(_bias(attn.w_k, rows, d_k)),
        b_v=np32(_bias(attn.w_v, rows, d_k)),
        q=np32(q_all[head]), k=np32(k_all[head]), v=np32(v_all[head]),
        scores_raw=np32(scores_raw[head]), scores=np32(scores[head]), mask=mask.numpy().copy(),
        pattern=np32(pattern[head]), context=np32(context[head]), concat=np32(concat),
        w_o=np32(attn.w_o.weight.T), b_o=np32(_bias(attn.w_o, slice(None), h * d_k)), output=np32(output),
        raw_scores=np32(raw_scores), raw_pattern=np32(raw_pattern), raw_context=np32(raw_context),
    )


def _float32_on_cpu(module: torch.nn.Module) -> torch.nn.Module:
    """``module`` itself when it is float32 on the CPU, else a float32 copy there (a model placed on a GPU
    or in bfloat16 keeps its own weights)."""
    weight = next(module.parameters())
    if weight.dtype == torch.float32 and weight.device.type == "cpu":
        return module
    return copy.deepcopy(module).float().cpu()


def _bias(linear: torch.nn.Linear, rows: slice, size: int) -> torch.Tensor:
    return linear.bias[rows] if linear.bias is not None else torch.zeros(size)[rows]

