"""Batched runs of the demo models, the same for the Transformer and the GRUs: the two data flows
of an encoder–decoder (Vaswani et al. 2017) over many sentences at once (training, evaluation, tests).

* teacher forcing (training flow): the decoder reads ``<bos> y_1 .. y_n`` in one pass and predicts
  ``y_1 .. y_n <eos>``: ``model.teacher_forced``, :func:`cross_attention`;
* greedy decoding (inference flow): the decoder reads only what it generated so far:
  :func:`greedy` (also the backend's, one sentence with captured attention), :func:`translate`.

Both models implement :class:`Seq2Seq`; nothing here branches on which one it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import torch

from ..core.hooks import capture
from ..core.names import CROSS, parse_hook_name
from .checkpoint import TrainedModel
from .vocab import Vocab


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


class Seq2Seq(Protocol):
    """The decoding interface both translation models have (:class:`TranslationTransformer`,
    :class:`RNNSeq2Seq`): nothing here or in the backend asks which one it is."""

    kinds: tuple[str, ...]  # the hook kinds its attention can capture
    multi_head: bool  # scaled dot-product heads: each can be removed, and a padded batch is masked


    def start(self, src: torch.Tensor, src_padding: torch.Tensor | None = None) -> Any:
        """Encode the source; returns the decoding state."""

    def step(self, state: Any, ys: torch.Tensor) -> tuple[torch.Tensor, Any]:
        """Next-word logits (B, V) after the decoder inputs ``ys`` (B, t), and the new state."""

    def teacher_forced(
        self, src: torch.Tensor, tgt: torch.Tensor, src_padding: torch.Tensor | None = None,
        tgt_padding: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """(B, T, V) next-word logits for every decoder input position."""

    def decoder_states(self, src: torch.Tensor, tgt: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor]:
        """Teacher-forced: the decoder's output states (B, T, d) — ``None`` where they are not
        comparable across models — and the (B, T, V) logits."""


@torch.no_grad()
def greedy(
    model: Seq2Seq, src: torch.Tensor, src_padding: torch.Tensor | None, max_len: int, eos_id: int = Vocab.EOS
) -> torch.Tensor:
    """The inference flow: feed back the most likely word, one step at a time.

    Returns the decoder inputs and outputs ``<bos> y_1 .. y_n`` (B, ≤ max_len). Stops when every
    row has produced ``eos_id`` (rows that finished early keep producing words, to be cut at their
    first ``eos_id``) or when the decoder input reaches ``max_len`` (``<bos>`` included).
    """
    ys = torch.full((src.size(0), 1), Vocab.BOS, dtype=torch.long)
    state = model.start(src, src_padding)
    done = torch.zeros(src.size(0), dtype=torch.bool)
    while ys.size(1) < max_len:
        logits, state = model.step(state, ys)
        next_id = logits.argmax(-1, keepdim=True)  # (B, 1)
        ys = torch.cat([ys, next_id], dim=1)
        done |= next_id.squeeze(1) == eos_id
        if bool(done.all()):
            break
    return ys


def until_eos(ys: torch.Tensor) -> list[list[int]]:
    """Per sentence the generated ids after ``<bos>``, cut before the first ``<eos>``."""
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
            ids = until_eos(greedy(dm.model, src, src_padding, dm.max_len))
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
        with torch.inference_mode(), capture(kinds=("pattern",)) as rec:
            dm.model.teacher_forced(src, tgt_in, src_padding, tgt_padding)
        layers = sorted((layer, name) for name in rec.names_recorded() for group, layer, _ in [parse_hook_name(name)]
                        if group == CROSS)  # fmt: skip
        stacked = torch.stack([rec[name] for _, name in layers], dim=1).numpy()  # (B, layers, heads, T+1, S)
        for row, i in enumerate(chunk):
            results[i] = stacked[row, :, :, : len(targets[i]), : len(sources[i])]
    return [results[i] for i in range(len(sources))]
