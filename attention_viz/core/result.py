"""AttentionResult: what one run of a model produced, as plain numpy — the hand-off from the
backends to the figures.

Arrays are keyed by hook name (``encoder.layers.0.self_attn.pattern`` ...), float32, with the batch
dimension dropped: patterns and scores are ``[heads, query, key]``, q/k/v/context
``[heads, positions, d_k]``. :meth:`AttentionResult.stack` gives one kind for every layer as
``[layers, heads, query, key]``.

On disk (``.npz``): ``tokens`` (display labels; ``target_tokens`` too for encoder–decoder models),
every array under its hook name, and ``meta``, a JSON string with the model name, full token
records and the run's meta (its ``provenance`` among them: where the result came from).
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .names import GROUPS, Group, hook_name, parse_hook_name
from .provenance import Provenance
from ..inputs.tokens import Tokens

if TYPE_CHECKING:  # the recorder needs torch; a result read from disk does not
    from .hooks import Recorder

@dataclass
class AttentionResult:
    model: str
    tokens: Tokens  # what the encoder (or the decoder-only model) read
    arrays: dict[str, np.ndarray]
    target_tokens: Tokens | None = None  # the decoder's tokens of an encoder–decoder model
    meta: dict = field(default_factory=dict)  # e.g. truncation notes, generated text

    @classmethod
    def from_recorder(
        cls,
        model: str,
        tokens: Tokens,
        recorder: Recorder,
        target_tokens: Tokens | None = None,
        meta: dict | None = None,
    ) -> AttentionResult:
        """Drop the batch dimension (item 0) and move to numpy float32.

        When a hook fired once per decoding step, the last step is kept: the decoder is causal, so
        the last step's rows for earlier positions equal what earlier steps computed.
        """
        arrays = {}
        for name in recorder.names_recorded():
            tensor = recorder.steps(name)[-1][0]
            arrays[name] = tensor.float().cpu().numpy()
        return cls(model, tokens, arrays, target_tokens, dict(meta or {}))

    @property
    def provenance(self) -> Provenance:
        """Where this result came from (the backend that made it says, in ``meta["provenance"]``); a
        result saved before results carried one is told from its model, text and target."""
        if "provenance" in self.meta:
            return Provenance.from_dict(self.meta["provenance"])
        return Provenance(self.model, str(self.meta.get("implementation", "")), self.tokens.text,
                          self.meta.get("target"))

    def with_provenance(self, provenance: Provenance) -> AttentionResult:
        """The same arrays (shared, not copied) under another provenance, e.g. the file a text came from."""
        return replace(self, meta={**self.meta, "provenance": provenance.to_dict()})

    def attentions(self) -> list[Group]:
        """The attentions present, in view order, e.g. [("encoder", "self_attn"), ("decoder", "cross_attn")]."""
        present = {parse_hook_name(name)[0] for name in self.arrays}
        return [group for group in GROUPS if group in present]

    def n_layers(self, part: str = "encoder", attn: str = "self_attn") -> int:
        return len({layer for group, layer, _ in map(parse_hook_name, self.arrays) if group == (part, attn)})

    def has(self, group: Group, layer: int, kind: str = "pattern") -> bool:
        return hook_name(group, layer, kind) in self.arrays

    def array(self, group: Group, layer: int, kind: str = "pattern") -> np.ndarray:
        """One captured array, e.g. the ``[heads, query, key]`` pattern of one layer."""
        name = hook_name(group, layer, kind)
        if name not in self.arrays:
            raise KeyError(f"{name} was not captured")
        return self.arrays[name]

    def pattern(self, group: Group, layer: int, head: int | None = None) -> np.ndarray:
        """The attention pattern of one layer ``[heads, query, key]``, or of one head ``[query, key]``."""
        layer_pattern = self.array(group, layer, "pattern")
        return layer_pattern if head is None else layer_pattern[head]

    def kv_heads(self, group: Group) -> int | None:
        """How many K/V heads the query heads of ``group`` share (grouped-query attention: fewer than
        the query heads), from the captured keys or values; None when neither was captured."""
        for kind in ("k", "v"):
            if self.has(group, 0, kind):
                return int(self.array(group, 0, kind).shape[0])
        return None

    def stack(self, kind: str = "pattern", part: str = "encoder", attn: str = "self_attn") -> np.ndarray:
        """Every layer's ``kind`` for one attention, as ``[layers, heads, ...]``."""
        names = [hook_name((part, attn), i, kind) for i in range(self.n_layers(part, attn))]
        missing = [n for n in names if n not in self.arrays]
        if not names or missing:
            raise KeyError(f"no {kind!r} captured for {part}.{attn} (missing: {missing or 'all layers'})")
        return np.stack([self.arrays[n] for n in names])

    def save_npz(self, path: str | Path | io.BytesIO) -> None:
        payload: dict[str, np.ndarray] = {"tokens": np.array(self.tokens.labels, dtype=str)}
        if self.target_tokens is not None:
            payload["target_tokens"] = np.array(self.target_tokens.labels, dtype=str)
        meta = {
            "model": self.model,
            "tokens": self.tokens.to_dict(),
            "target_tokens": None if self.target_tokens is None else self.target_tokens.to_dict(),
            "meta": self.meta,
        }
        payload["meta"] = np.array(json.dumps(meta, ensure_ascii=False))
        payload.update(self.arrays)
        # Stored, not deflated: float32 weights barely compress, and deflating them would cost CPU
        # seconds in the CLI and in every download from the app.
        np.savez(path, **payload)

    def to_npz_bytes(self) -> bytes:
        buffer = io.BytesIO()
        self.save_npz(buffer)
        return buffer.getvalue()

    def to_json(self) -> str:
        """Tokens and every array as nested lists (large: meant for small inputs and other tools)."""
        return json.dumps(
            {
                "model": self.model,
                "tokens": self.tokens.to_dict(),
                "target_tokens": None if self.target_tokens is None else self.target_tokens.to_dict(),
                "meta": self.meta,
                "arrays": {name: array.round(6).tolist() for name, array in self.arrays.items()},
            },
            ensure_ascii=False,
        )

    @classmethod
    def load_npz(cls, path: str | Path) -> AttentionResult:
        with np.load(path, allow_pickle=False) as data:
            meta = json.loads(str(data["meta"]))
            arrays = {k: data[k] for k in data.files if k not in ("tokens", "target_tokens", "meta")}
        target = meta["target_tokens"]
        return cls(
            meta["model"],
            Tokens.from_dict(meta["tokens"]),
            arrays,
            None if target is None else Tokens.from_dict(target),
            meta["meta"],
        )
