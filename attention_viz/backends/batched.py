"""Several texts through our Transformer in one forward: right-padded to the longest, the padding
masked as keys (and, in a decoder, past every real query by the causal mask), each text's arrays
then cut back to its own tokens. What ``av.run(model, [text, ...])`` returns: one
:class:`~attention_viz.core.result.AttentionResult` per text, equal to running it alone.

Models whose forward is not one Transformer call of ours (the translation models, which decode
step by step; anything running in ``transformers``) run the texts one after another.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import torch

from ..errors import ModelError
from ..core.hooks import capture
from ..core.names import parse_hook_name, parse_layer_hook_name
from ..core.result import AttentionResult
from ..core.provenance import run_of
from .base import Backend

KEY_BY_KEY = ("scores", "pattern")  # (B, h, T, T): cut on both token axes; the others (B, ·, T, ·) on one


def run_batch(backend: Backend, texts: Sequence[str], kinds: Collection[str] = ("pattern",)) -> list[AttentionResult]:
    """One result per text, from one padded forward where the model allows it."""
    if isinstance(texts, str) or not texts:
        raise ModelError("give a list of one or more texts")
    from .ours_decoder import OursDecoderBackend

    if not batches_in_one_forward(backend):
        return [backend.run(text, kinds=tuple(kinds)) for text in texts]
    encoded = [backend.tokenize(text) for text in texts]
    lengths = [len(tokens) for tokens, _ in encoded]
    ids = torch.zeros(len(texts), max(lengths), dtype=torch.long)  # id 0 at padded places: masked, never read
    real = torch.zeros_like(ids, dtype=torch.bool)
    for i, (tokens, _) in enumerate(encoded):
        ids[i, : lengths[i]] = torch.tensor(tokens.ids)
        real[i, : lengths[i]] = True
    model = backend.model  # type: ignore[attr-defined]
    device = next(model.parameters()).device
    ids, real = ids.to(device), real.to(device)
    padding = {"src_padding": real} if model.config.shape == "encoder-only" else {"tgt_padding": real}
    with torch.inference_mode(), capture(kinds=tuple(kinds)) as recorded:
        model(ids, **padding)
    results = []
    for i, ((tokens, dropped), n, text) in enumerate(zip(encoded, lengths, texts)):
        arrays = {name: _cut(name, recorded[name][i], n).float().cpu().numpy().copy()
                  for name in recorded.names_recorded()}
        meta = (backend.meta(dropped) if isinstance(backend, OursDecoderBackend)
                else {"dropped": dropped, "implementation": backend.implementation})
        meta["batch"] = len(texts)  # how many texts shared the forward
        meta["provenance"] = run_of(backend.name, backend.implementation, text)
        results.append(AttentionResult(backend.name, tokens, arrays, None, meta))
    return results


def batches_in_one_forward(backend: Backend) -> bool:
    """Whether ``backend`` runs one Transformer of ours on token ids alone (encoder- or decoder-only)."""
    from .induction import InductionBackend
    from .ours_decoder import OursDecoderBackend
    from .scratch import ScratchEncoderBackend

    return isinstance(backend, (ScratchEncoderBackend, OursDecoderBackend, InductionBackend))


def _cut(name: str, tensor: torch.Tensor, n: int) -> torch.Tensor:
    """One batch item's tensor cut to its first ``n`` tokens."""
    try:
        kind = parse_hook_name(name)[2]
    except ValueError:  # a layer hook: (T, d_model)
        parse_layer_hook_name(name)
        return tensor[:n]
    return tensor[:, :n, :n] if kind in KEY_BY_KEY else tensor[:, :n]
