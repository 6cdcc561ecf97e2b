"""The trained Show, Attend and Tell captioner (``show-attend-tell``) behind the common interface.

Its "source tokens" are the image regions (row-major, labelled ``r,c``); its decoder writes the
caption. Like the translators it runs in two data flows: greedy decoding (inference, the default)
or teacher forcing on a given caption (``target``). The attention of every step is captured as
``decoder.layers.0.cross_attn.pattern`` (1 head, rows = decoder inputs ``<bos>`` + words, keys =
regions), so the encoder–decoder views work on it unchanged.

``run(text)`` reads ``text`` as the name of a generated scene (``scene 7`` or ``7``); images
(uploads, files) go through :meth:`CaptionerBackend.run_image`, and :meth:`caption_scene` /
:meth:`caption_image` give the per-word maps as a :class:`~attention_viz.core.caption_result.CaptionResult`.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from pathlib import Path

import numpy as np
import torch

from ..core.caption_result import Box, CaptionResult
from ..errors import ModelError
from ..core.hooks import capture
from ..core.result import AttentionResult
from ..core.provenance import image_of, run_of
from ..inputs.tokens import Tokens, from_words
from ..trained import caption_checkpoint, scenes
from ..trained.captioner import images_to_tensor
from ..trained.vocab import Vocab
from .base import Backend

NAME = "show-attend-tell"
KINDS = ("scores", "pattern")  # additive attention: no queries/keys/values to show
_SCENE = re.compile(r"^\s*(?:scene\s*)?(\d{1,19})\s*$", re.IGNORECASE)


def parse_scene(text: str) -> int:
    """``scene 7`` / ``7`` → 7; ModelError for anything else."""
    match = _SCENE.match(text or "")
    seed = int(match.group(1)) if match else -1
    if not 0 <= seed <= scenes.MAX_SEED:
        raise ModelError(
            f"{NAME} captions images, not sentences: give a scene seed such as 'scene 7', or use the "
            "Image attention page or `python -m attention_viz caption --image FILE`"
        )
    return seed


class CaptionerBackend(Backend):
    shape = "encoder-decoder"
    kinds = KINDS

    def __init__(self, name: str, trained: caption_checkpoint.TrainedCaptioner) -> None:
        self.name = name
        self.model = trained.model.eval()
        self.vocab = trained.vocab
        self.training = trained.training
        self.config = self.model.config
        self.max_tokens = self.config.regions
        grid = self.config.grid
        labels = [f"{r},{c}" for r in range(grid) for c in range(grid)]
        self.region_tokens = from_words(labels, list(range(len(labels))), [False] * len(labels))

    @classmethod
    def from_folder(cls, name: str, folder: Path) -> CaptionerBackend:
        try:
            return cls(name, caption_checkpoint.load(folder))
        except ValueError as error:
            raise ModelError(str(error)) from None

    @property
    def image_size(self) -> int:
        return self.config.image_size

    def tokenize(self, text: str) -> tuple[Tokens, int]:
        """The image regions of the scene ``text`` names (they do not depend on its content)."""
        parse_scene(text)
        return self.region_tokens, 0

    def run(self, text: str, target: str | None = None, kinds: Collection[str] = ("pattern",)) -> AttentionResult:
        seed = parse_scene(text)
        return self.run_image(scenes.generate(seed).image, target, kinds, meta={"seed": seed})

    def run_image(
        self, image: np.ndarray, target: str | None = None, kinds: Collection[str] = ("pattern",),
        meta: dict | None = None,
    ) -> AttentionResult:
        """Caption ``image`` ((S, S, 3) uint8, S = the model's image size): greedy, or teacher-forced on ``target``."""
        kinds = tuple(kinds)
        refused = [k for k in kinds if k not in self.kinds]
        if refused:
            raise ModelError(f"{self.name} captures only {', '.join(self.kinds)} (its attention is additive: "
                             f"there are no {', '.join(refused)})")
        size = self.image_size
        if image.shape != (size, size, 3) or image.dtype != np.uint8:
            raise ModelError(f"{self.name} reads {size}×{size} RGB images (uint8), got {image.shape} {image.dtype}")
        pixels = images_to_tensor([image])
        meta = {**(meta or {}), "dropped": 0, "implementation": self.implementation,
                "grid": [self.config.grid, self.config.grid], "image_size": size}
        meta["provenance"] = run_of(self.name, self.implementation, image_of(meta.get("seed")), target)
        with torch.inference_mode(), capture(kinds=kinds) as recorded:
            if target is None:
                ys = self.model.greedy_decode(pixels, Vocab.BOS, Vocab.EOS)[0, 1:].tolist()
                read = ys[:-1]  # the last step read these and emitted ys[-1] (normally <eos>)
                meta["flow"] = "greedy decoding (inference)"
            else:
                words = target.lower().split()
                if not words:
                    raise ModelError("empty target caption")
                read = self.vocab.encode(words[: self.config.max_len - 1])
                logits, _ = self.model(pixels, torch.tensor([[Vocab.BOS, *read]]))
                ys = logits[0].argmax(-1).tolist()
                meta["flow"] = "teacher forcing (training)"
                meta["target"] = " ".join(self.vocab.decode(read, strip=False))
        meta["predicted"] = self.vocab.decode(ys, strip=False)
        meta["caption"] = " ".join(self.vocab.decode(ys))
        decoder_tokens = from_words(["<bos>", *self.vocab.decode(read, strip=False)], [Vocab.BOS, *read],
                                    [True] + [False] * len(read), unk_id=Vocab.UNK)
        return AttentionResult.from_recorder(self.name, self.region_tokens, recorded, decoder_tokens, meta)

    def caption_image(self, image: np.ndarray) -> CaptionResult:
        """Greedy caption of an image with each word's map over the regions."""
        return CaptionResult.from_attention(self.run_image(image), image)

    def caption_scene(self, seed: int) -> CaptionResult:
        """Greedy caption of generated scene ``seed``, with its gold boxes."""
        scene = scenes.generate(seed)
        result = self.run_image(scene.image, meta={"seed": seed})
        boxes = tuple(Box(o.colour, o.shape, o.box) for o in scene.objects)
        return CaptionResult.from_attention(result, scene.image, boxes, seed)
