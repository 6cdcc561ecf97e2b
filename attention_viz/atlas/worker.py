"""The model side of the corpus pass: a batch of corpus rows in, a batch of shard rows out.

:class:`AtlasWorker` is what Ray Data's ``map_batches`` instantiates once per actor (so the model
loads once per worker); the plain single-process loop of the benchmark calls the same class. It
lives in the installed package because Ray workers import it by name.

A shard row (schema :func:`shard_schema`) is one corpus record: ``reason`` is null for a sentence
that ran, and holds why otherwise (the statistics are then null); ``tokens_dropped`` counts the
tokens past the model's limit that it did not read. Per-head values are flattened
``layer * heads + head``. Keys are stored per KV head, as the model computes them: a grouped-query
model (Llama, Qwen2, Mistral) has fewer key heads than query heads.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa

from ..errors import ModelError
from ..core.names import DECODER_SELF, ENCODER_SELF
from .layout import note_progress
from .stats import STATS, js_divergences, relation_predictions, sentence_stats, token_kinds, upper

def shard_schema(layers: int, heads: int, kv_heads: int, d_k: int, d_model: int) -> pa.Schema:
    """Columns of a shard; q/k (``d_k > 0``) and layer outputs (``d_model > 0``) only when the backend has them.
    A token's queries are ``heads · d_k`` wide, its keys ``kv_heads · d_k``."""
    A = layers * heads
    per_head = pa.list_(pa.float32(), A)
    fields = [
        ("line", pa.int64()), ("text", pa.string()), ("reason", pa.string()), ("priority", pa.float64()),
        ("layers", pa.int16()), ("heads", pa.int16()), ("n_tokens", pa.int32()), ("n_words", pa.int32()),
        ("tokens_dropped", pa.int32()),
        ("labels", pa.list_(pa.string())), ("kinds", pa.list_(pa.int8())), ("word_ids", pa.list_(pa.int32())),
        *[(name, per_head) for name in STATS],
        ("rel_names", pa.list_(pa.string())), ("rel_from", pa.list_(pa.int32())), ("rel_to", pa.list_(pa.int32())),
        ("rel_pred", pa.list_(pa.list_(pa.int16(), A))),
        ("js", pa.list_(pa.float32(), A * (A - 1) // 2)),
        ("sampled", pa.bool_()),
    ]
    for layer in range(layers):
        if d_k:
            fields += [(f"q_{layer}", pa.list_(pa.list_(pa.float16(), heads * d_k))),
                       (f"k_{layer}", pa.list_(pa.list_(pa.float16(), kv_heads * d_k)))]
        if d_model:
            fields.append((f"h_{layer}", pa.list_(pa.list_(pa.float16(), d_model))))
    return pa.schema(fields)


def _vectors(items: list[np.ndarray | None], width: int, dtype) -> pa.Array:
    """Rows of per-row vectors (or null rows) → list<fixed_size_list<dtype, width>>."""
    lengths = [0 if item is None else len(item) for item in items]
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    present = [item.reshape(-1) for item in items if item is not None]
    flat = np.concatenate(present).astype(dtype) if present else np.zeros(0, dtype)
    values = pa.FixedSizeListArray.from_arrays(pa.array(flat), width)
    mask = pa.array([item is None for item in items])
    return pa.ListArray.from_arrays(pa.array(offsets), values, mask=mask)


def _per_head(items: list[np.ndarray | None], width: int) -> pa.Array:
    flat = np.concatenate([np.zeros(width, np.float32) if item is None else item.astype(np.float32).reshape(-1)
                           for item in items]) if items else np.zeros(0, np.float32)
    mask = pa.array([item is None for item in items])
    return pa.FixedSizeListArray.from_arrays(pa.array(flat), width, mask=mask)


class AtlasWorker:
    """Holds one model; turns corpus rows into shard rows. ``sample_below`` / ``js_below``: a row whose
    ``priority`` is under the threshold gets its q/k/layer outputs sampled / its JS matrix computed."""

    def __init__(self, model: str, sample_below: float, js_below: float, threads: int = 1,
                 progress: str | None = None) -> None:
        import torch

        from ..backends.registry import load_backend

        torch.set_num_threads(threads)  # one core per worker: Ray runs one worker per core
        self.backend = load_backend(model)
        self.sample_below, self.js_below = sample_below, js_below
        self.progress = progress  # the atlas folder whose progress log each finished batch adds to
        self.kinds = ("pattern", "q", "k") if {"q", "k"} <= set(self.backend.kinds) else ("pattern",)
        # a dry run gives the model's dimensions, on a text it can read (the induction model reads symbols)
        result, states = self.backend.layer_states(self.backend.probe_texts(1)[0], kinds=self.kinds)
        groups = [group for group in result.attentions() if group in (ENCODER_SELF, DECODER_SELF)]
        if not groups:  # an RNN's or the captioner's attention runs from the decoder to the input
            raise ModelError(f"{model} has no self-attention heads (its attention runs from the decoder to its "
                             "input): the atlas describes self-attention heads")
        self.group = groups[0]  # encoder self-attention (encoder-only and encoder-decoder), or a decoder-only model's
        P = result.stack("pattern", *self.group)
        self.layers, self.heads = P.shape[:2]
        self.d_k = result.array(self.group, 0, "q").shape[-1] if "q" in self.kinds else 0
        self.kv_heads = result.array(self.group, 0, "k").shape[0] if "k" in self.kinds else 0  # (kv_heads, n, d_k)
        self.d_model = 0 if states is None else states.shape[-1]
        self.schema = shard_schema(self.layers, self.heads, self.kv_heads, self.d_k, self.d_model)

    def __call__(self, batch: pa.Table) -> pa.Table:
        rows = batch.to_pylist()
        rows.sort(key=lambda row: (row["words"], row["line"]))  # already grouped by length; keep it so
        table = self.process(rows)
        if self.progress is not None:
            note_progress(Path(self.progress), len(rows))
        return table

    def process(self, rows: list[dict]) -> pa.Table:
        outputs = [self.sentence(row) for row in rows]
        A = self.layers * self.heads
        columns: dict[str, pa.Array | list] = {
            name: [out[name] for out in outputs]
            for name in ("line", "text", "reason", "priority", "n_tokens", "n_words", "tokens_dropped", "labels", "kinds",
                         "word_ids", "rel_names", "rel_from", "rel_to", "sampled")
        }
        columns["layers"] = [self.layers] * len(rows)
        columns["heads"] = [self.heads] * len(rows)
        for name in STATS:
            columns[name] = _per_head([None if out["stats"] is None else out["stats"][name] for out in outputs], A)
        columns["rel_pred"] = _vectors([out["rel_pred"] for out in outputs], A, np.int16)
        columns["js"] = _per_head([out["js"] for out in outputs], A * (A - 1) // 2)
        for layer in range(self.layers):
            if self.d_k:
                for kind, heads in (("q", self.heads), ("k", self.kv_heads)):
                    items = [None if out[kind] is None else out[kind][layer] for out in outputs]
                    columns[f"{kind}_{layer}"] = _vectors(items, heads * self.d_k, np.float16)
            if self.d_model:
                items = [None if out["h"] is None else out["h"][layer] for out in outputs]
                columns[f"h_{layer}"] = _vectors(items, self.d_model, np.float16)
        arrays = [columns[field.name] if isinstance(columns[field.name], pa.Array)
                  else pa.array(columns[field.name], type=field.type) for field in self.schema]
        return pa.Table.from_arrays(arrays, schema=self.schema)

    def sentence(self, row: dict) -> dict:
        out = {"line": row["line"], "text": row["text"], "reason": row["reason"], "priority": row["priority"],
               "n_tokens": None, "n_words": None, "tokens_dropped": None, "labels": None, "kinds": None, "word_ids": None, "stats": None,
               "rel_names": None, "rel_from": None, "rel_to": None, "rel_pred": None, "js": None,
               "sampled": False, "q": None, "k": None, "h": None}
        if row["reason"] is not None:
            return out
        try:
            result, states = self.backend.layer_states(row["text"], kinds=self.kinds)
        except ModelError as error:  # a line the tokenizer cannot read: skipped, never fatal
            out["reason"] = str(error)
            return out
        tokens = result.tokens
        P = result.stack("pattern", *self.group)  # (L, H, n, n)
        kinds = token_kinds(tokens.labels, tokens.special)
        n_words = 1 + max((w for w in tokens.word_ids if w is not None), default=-1)
        # a relation survives only if both words were read (truncation can cut the tail)
        relations = [(name, a, b) for name, a, b in zip(row["rel_names"], row["rel_from"], row["rel_to"])
                     if a < n_words and b < n_words]
        out.update(
            n_tokens=len(tokens), n_words=n_words, tokens_dropped=int(result.meta.get("dropped", 0)), labels=list(tokens.labels), kinds=kinds.tolist(),
            word_ids=[-1 if w is None else w for w in tokens.word_ids], stats=sentence_stats(P, kinds),
            rel_names=[r[0] for r in relations], rel_from=[r[1] for r in relations], rel_to=[r[2] for r in relations],
            rel_pred=relation_predictions(P, tokens.word_ids, [r[1] for r in relations]),
        )
        if row["priority"] < self.js_below:
            out["js"] = upper(js_divergences(P))
        if row["priority"] < self.sample_below:
            out["sampled"] = True
            n = len(tokens)
            if self.d_k:  # (L, H, n, d_k) → per layer (n, H·d_k): a token's heads side by side (keys: KV heads)
                for kind in ("q", "k"):
                    out[kind] = result.stack(kind, *self.group).transpose(0, 2, 1, 3).reshape(self.layers, n, -1)
            if states is not None:
                out["h"] = states
        return out
