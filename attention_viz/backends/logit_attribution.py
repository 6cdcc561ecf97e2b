"""Direct logit attribution on our decoder: the runs behind
:mod:`attention_viz.analysis.logit_attribution`.

One forward keeps the residual stream (:mod:`.residual_stream`); at the chosen position every
component is put through the final norm with the run's own scale frozen and dotted with
W_U[answer] − W_U[wrong], in float64 so the parts add up to the model's logit difference whatever
its dtype. The answer and the wrong word are read as patching reads them (the token a word adds
after the text; the induction model's symbols from its vocabulary).
"""

from __future__ import annotations

import torch
from torch import nn

from ..analysis.logit_attribution import LogitAttribution
from ..errors import ModelError
from ..core.model import Transformer
from .base import Backend, check_text
from .ours import device_of
from .patch_sides import _appended_id, _vocab_id
from .residual_stream import decoder_with_unembedding, residual_stream

WHAT = "direct logit attribution"


def answer_id(backend: Backend, text: str, word: str) -> int:
    """The token id of ``word`` as the next token after ``text``; a ModelError unless it is one token."""
    from .induction import InductionBackend

    word = word.strip()
    if not word:
        raise ModelError("give the answer and the wrong word (one token each)")
    if isinstance(backend, InductionBackend):
        return _vocab_id(backend.vocab, word.lower(), backend.name, "symbol")
    return _appended_id(backend, text, word)


def frozen_norm(norm: nn.Module, x: torch.Tensor):
    """The final norm as a linear map with the scale frozen at ``x`` (d_model,), float64:
    (apply, bias) with norm(y) = apply(y) + bias for every y that sums to x."""
    weight = norm.weight.double() if norm.weight is not None else torch.ones_like(x)
    eps = norm.eps if norm.eps is not None else torch.finfo(norm.weight.dtype).eps  # RMSNorm's default
    centred = isinstance(norm, nn.LayerNorm)
    x = x - x.mean() if centred else x
    scale = torch.sqrt((x * x).mean() + eps)

    def apply(y: torch.Tensor) -> torch.Tensor:
        y = y - y.mean(-1, keepdim=True) if centred else y
        return y / scale * weight

    bias = norm.bias.double() if getattr(norm, "bias", None) is not None else torch.zeros_like(x)
    return apply, bias


def attribute(backend: Backend, text: str, answer: str, wrong: str, position: int | None = None) -> LogitAttribution:
    """Each head's, MLP's and the embeddings' direct contribution to logit(answer) − logit(wrong) at
    ``position`` (default the last; negative counts from the end)."""
    model: Transformer = decoder_with_unembedding(backend, WHAT)
    text = check_text(text)
    ids = [answer_id(backend, text, word) for word in (answer, wrong)]
    if ids[0] == ids[1]:
        raise ModelError(f"the answer and the wrong word are the same token ({answer.strip()!r})")
    tokens, _ = backend.tokenize(text)
    n = len(tokens.ids)
    p = n - 1 if position is None else position
    if not -n <= p < n:
        raise ModelError(f"position {position} is outside the text's {n} tokens (0 to {n - 1})")
    p %= n
    with torch.inference_mode():
        stream = residual_stream(model, torch.tensor([tokens.ids], device=device_of(model)))
        layers = len(stream.entering)
        final = stream.leaving(layers - 1, [p])[0]
        generator = model.decoder.generator
        direction = (generator.weight[ids[0]] - generator.weight[ids[1]]).double()
        norm, bias = frozen_norm(model.decoder.norm, final.double())

        def dla(y: torch.Tensor) -> torch.Tensor:
            return norm(y.double()) @ direction

        heads = torch.stack([dla(stream.heads_out(i, [p])[:, 0]) for i in range(layers)])  # (N, h)
        mlps = [stream.mlp_out(i, [p]) for i in range(layers)]
        mlp = torch.stack([dla(m[0]) if m is not None else direction.new_zeros(()) for m in mlps])
        rest = bias @ direction
        for i in range(layers):
            if stream.attention_bias(i) is not None:
                rest = rest + dla(stream.attention_bias(i))
        if generator.bias is not None:
            rest = rest + (generator.bias[ids[0]] - generator.bias[ids[1]]).double()
        logits = generator(model.decoder.norm(final)).float()
        total = float(logits[ids[0]] - logits[ids[1]])
        embed = float(dla(stream.entering[0][p]))
    shown = "the last position" if p == n - 1 else f"position {p} ({tokens.labels[p]!r})"
    return LogitAttribution(
        model=backend.name, tokens=tokens.labels, position=p,
        metric=f"logit({answer.strip()}) − logit({wrong.strip()}) at {shown}",
        heads=heads.cpu().numpy(), mlp=mlp.cpu().numpy(), embed=embed, rest=float(rest), total=total,
    )
