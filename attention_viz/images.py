"""Images from users (an upload, a file on the command line) → the small RGB array a captioner reads.

Only PNG and JPEG are accepted, and only up to :data:`MAX_BYTES` and :data:`MAX_PIXELS` (checked
from the header, before any pixel is decoded, so a decompression bomb costs nothing). The image is
turned upright (EXIF orientation), transparent parts are laid on the background colour, and it is
fitted into a ``size × size`` square without distortion (letterboxed with the background colour).
Every refusal is a :class:`ModelError` with a one-line reason. No torch here.
"""

from __future__ import annotations

import io
import warnings
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from .errors import ModelError

FORMATS = ("PNG", "JPEG")
MAX_BYTES = 20_000_000
MAX_PIXELS = 40_000_000  # e.g. 8000 × 5000


def read_image_file(path: str | Path, size: int, background: tuple[int, int, int]) -> np.ndarray:
    """The image in ``path`` as (size, size, 3) uint8; ModelError when it is missing, huge or not an image."""
    path = Path(path)
    if not path.is_file():
        raise ModelError(f"no such image file: {path}")
    if path.stat().st_size > MAX_BYTES:
        raise ModelError(f"{path.name} is {path.stat().st_size / 1e6:.1f} MB; images up to {MAX_BYTES / 1e6:.0f} MB only")
    return read_image(path.read_bytes(), size, background, path.name)


def read_image(data: bytes, size: int, background: tuple[int, int, int], name: str = "the file") -> np.ndarray:
    """PNG/JPEG bytes → (size, size, 3) uint8, letterboxed; ModelError for anything else."""
    if not data:
        raise ModelError(f"{name} is empty")
    if len(data) > MAX_BYTES:
        raise ModelError(f"{name} is {len(data) / 1e6:.1f} MB; images up to {MAX_BYTES / 1e6:.0f} MB only")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(data), formats=FORMATS)
            width, height = image.size
            if width * height > MAX_PIXELS:
                raise ModelError(f"{name} is {width}×{height} pixels; images up to {MAX_PIXELS / 1e6:.0f} megapixels only")
            image.load()
    except ModelError:
        raise
    except UnidentifiedImageError:
        raise ModelError(f"{name} is not a PNG or JPEG image") from None
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError, Image.DecompressionBombWarning) as error:
        raise ModelError(f"{name} could not be read as an image ({type(error).__name__})") from None
    return fit(image, size, background)


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
