"""Reading a checkpoint folder safely: ``config.json`` plus safetensors weights, never a pickle.

A Hugging Face style folder holds ``config.json`` and either ``model.safetensors`` or, for large
models, shards listed in ``model.safetensors.index.json``. Older folders carry only
``pytorch_model.bin`` (or ``*.pt``/``*.pth``/``*.ckpt``): a Python pickle, and unpickling can run
arbitrary code, so such folders are refused with a message that says how to convert them.

Every problem a user can fix (missing folder, broken JSON, no safetensors file) is a one-line
:class:`~attention_viz.errors.ModelError`. Every loader and the ``hf:`` backend go through these
checks; the loaders read the weights through :class:`SafetensorsFolder`, one tensor at a time.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open

from ..errors import ModelError

SINGLE_FILE = "model.safetensors"
SHARD_INDEX = "model.safetensors.index.json"
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")
CONVERT_HINT = (
    "Convert it where you trust the file, e.g. python -c \"import torch; from safetensors.torch import "
    "save_file; sd = torch.load('pytorch_model.bin', weights_only=True); "
    "save_file({k: v.clone() for k, v in sd.items()}, 'model.safetensors', metadata={'format': 'pt'})\""
)


def check_folder(folder: str | Path) -> Path:
    """``folder`` as a Path, or a ModelError if it is not an existing directory."""
    path = Path(folder).expanduser()
    if not path.exists():
        raise ModelError(f"model folder {path} does not exist")
    if not path.is_dir():
        raise ModelError(f"{path} is not a folder (expected config.json and model.safetensors inside)")
    return path


def read_config(folder: str | Path) -> dict:
    """The parsed ``config.json`` of ``folder``; ModelError if missing or not a JSON object."""
    path = check_folder(folder) / "config.json"
    return _read_json_object(path, what="config.json")


def pickle_checkpoints(folder: Path) -> list[str]:
    """Names of the pickle checkpoint files in ``folder`` (``pytorch_model.bin`` ...), sorted."""
    return sorted(p.name for p in folder.iterdir() if p.is_file() and p.suffix in PICKLE_SUFFIXES)


def safetensors_files(folder: str | Path) -> list[Path]:
    """The weight files of ``folder``: ``model.safetensors``, or every shard named by the index.

    Raises ModelError when there is none (refusing pickle-only folders explicitly) or a shard the
    index names is missing. Reads no tensors, so it is cheap enough to call as a pre-check.
    """
    folder = check_folder(folder)
    single = folder / SINGLE_FILE
    if single.is_file():
        return [single]
    weight_map = shard_map(folder)
    if weight_map is not None:
        shards = [folder / name for name in sorted(set(weight_map.values()))]
        missing = [s.name for s in shards if not s.is_file()]
        if missing:
            raise ModelError(f"{folder}: shards named in {SHARD_INDEX} are missing: {', '.join(missing)}")
        return shards
    pickles = pickle_checkpoints(folder)
    if pickles:
        raise ModelError(
            f"{folder} holds only a pickle checkpoint ({', '.join(pickles)}); attention-viz loads "
            f"safetensors only, because unpickling can run arbitrary code. {CONVERT_HINT}"
        )
    raise ModelError(f"{folder} has no {SINGLE_FILE} (nor {SHARD_INDEX})")


def shard_map(folder: Path) -> dict[str, str] | None:
    """The index's tensor name → shard file name, or None when the folder has no index.

    ModelError when the index has no ``weight_map`` or names a file outside the folder.
    """
    index = folder / SHARD_INDEX
    if not index.is_file():
        return None
    weight_map = _read_json_object(index, what=SHARD_INDEX).get("weight_map")
    if not isinstance(weight_map, dict) or not weight_map:
        raise ModelError(f"{index} has no 'weight_map' naming the shard files")
    weight_map = {str(name): str(shard) for name, shard in weight_map.items()}
    # a shard is a file of this folder: a path in the index ("../x") would read outside it
    strays = sorted({shard for shard in weight_map.values() if Path(shard).name != shard or shard == ".."})
    if strays:
        raise ModelError(f"{index} names shards outside the folder: {', '.join(strays[:5])}")
    return weight_map


class SafetensorsFolder:
    """The weights of a folder, tensor by tensor: names and shapes come from the files' headers (no
    tensor is read to know them), tensors are read one at a time, shard after shard, so a loader never
    holds more than the tensor it is converting besides what it has already placed.

    ModelError when a shard cannot be read, a tensor sits in two shards or under two names, or the
    index puts a tensor in a shard that does not hold it.
    """

    def __init__(self, folder: str | Path) -> None:
        folder = check_folder(folder)
        self.files = safetensors_files(folder)
        self.names_in: dict[Path, list[str]] = {file: [] for file in self.files}
        self.shapes: dict[str, tuple[int, ...]] = {}
        file_of: dict[str, Path] = {}
        for file in self.files:
            with _opened(file, "cpu") as handle:  # the header only: get_slice reads no data
                for name in handle.keys():
                    if name in file_of:
                        raise ModelError(f"tensor {name} is in two shards: {file_of[name].name} and {file.name}")
                    file_of[name] = file
                    self.names_in[file].append(name)
                    self.shapes[name] = tuple(handle.get_slice(name).get_shape())
        stored_twice(file_of)
        index = shard_map(folder) if self.files != [folder / SINGLE_FILE] else None
        for name, shard in (index or {}).items():
            held = file_of.get(name)
            if held is None or held.name != shard:
                raise ModelError(f"{SHARD_INDEX} puts tensor {name} in {shard}, which does not hold it")

    def read(self, names: Collection[str], device: str | torch.device = "cpu") -> Iterator[tuple[str, torch.Tensor]]:
        """(name, tensor) for each of ``names``, shard by shard, on ``device`` as stored (its dtype).

        A tensor read to the CPU may be a view of the mapped file: copy it (:func:`owned`) to keep it.
        """
        wanted = set(names)
        for file, inside in self.names_in.items():
            inside = [name for name in inside if name in wanted]
            if not inside:
                continue
            with _opened(file, device) as handle:
                for name in inside:
                    try:
                        tensor = handle.get_tensor(name)
                    except (SafetensorError, OSError) as error:
                        raise ModelError(f"{file}: tensor {name} cannot be read: {error}") from error
                    yield name, tensor


def stored_twice(names: Collection[str]) -> None:
    """ModelError naming a tensor stored under its bare name and again under a prefixed one (``x`` and
    ``bert.x``): a loader would take one copy, not necessarily the one the model was saved with."""
    for name in sorted(names):
        _, dot, bare = name.partition(".")
        if dot and bare in names:
            raise ModelError(f"tensor {bare} is stored twice: as {bare} and as {name}; keep the copy the model "
                             "was saved with")


def read_safetensors(
    folder: str | Path, *, device: str | torch.device = "cpu", dtype: torch.dtype | None = None
) -> dict[str, torch.Tensor]:
    """Every tensor of the folder's safetensors weights (all shards merged) on ``device``, floating
    ones in ``dtype`` (None: as stored; integer ids stay integers). Holds the whole checkpoint at
    once: the loaders stream instead."""
    source = SafetensorsFolder(folder)
    return {
        name: owned(tensor, device, dtype if dtype is not None and tensor.is_floating_point() else tensor.dtype)
        for name, tensor in source.read(source.shapes, device)
    }


def owned(tensor: torch.Tensor, device: str | torch.device, dtype: torch.dtype) -> torch.Tensor:
    """``tensor`` on ``device`` in ``dtype``, in memory of its own: never a view of a mapped file or
    of a caller's tensor, which would keep the whole file mapped or change when the caller's does."""
    result = tensor.to(device=device, dtype=dtype)
    return result.clone() if result is tensor else result


@contextmanager
def _opened(file: Path, device: str | torch.device) -> Iterator:
    """``safe_open`` with its failures (a damaged or truncated file) as a ModelError naming the file."""
    try:
        handle = safe_open(file, framework="pt", device=str(device))
    except (SafetensorError, OSError) as error:
        raise ModelError(f"{file} is not a readable safetensors file: {error}") from error
    with handle:
        yield handle


def _read_json_object(path: Path, what: str) -> dict:
    if not path.is_file():
        raise ModelError(f"{path.parent} has no {what}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ModelError(
            f"{path} is not valid JSON: {error.msg} at line {error.lineno}, column {error.colno}"
        ) from error
    except (OSError, UnicodeDecodeError) as error:
        raise ModelError(f"cannot read {path}: {error}") from error
    if not isinstance(data, dict):
        raise ModelError(f"{path} must hold a JSON object, found {type(data).__name__}")
    return data
