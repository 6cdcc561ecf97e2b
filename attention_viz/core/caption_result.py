"""CaptionResult: one generated caption with, for every word, where the model looked — as plain
numpy, the hand-off from the captioner backend to the CLI and the image page. No torch here.

On disk (``.npz``, read with ``allow_pickle=False``):

* ``caption``   the words, a string array (n,) — ``<eos>`` not included
* ``attention`` float32 (n, grid rows, grid cols): word ``t``'s map α_t over the image regions,
  summing to 1; region (r, c) covers pixels ``[r·h, (r+1)·h) × [c·w, (c+1)·w)`` of ``image``
* ``image``     uint8 (H, W, 3): exactly the pixels the model read
* ``boxes``     (generated scenes only) a structured array, one entry per object in caption order,
  fields ``colour``, ``shape`` and ``box`` = (x0, y0, x1, y1) in pixels of ``image``
  (x1, y1 exclusive)
* ``seed``      (generated scenes only) the scene's seed
* ``meta``      JSON: model name, whether the caption ended with ``<eos>``, where it came from
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .names import CROSS
from .provenance import Provenance
from .result import AttentionResult

BOX_DTYPE = np.dtype([("colour", "U16"), ("shape", "U16"), ("box", "i4", (4,))])
EOS = "<eos>"


@dataclass(frozen=True)
class Box:
    colour: str
    shape: str
    box: tuple[int, int, int, int]  # (x0, y0, x1, y1) in pixels, x1/y1 exclusive


@dataclass
class CaptionResult:
    model: str
    words: tuple[str, ...]
    attention: np.ndarray  # (n words, rows, cols), each map sums to 1
    image: np.ndarray  # (H, W, 3) uint8
    boxes: tuple[Box, ...] | None = None  # generated scenes: the gold objects
    seed: int | None = None
    meta: dict = field(default_factory=dict)

    @property
    def provenance(self) -> Provenance:
        """Where the caption came from: the captioner and the image it read."""
        return Provenance.from_dict(self.meta.get("provenance") or {"model": self.model})

    @property
    def grid(self) -> tuple[int, int]:
        return self.attention.shape[1], self.attention.shape[2]

    @classmethod
    def from_attention(
        cls, result: AttentionResult, image: np.ndarray, boxes: tuple[Box, ...] | None = None,
        seed: int | None = None,
    ) -> CaptionResult:
        """The greedy run of a captioner: cross-attention row ``t`` (one head) is the map of the
        ``t``-th emitted word; the row that emitted ``<eos>`` is left out."""
        predicted = list(result.meta["predicted"])
        words = predicted[: predicted.index(EOS)] if EOS in predicted else predicted
        rows, cols = result.meta["grid"]
        pattern = result.pattern(CROSS, 0, head=0)  # (steps, regions)
        attention = pattern[: len(words)].reshape(len(words), rows, cols).astype(np.float32)
        meta = {"finished": EOS in predicted, "provenance": result.provenance.to_dict()}
        return cls(result.model, tuple(words), attention, image, boxes, seed, meta)

    def save_npz(self, path: str | Path | io.BytesIO) -> None:
        payload: dict[str, np.ndarray] = {
            "caption": np.array(self.words, dtype=str).reshape(len(self.words)),
            "attention": self.attention.astype(np.float32),
            "image": self.image.astype(np.uint8),
            "meta": np.array(json.dumps({"model": self.model, **self.meta})),
        }
        if self.boxes is not None:
            payload["boxes"] = np.array([(b.colour, b.shape, b.box) for b in self.boxes], dtype=BOX_DTYPE)
        if self.seed is not None:
            payload["seed"] = np.array(self.seed, dtype=np.int64)
        np.savez_compressed(path, **payload)

    def to_npz_bytes(self) -> bytes:
        buffer = io.BytesIO()
        self.save_npz(buffer)
        return buffer.getvalue()

    @classmethod
    def load_npz(cls, path: str | Path | io.BytesIO) -> CaptionResult:
        with np.load(path, allow_pickle=False) as data:
            meta = json.loads(str(data["meta"]))
            boxes = None
            if "boxes" in data.files:
                boxes = tuple(Box(str(b["colour"]), str(b["shape"]), tuple(int(v) for v in b["box"]))
                              for b in data["boxes"])
            seed = int(data["seed"]) if "seed" in data.files else None
            model = meta.pop("model")
            return cls(model, tuple(str(w) for w in data["caption"]), data["attention"], data["image"],
                       boxes, seed, meta)
