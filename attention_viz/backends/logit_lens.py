"""The logit lens on our decoder: the runs behind :mod:`attention_viz.analysis.logit_lens`.

One forward keeps the residual stream (:mod:`.residual_stream`); each depth's stream goes through
the model's final norm and LM head, a block of positions at a time (a (positions, vocabulary) block,
never (depths, positions, vocabulary) at once).
"""

from __future__ import annotations

import numpy as np
import torch

from ..analysis.logit_lens import LogitLens, row_labels
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
    model = decoder_with_unembedding(backend, "the logit lens")
    text = check_text(text)
    tokens: Tokens = backend.tokenize(text)[0]
    wanted = answer_id(backend, text, answer) if answer and answer.strip() else None
    norm, generator = model.decoder.norm, model.decoder.generator
    top = min(top, generator.out_features)
    probs_out, ids_out, answer_out = [], [], []
    with torch.inference_mode():
        stream = residual_stream(model, torch.tensor([tokens.ids], device=device_of(model)))
        last = len(stream.entering) - 1
        for depth in [*stream.entering, stream.leaving(last)]:
            for start in range(0, depth.size(0), POSITIONS_AT_ONCE):
                probs = generator(norm(depth[start:start + POSITIONS_AT_ONCE])).float().softmax(-1)  # (P, V)
                best = probs.topk(top, dim=-1)
                probs_out.append(best.values.cpu())
                ids_out.append(best.indices.cpu())
                if wanted is not None:
                    answer_out.append(probs[:, wanted].cpu())
    rows = len(stream.entering) + 1
    top_probs = torch.cat(probs_out).reshape(rows, len(tokens.ids), top).numpy()
    top_ids = torch.cat(ids_out).reshape(rows, len(tokens.ids), top).numpy()
    text_of = {int(i): token_text(backend, int(i)) for i in np.unique(top_ids)}
    return LogitLens(
        model=backend.name, tokens=tokens.labels, rows=row_labels(rows - 1), top_ids=top_ids,
        top_tokens=tuple(tuple(tuple(text_of[int(i)] for i in cell) for cell in row) for row in top_ids),
        top_probs=top_probs, answer=answer.strip() if wanted is not None else None,
        answer_probs=torch.cat(answer_out).reshape(rows, len(tokens.ids)).numpy() if wanted is not None else None,
    )
