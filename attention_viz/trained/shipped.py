"""Where the demo models we train are shipped, and whether a folder holds all their files, without
torch: `python -m attention_viz models` and the app's model list answer from this alone."""

from __future__ import annotations

from pathlib import Path

from ..errors import ModelError

MODELS_DIR = Path(__file__).resolve().parent / "models"  # the shipped models
TRANSFORMER_FILES = ("config.json", "model.safetensors", "src_vocab.json", "tgt_vocab.json")  # also the RNN's
CAPTIONER_FILES = ("config.json", "model.safetensors", "vocab.json")


def missing(folder: Path, files: tuple[str, ...]) -> list[str]:
    return [name for name in files if not (folder / name).is_file()]


def shipped_folder(name: str, files: tuple[str, ...], train_command: str) -> Path:
    """The repo folder of the shipped model ``name``; ModelError, saying how to train it, when files are missing."""
    folder = MODELS_DIR / name
    absent = missing(folder, files)
    if absent:
        raise ModelError(f"{name} is not trained: {folder} lacks {', '.join(absent)} (run {train_command})")
    return folder
