"""Direct logit attribution: the runs behind :mod:`attention_viz.analysis.logit_attribution`, on our
decoder here and on transformers' decoders with our attention function in
:mod:`.hf_logit_attribution`.

On ours, one forward keeps the residual stream (:mod:`.residual_stream`); at the chosen position every
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
from .hf_logit_attribution import check_decoder, linear_norm, registry_parts
from .hf_model import RegistryModel
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
    """Our final norm as :func:`~.hf_logit_attribution.linear_norm`, its scale frozen at ``x`` (d_model,)."""
    x = x.double()
    weight = norm.weight.double() if norm.weight is not None else torch.ones_like(x)
    eps = norm.eps if norm.eps is not None else torch.finfo(norm.weight.dtype).eps  # RMSNorm's default
    bias = norm.bias.double() if getattr(norm, "bias", None) is not None else None
    return linear_norm(x, weight, bias, eps, isinstance(norm, nn.LayerNorm))


def attribute(backend: Backend, text: str, answer: str, wrong: str, position: int | None = None) -> LogitAttribution:
    """Each head's, MLP's and the embeddings' direct contribution to logit(answer) − logit(wrong) at
    ``position`` (default the last; negative counts from the end)."""
    registry = getattr(backend, "registry", None)
    if isinstance(registry, RegistryModel):
        check_decoder(backend.name, registry, WHAT)
    else:
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
    if isinstance(registry, RegistryModel):
        parts = registry_parts(registry, list(tokens.ids), ids[0], ids[1], p)
    else:
        parts = _our_parts(model, list(tokens.ids), ids[0], ids[1], p)
    shown = "the last position" if p == n - 1 else f"position {p} ({tokens.labels[p]!r})"
    cap = f", before the final soft-cap {parts['cap']:g}·tanh(logit/{parts['cap']:g})" if parts.get("cap") else ""
    return LogitAttribution(
        model=backend.name, tokens=tokens.labels, position=p,
        metric=f"logit({answer.strip()}) − logit({wrong.strip()}) at {shown}{cap}",
        heads=parts["heads"].cpu().numpy(), mlp=parts["mlp"].cpu().numpy(), embed=parts["embed"],
        rest=parts["rest"], total=parts["total"],
    )


def _our_parts(model: Transformer, ids: list[int], answer: int, wrong: int, p: int) -> dict:
    """Our decoder's ``heads``, ``mlp``, ``embed``, ``rest`` and ``total`` at position ``p``."""
    with torch.inference_mode():
        stream = residual_stream(model, torch.tensor([ids], device=device_of(model)))
        layers = len(stream.entering)
        final = stream.leaving(layers - 1, [p])[0]
        generator = model.decoder.generator
        direction = (generator.weight[answer] - generator.weight[wrong]).double()
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
            rest = rest + (generator.bias[answer] - generator.bias[wrong]).double()
        logits = generator(model.decoder.norm(final)).float()
        return {"heads": heads, "mlp": mlp, "embed": float(dla(stream.entering[0][p])), "rest": float(rest),
                "total": float(logits[answer] - logits[wrong])}
