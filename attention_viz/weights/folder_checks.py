"""A model folder checked before any loader reads it: a config, a tokenizer, and weights stored once.

Every folder that loads, in our own model or through ``transformers``, passes these checks first, so a
new family gets them without code of its own. ``transformers`` alone would run on what it finds: a
folder without tokenizer files yields a tokenizer that reads every word as the unknown token, a tensor
stored twice (under two names, or in two shards) loads whichever copy it meets, and a damaged weights
file ends in a traceback.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import ModelError
from .safetensors_io import SafetensorsFolder, check_folder, read_config

# The files a tokenizer is read from: the fast tokenizer's one file, WordPiece/BPE vocabularies, and
# sentencepiece models (tokenizer.model, spiece.model, Marian's source.spm …).
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json")
TOKENIZER_SUFFIXES = (".model", ".spm")


def has_tokenizer(folder: Path) -> bool:
    """Whether ``folder`` holds any file a tokenizer is read from."""
    return any((folder / name).is_file() for name in TOKENIZER_FILES) or any(
        path.is_file() and path.suffix in TOKENIZER_SUFFIXES for path in folder.iterdir()
    )


def check_model_folder(folder: str | Path, name: str) -> SafetensorsFolder:
    """The folder's weights (headers read, no tensor), after checking what every load needs.

    ModelError (one line, naming ``name``) for a missing or broken config.json, no tokenizer files,
    pickle-only or missing weights, a file that is not readable safetensors (empty, truncated), a tensor
    stored twice or an index that disagrees with its shards.
    """
    path = check_folder(folder)
    read_config(path)
    weights = SafetensorsFolder(path)
    if not has_tokenizer(path):
        raise ModelError(f"{name} has no tokenizer files in {path} (expected tokenizer.json, vocab.txt, "
                         "vocab.json or a sentencepiece model): without one every word would be the unknown token")
    return weights
