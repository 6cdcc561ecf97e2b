"""Where an ``hf:`` spec lives on this machine: a folder, or a hub id's snapshot in the local Hugging
Face cache. No torch here: a hub id that is neither, while downloads are off, is refused before the
model code (and torch, seconds on a busy machine) is imported."""

from __future__ import annotations

from pathlib import Path

from ..errors import ModelError
from ..runtime.settings import ALLOW_DOWNLOAD_ENV, downloads_allowed


def local_folder(spec: str) -> Path | None:
    """The folder ``spec`` names: a path, or a cached hub snapshot; None when it is neither (a hub id
    to download, or a missing path that the ``transformers`` backend reports)."""
    path = Path(spec).expanduser()
    try:
        exists = path.exists()
    except OSError as error:  # a name the file system cannot look up at all (too long, …)
        raise ModelError(f"hf:{spec[:60]}… cannot be looked up as a folder: {error.strerror}") from None
    if exists:
        from ..weights.safetensors_io import check_folder

        return check_folder(path)
    from huggingface_hub import try_to_load_from_cache

    try:
        cached = try_to_load_from_cache(spec, "config.json")
    except ValueError:  # not a valid hub id either
        return None
    if isinstance(cached, str):
        return Path(cached).parent
    if not downloads_allowed():
        raise ModelError(
            f"hf:{spec} is not available offline (no such local folder, not in the Hugging Face cache); "
            f"set {ALLOW_DOWNLOAD_ENV}=1 to fetch it from the hub, or give the path of a local model folder"
        )
    return None
