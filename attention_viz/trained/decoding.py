"""Batched runs of the demo models, the same for the Transformer and the GRUs: the two data flows
of seed 004 over many sentences at once (training, evaluation, tests).

* teacher forcing (training flow): the decoder reads ``<bos> y_1 .. y_n`` in one pass and predicts
  ``y_1 .. y_n <eos>``: :func:`teacher_forced_logits`, :func:`cross_attention`;
* greedy decoding (inference flow): the decoder reads only what it generated so far:
  :func:`greedy`, :func:`translate`.

The single-sentence runs with captured attention are in :mod:`attention_viz.backends.translation`; the
tests check both give the same translations.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from ..hooks import capture
from ..model import Transformer
from .checkpoint import TrainedModel
from .corpus import Vocab


def pad(seqs: Sequence[Sequence[int]], pad_id: int = Vocab.PAD) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad id lists → (ids (B, T), padding (B, T) True for real tokens)."""
    length = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), length), pad_id, dtype=torch.long)
    for row, seq in enumerate(seqs):
        ids[row, : len(seq)] = torch.tensor(list(seq), dtype=torch.long)
    return ids, ids != pad_id


def decoder_io(targets: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Teacher forcing: input ``<bos> y`` and output ``y <eos>`` (B, T+1) each, plus the input padding."""
    tgt_in, tgt_padding = pad([[Vocab.BOS, *t] for t in targets])
    tgt_out, _ = pad([[*t, Vocab.EOS] for t in targets])
    return tgt_in, tgt_out, tgt_padding


def teacher_forced_logits(
    model: torch.nn.Module,
    src: torch.Tensor,
    src_padding: torch.Tensor,
    tgt_in: torch.Tensor,
    tgt_padding: torch.Tensor,
) -> torch.Tensor:
    """(B, T, target vocab) next-word logits for every decoder input position."""
    if isinstance(model, Transformer):
        return model.logits(model(src, tgt_in, src_padding, tgt_padding))
    return model(src, tgt_in, src_padding, tgt_padding)


@torch.no_grad()
def greedy(model: torch.nn.Module, src: torch.Tensor, src_padding: torch.Tensor, max_len: int) -> list[list[int]]:
    """Greedy translations of a padded batch: per sentence the generated ids, cut before ``<eos>``.

    ``max_len`` bounds the decoder input (``<bos>`` included), as the models' own greedy_decode.
    """
    prefix = torch.full((src.size(0), 1), Vocab.BOS, dtype=torch.long)
    if isinstance(model, Transformer):
        memory = model.encode(src, src_padding)
        ys = prefix
        done = torch.zeros(src.size(0), dtype=torch.bool)
        while ys.size(1) < max_len:
            hidden = model.decode(ys, memory, src_padding)  # the whole prefix again: (B, t, d_model)
            next_id = model.logits(hidden[:, -1]).argmax(-1, keepdim=True)  # (B, 1)
            ys = torch.cat([ys, next_id], dim=1)
            done |= next_id.squeeze(1) == Vocab.EOS
            if bool(done.all()):
                break
    else:
        ys = model.greedy_decode(prefix, max_len - 1, Vocab.EOS, src, src_padding)
    out = []
    for row in ys[:, 1:].tolist():
        out.append(row[: row.index(Vocab.EOS)] if Vocab.EOS in row else row)
    return out


def translate(dm: TrainedModel, sources: Sequence[Sequence[str]], batch_size: int = 100) -> list[list[str]]:
    """Greedy translations (words) of tokenized source sentences, in order."""
    order = sorted(range(len(sources)), key=lambda i: len(sources[i]))  # similar lengths batch well
    results: dict[int, list[str]] = {}
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        src, src_padding = pad([dm.src_vocab.encode(sources[i]) for i in chunk])
        with torch.inference_mode():
            ids = greedy(dm.model, src, src_padding, dm.max_len)
        for i, row in zip(chunk, ids):
            results[i] = dm.tgt_vocab.decode(row, strip=False)
    return [results[i] for i in range(len(sources))]


def cross_attention(
    dm: TrainedModel, sources: Sequence[Sequence[str]], targets: Sequence[Sequence[str]], batch_size: int = 100
) -> list[np.ndarray]:
    """Teacher-forced cross-attention on the gold targets: per pair ``[layers, heads, len(target), len(source)]``.

    Row ``j`` is the decoder position that reads ``<bos> y_1 .. y_j`` and predicts ``target[j]``
    (the row predicting ``<eos>`` is left out), so ``row.argmax()`` can be compared with the gold
    ``alignment[j]``.
    """
    results: dict[int, np.ndarray] = {}
    order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        src, src_padding = pad([dm.src_vocab.encode(sources[i]) for i in chunk])
        tgt_in, _, tgt_padding = decoder_io([dm.tgt_vocab.encode(targets[i]) for i in chunk])
        with torch.inference_mode(), capture(kinds=("pattern",), names=["decoder.layers.*.cross_attn.*"]) as rec:
            teacher_forced_logits(dm.model, src, src_padding, tgt_in, tgt_padding)
        names = sorted(rec.names_recorded(), key=lambda n: int(n.split(".")[2]))
        stacked = torch.stack([rec[n] for n in names], dim=1).numpy()  # (B, layers, heads, T+1, S)
        for row, i in enumerate(chunk):
            results[i] = stacked[row, :, :, : len(targets[i]), : len(sources[i])]
    return [results[i] for i in range(len(sources))]
