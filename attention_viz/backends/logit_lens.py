"""The logit lens on our decoder: the runs behind :mod:`attention_viz.analysis.logit_lens`.

One forward keeps the residual stream (:mod:`.residual_stream`); each depth's stream goes through
the model's final norm and LM head, a block of positions at a time (a (positions, vocabulary) block,
never (depths, positions, vocabulary) at once).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from ..analysis.logit_lens import LogitLens, row_labels
from ..core.hooks import capture
from ..core.names import DECODER_SELF, layer_hook_name
from ..errors import ModelError
from ..inputs.tokens import Tokens
from .base import Backend, check_text
from .logit_attribution import answer_id
from .ours import device_of
from .residual_stream import decoder_with_unembedding, residual_stream

POSITIONS_AT_ONCE = 256


def token_text(backend: Backend, token_id: int) -> str:
    """One vocabulary entry as text (byte-level pieces decoded, so " the" keeps its space)."""
    from .induction import InductionBackend

    if isinstance(backend, InductionBackend):
        return backend.vocab.itos[token_id]
    return backend.tokenizer.decode([token_id], skip_special_tokens=False)  # type: ignore[attr-defined]


def logit_lens(backend: Backend, text: str, answer: str | None = None, top: int = 5) -> LogitLens:
    """The ``top`` most likely next tokens after every layer at every position of ``text`` (and
    p(``answer``) there when given: one token, read as the token it adds after the text)."""
    registry = getattr(backend, "registry", None)
    depths_of = _registry_depths if registry is not None else _our_depths
    text = check_text(text)
    tokens: Tokens = backend.tokenize(text)[0]
    wanted = answer_id(backend, text, answer) if answer and answer.strip() else None
    probs_out, ids_out, answer_out = [], [], []
    with torch.inference_mode():
        depths = depths_of(backend, tokens)
        for depth, to_logits in depths:
            for start in range(0, depth.size(0), POSITIONS_AT_ONCE):
                probs = to_logits(depth[start:start + POSITIONS_AT_ONCE]).float().softmax(-1)  # (P, V)
                top = min(top, probs.size(-1))
                best = probs.topk(top, dim=-1)
                probs_out.append(best.values.cpu())
                ids_out.append(best.indices.cpu())
                if wanted is not None:
                    answer_out.append(probs[:, wanted].cpu())
    rows = len(depths)
    top_probs = torch.cat(probs_out).reshape(rows, len(tokens.ids), top).numpy()
    top_ids = torch.cat(ids_out).reshape(rows, len(tokens.ids), top).numpy()
    text_of = {int(i): token_text(backend, int(i)) for i in np.unique(top_ids)}
    return LogitLens(
        model=backend.name, tokens=tokens.labels, rows=row_labels(rows - 1), top_ids=top_ids,
        top_tokens=tuple(tuple(tuple(text_of[int(i)] for i in cell) for cell in row) for row in top_ids),
        top_probs=top_probs, answer=answer.strip() if wanted is not None else None,
        answer_probs=torch.cat(answer_out).reshape(rows, len(tokens.ids)).numpy() if wanted is not None else None,
    )


def _our_depths(backend: Backend, tokens: Tokens) -> list[tuple[torch.Tensor, Callable]]:
    """Our decoder: the stream entering every layer and leaving the last, each through final norm + LM head."""
    model = decoder_with_unembedding(backend, "the logit lens")
    stream = residual_stream(model, torch.tensor([tokens.ids], device=device_of(model)))
    norm, generator = model.decoder.norm, model.decoder.generator
    return [(h, lambda x: generator(norm(x))) for h in [*stream.entering, stream.leaving(len(stream.entering) - 1)]]


def _registry_depths(backend: Backend, tokens: Tokens) -> list[tuple[torch.Tensor, Callable]]:
    """A transformers decoder with our attention function: the stream entering every layer (our
    ``resid_pre`` pre-hooks) through the model's own final norm and head, and the last layer's output,
    which transformers hands over normed already, through the head alone."""
    registry = backend.registry  # type: ignore[attr-defined]
    if registry.shape != "decoder-only" or not registry.has_lm_head:
        what = "has no LM head" if registry.shape == "decoder-only" else f"is {registry.shape}"
        raise ModelError(f"{backend.name} {what}: the logit lens reads a decoder's next-token logits")
    norm = registry.final_norm()
    ids = torch.tensor([tokens.ids], device=registry.model.device)
    with capture(kinds=("resid_pre",)) as recorded:
        out = registry.model(input_ids=ids, use_cache=False, logits_to_keep=1, output_hidden_states=True)
    entering = [recorded[layer_hook_name("decoder", i)][0] for i in range(registry.layers(DECODER_SELF))]
    return [*((h, lambda x: registry.unembed(norm(x))) for h in entering), (out.hidden_states[-1][0], registry.unembed)]
