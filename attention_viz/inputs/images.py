"""Images from users (an upload, a file on the command line) → the small RGB array a captioner reads.

Only PNG and JPEG are accepted, and only up to :data:`MAX_BYTES` and :data:`MAX_PIXELS` (checked
from the header, before any pixel is decoded, so a decompression bomb costs nothing). The image is
turned upright (EXIF orientation), transparent parts are laid on the background colour, and it is
fitted into a ``size × size`` square without distortion (letterboxed with the background colour).
Every refusal is a :class:`ModelError` with a one-line sentence: what is wrong with the file and
what to do about it, never an exception's name. No torch here.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps, JpegImagePlugin, PngImagePlugin

from ..errors import ModelError
from .text_file import read_user_file

MAX_BYTES = 20_000_000
MAX_PIXELS = 40_000_000  # e.g. 8000 × 5000
# signature → (the format's reader, the bytes its last marker ends with: PNG's IEND chunk, JPEG's EOI).
# The readers are PIL's own classes, used directly: Image.open would first run PIL's decompression-bomb
# check, which refuses past ~179 megapixels with its own message before ours could give the size.
FORMATS = {
    b"\x89PNG\r\n\x1a\n": (PngImagePlugin.PngImageFile, b"IEND\xaeB`\x82"),
    b"\xff\xd8\xff": (JpegImagePlugin.JpegImageFile, b"\xff\xd9"),
}
AGAIN = "save it again or pick another file"


def load_image_file(path: str | Path) -> Image.Image:
    """The decoded image in ``path``, checked as :func:`load_image` checks an upload; ModelError also
    when the file is missing, a folder or not readable."""
    return load_image(read_user_file(path, MAX_BYTES, "image file"), str(path))


def read_image(data: bytes, size: int, background: tuple[int, int, int], name: str = "the file") -> np.ndarray:
    """PNG/JPEG bytes → (size, size, 3) uint8, letterboxed; ModelError for anything else."""
    return fit(load_image(data, name), size, background)


def load_image(data: bytes, name: str = "the file") -> Image.Image:
    """PNG/JPEG bytes → the decoded image; its size is checked from the header before any pixel is
    decoded. ModelError (one sentence naming ``name``) for an empty, huge, damaged or other file."""
    if not data:
        raise ModelError(f"{name} is empty (0 bytes); pick another file")
    if len(data) > MAX_BYTES:
        raise ModelError(f"{name} is {len(data) / 1e6:.1f} MB; images up to {MAX_BYTES / 1e6:.0f} MB are read")
    reader, end = next((kind for signature, kind in FORMATS.items() if data.startswith(signature)), (None, b""))
    if reader is None:
        raise ModelError(f"{name} is not a PNG or JPEG image; save it as PNG or JPEG, or pick another file")
    try:
        image = reader(io.BytesIO(data))  # reads the header only
        _check_size(image.size, name)
        image.load()
    except ModelError:
        raise
    except (OSError, SyntaxError, ValueError, EOFError):  # what PIL raises on bytes it cannot decode
        if not data.rstrip(b"\x00").endswith(end):  # the file stops before its format's last marker
            raise ModelError(f"{name} is damaged or incomplete: its image data ends early; {AGAIN}") from None
        raise ModelError(f"{name} is damaged: its image data cannot be decoded; {AGAIN}") from None
    return image


def _check_size(size: tuple[int, int], name: str) -> None:
    width, height = size
    if width * height > MAX_PIXELS:
        raise ModelError(f"{name} is {width:,} × {height:,} pixels ({_megapixels(width * height)} megapixels); "
                         f"images up to {_megapixels(MAX_PIXELS)} megapixels are read: scale it down and try again")


def _megapixels(pixels: int) -> str:
    """400, 60, 40.2: no ".0", and a size past the limit never rounded down onto it (40.008, not 40)."""
    digits = 1
    while pixels > MAX_PIXELS and round(pixels / 1e6, digits) <= MAX_PIXELS / 1e6:
        digits += 1
    return f"{pixels / 1e6:.{digits}f}".rstrip("0").rstrip(".")


def fit(image: Image.Image, size: int, background: tuple[int, int, int]) -> np.ndarray:
    """Upright, flattened on ``background``, scaled to fit a ``size`` square and centred in it."""
    image = ImageOps.exif_transpose(image)
    rgba = image.convert("RGBA")
    flat = Image.new("RGBA", rgba.size, (*background, 255))
    flat.alpha_composite(rgba)
    scale = size / max(flat.size)
    width, height = max(1, round(flat.width * scale)), max(1, round(flat.height * scale))
    resized = flat.convert("RGB").resize((width, height), Image.Resampling.BOX if scale < 1 else Image.Resampling.BILINEAR)
    canvas = Image.new("RGB", (size, size), background)
    canvas.paste(resized, ((size - width) // 2, (size - height) // 2))
    return np.asarray(canvas, dtype=np.uint8).copy()
