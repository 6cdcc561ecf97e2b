"""Reading a checkpoint folder safely: ``config.json`` plus safetensors weights, never a pickle.

A Hugging Face style folder holds ``config.json`` and either ``model.safetensors`` or, for large
models, shards listed in ``model.safetensors.index.json``. Older folders carry only
``pytorch_model.bin`` (or ``*.pt``/``*.pth``/``*.ckpt``): a Python pickle, and unpickling can run
arbitrary code, so such folders are refused with a message that says how to convert them.

Every problem a user can fix (missing folder, broken JSON, no safetensors file) is a one-line
:class:`~attention_viz.backends.base.ModelError`. The BERT and GPT-2 loaders and the ``hf:``
backend all go through these checks.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file

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
    index = folder / SHARD_INDEX
    if index.is_file():
        weight_map = _read_json_object(index, what=SHARD_INDEX).get("weight_map")
        if not isinstance(weight_map, dict) or not weight_map:
            raise ModelError(f"{index} has no 'weight_map' naming the shard files")
        names = sorted(set(map(str, weight_map.values())))
        # a shard is a file of this folder: a path in the index ("../x") would read outside it
        strays = [name for name in names if Path(name).name != name or name == ".."]
        if strays:
            raise ModelError(f"{index} names shards outside the folder: {', '.join(strays[:5])}")
        shards = [folder / name for name in names]
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


def read_safetensors(folder: str | Path) -> dict[str, torch.Tensor]:
    """Every tensor of the folder's safetensors weights (all shards merged), on the CPU."""
    tensors: dict[str, torch.Tensor] = {}
    for file in safetensors_files(folder):
        try:
            tensors.update(load_file(file, device="cpu"))
        except (SafetensorError, OSError) as error:
            raise ModelError(f"{file} is not a readable safetensors file: {error}") from error
    return tensors


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
