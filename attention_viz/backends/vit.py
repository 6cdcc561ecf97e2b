"""Vision Transformers through ``hf:``: a local folder (or cached hub snapshot) whose ``config.json``
says ``"model_type": "vit"``, run by ``transformers`` (``ViTModel``, or ``ViTForImageClassification``
when the checkpoint has its classifier) with our attention function in its attention registry
(backends/hf_attention.py): every layer's q, k, v, scores, pattern and context at our hook points, as
for every other ``transformers`` model.

An image goes in, cut into a grid of ``patch_size`` squares; the tokens are ``[CLS]`` then
``patch (r, c)`` row by row, and every layer's self-attention comes back as
``encoder.layers.{i}.self_attn.pattern`` ``[heads, 1 + rows·cols, 1 + rows·cols]``. The image is
first fitted into the model's ``image_size`` square (the pixels shown under the maps are exactly
the ones it read), then rescaled and normalized by the folder's image processor when it has a
``preprocessor_config.json``, else by ViT's own ``(x/255 − 0.5) / 0.5``.

Like the captioner, ``run(text)`` reads ``text`` as a generated scene (``scene 7``); images go
through :meth:`ViTBackend.run_image`. ``meta["patch_grid"]`` = ``[rows, cols]``.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from safetensors import SafetensorError

from ..analysis.patches import patch_labels
from ..errors import ModelError
from ..inputs.images import fit
from ..core.hooks import KINDS, capture
from ..core.result import AttentionResult
from ..core.provenance import image_of, run_of
from ..inputs.tokens import Tokens
from ..trained import scenes
from ..weights.safetensors_io import read_config, safetensors_files
from .base import Backend
from .hf_attention import IMPLEMENTATION, register
from .hf_model import RegistryModel
from .hub import local_folder

MODEL_TYPE = "vit"
CLASSIFIER = "ViTForImageClassification"
PROCESSOR_FILE = "preprocessor_config.json"
MEAN = STD = 0.5  # ViT's own normalization (Dosovitskiy et al.), when the folder names none
_SCENE = re.compile(r"^\s*(?:scene\s*)?(\d{1,19})\s*$", re.IGNORECASE)


def open_vit(spec: str) -> Backend | None:
    """The ViT backend for ``hf:spec`` when its config says ``model_type: vit``, else None."""
    folder = local_folder(spec)
    if folder is None or read_config(folder).get("model_type") != MODEL_TYPE:
        return None
    return ViTBackend(f"hf:{spec}", folder)


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def patch_tokens(rows: int, cols: int) -> Tokens:
    """``[CLS]`` (special) and one token per patch; ids are positions, ``text`` the patch labels."""
    labels = patch_labels(rows, cols)
    offsets: list[tuple[int, int] | None] = [None]
    position = 0
    for label in labels[1:]:
        offsets.append((position, position + len(label)))
        position += len(label) + 2  # the "; " between labels
    n = len(labels)
    return Tokens(
        text="; ".join(labels[1:]), ids=tuple(range(n)), labels=tuple(labels), offsets=tuple(offsets),
        special=(True,) + (False,) * (n - 1), unknown=(False,) * n, word_ids=(None, *range(n - 1)),
    )


class ViTBackend(Backend):
    """A ``transformers`` ViT in eval mode, shared by every session: nothing is written to the object
    after construction, and each call's attention comes back in its own return value."""

    shape = "encoder-only"
    kinds = KINDS
    implementation = "transformers"

    def __init__(self, name: str, folder: Path) -> None:
        # imported here: every hf: folder passes through open_vit, and text models need no image stack
        from transformers import AutoImageProcessor, ViTConfig, ViTForImageClassification, ViTModel

        from .hf import check_loading

        self.name = name
        safetensors_files(folder)  # refuses pickle-only folders before transformers reads anything
        config = self._load("config", ViTConfig, folder)
        size, patch = config.image_size, config.patch_size
        if not (isinstance(size, int) and isinstance(patch, int) and 0 < patch <= size and size % patch == 0):
            raise ModelError(f"{name}: image_size {size!r} must be a whole number of patch_size {patch!r} squares")
        if config.num_channels != 3:
            raise ModelError(f"{name} reads {config.num_channels}-channel images; attention-viz feeds RGB")
        self.image_size = size
        self.patch_size = patch
        self.patch_grid = (size // patch, size // patch)
        self.tokens = patch_tokens(*self.patch_grid)
        self.max_tokens = len(self.tokens)
        self.classifies = CLASSIFIER in (config.architectures or ())
        # The pooler is unused by attention and absent from classifier checkpoints: not built.
        model_class = ViTForImageClassification if self.classifies else ViTModel
        extra = {} if self.classifies else {"add_pooling_layer": False}
        register()
        model, loading = self._load("model", model_class, folder, attn_implementation=IMPLEMENTATION,
                                    use_safetensors=True, dtype=torch.float32, output_loading_info=True,
                                    ignore_mismatched_sizes=True, **extra)
        check_loading(self.name, model, loading)  # the checkpoint's own weights, or a sentence naming what differs
        self.model = model.eval()
        blank = torch.zeros(1, config.num_channels, size, size)
        self.registry = RegistryModel.attach(self.model, self.shape, lambda: self.model(pixel_values=blank), 0, name)
        if self.registry is None:
            raise ModelError(f"{name}: its attention does not go through transformers' attention registry")
        self.id2label = dict(config.id2label or {})
        has_processor = (folder / PROCESSOR_FILE).is_file()
        self.processor = self._load("image processor", AutoImageProcessor, folder) if has_processor else None

    def _load(self, what: str, loader: type, folder: Path, **kwargs):
        try:
            return loader.from_pretrained(folder, local_files_only=True, trust_remote_code=False, **kwargs)
        except (OSError, ValueError, KeyError, TypeError, RuntimeError, SafetensorError) as error:
            raise ModelError(f"{self.name}: cannot load the {what}: {_first_line(error)}") from None

    # -- input -----------------------------------------------------------------------------------
    def scene_image(self, seed: int) -> np.ndarray:
        """Generated scene ``seed`` fitted to the model's input size: the pixels :meth:`run` reads."""
        return fit(Image.fromarray(scenes.generate(seed).image), self.image_size, scenes.BACKGROUND)

    def pixel_values(self, image: np.ndarray) -> torch.Tensor:
        """``(S, S, 3)`` uint8 → ``(1, 3, S, S)`` float32 as the checkpoint expects it. The image is
        already the model's size, so the processor only rescales and normalizes."""
        if self.processor is not None:
            try:
                return self.processor(images=image, do_resize=False, return_tensors="pt")["pixel_values"].float()
            except (ValueError, TypeError, KeyError) as error:
                raise ModelError(f"{self.name}: its image processor failed: {_first_line(error)}") from None
        scaled = (image.astype(np.float32) / 255.0 - MEAN) / STD
        return torch.from_numpy(scaled.transpose(2, 0, 1).copy())[None]  # (1, 3, S, S)

    # -- running ---------------------------------------------------------------------------------
    def tokenize(self, text: str) -> tuple[Tokens, int]:
        """The patch tokens of the scene ``text`` names (they do not depend on the image)."""
        self._parse_scene(text)
        return self.tokens, 0

    def _parse_scene(self, text: str) -> int:
        match = _SCENE.match(text or "")
        seed = int(match.group(1)) if match else -1
        if not 0 <= seed <= scenes.MAX_SEED:
            raise ModelError(f"{self.name} is a Vision Transformer: it reads images, not sentences. Give a scene "
                             "seed such as 'scene 7', or use the Image attention page")
        return seed

    def run(self, text: str, target: str | None = None, kinds: Collection[str] | None = ("pattern",)
            ) -> AttentionResult:
        if target is not None:
            raise ModelError(f"{self.name} is an image encoder: it takes no target text")
        seed = self._parse_scene(text)
        return self.run_image(self.scene_image(seed), kinds, meta={"seed": seed})

    def run_image(
        self, image: np.ndarray, kinds: Collection[str] | None = ("pattern",), meta: dict | None = None
    ) -> AttentionResult:
        """One forward on ``image`` ((S, S, 3) uint8, S = ``image_size``) with every layer's attention."""
        unknown = sorted(set(kinds or ()) - set(KINDS))
        if unknown:
            raise ModelError(f"{self.name} captures {', '.join(KINDS)}, not {unknown}")
        size = self.image_size
        if image.shape != (size, size, 3) or image.dtype != np.uint8:
            raise ModelError(f"{self.name} reads {size}×{size} RGB images (uint8), got {image.shape} {image.dtype}")
        with torch.inference_mode(), capture(kinds=kinds) as recorded:
            out = self.model(pixel_values=self.pixel_values(image))
        meta = {**(meta or {}), "dropped": 0, "implementation": self.implementation, "attention": "registry",
                "patch_grid": list(self.patch_grid), "image_size": size, "patch_size": self.patch_size}
        meta["provenance"] = run_of(self.name, self.implementation, image_of(meta.get("seed")))
        if self.classifies:
            probabilities = out.logits[0].softmax(-1)
            top = int(probabilities.argmax())
            meta["label"] = str(self.id2label.get(top, top))
            meta["label_probability"] = float(probabilities[top])
        return AttentionResult.from_recorder(self.name, self.tokens, recorded, meta=meta)
