"""``python -m attention_viz caption (--scene SEED | --image FILE) --out result.npz``: caption an image
with the trained Show, Attend and Tell model and save each word's attention map
(format: :mod:`attention_viz.core.caption_result`)."""

from __future__ import annotations

import argparse

from ..errors import ModelError
from .common import add_placement_options, missing_folder, placement

MODEL = "show-attend-tell"


def add_parser(commands: argparse._SubParsersAction) -> None:
    caption = commands.add_parser("caption", help="caption an image; save each word's attention over its regions (.npz)")
    source = caption.add_mutually_exclusive_group(required=True)
    source.add_argument("--scene", type=_seed, metavar="SEED", help="a generated scene (seed 0 .. 2**63-1)")
    source.add_argument("--image", metavar="FILE", help="a PNG or JPEG file (fitted into the model's image size)")
    caption.add_argument("--out", required=True, help="where to write the .npz")
    add_placement_options(caption)


def _seed(value: str) -> int:
    try:
        seed = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"the seed must be a whole number, got {value!r}") from None
    if not 0 <= seed < 2**63:
        raise argparse.ArgumentTypeError(f"the seed must be from 0 to 2**63-1, got {seed}")
    return seed


def cmd_caption(args: argparse.Namespace) -> int:
    if not args.out.endswith(".npz"):
        raise ModelError("--out must end in .npz")
    if problem := missing_folder(args.out):
        raise ModelError(problem)
    from ..inputs.images import fit, load_image_file

    # a bad file is answered before the model loads
    image = None if args.image is None else load_image_file(args.image)
    from ..backends.registry import load_backend  # torch loads only for this command
    from ..trained.scenes import BACKGROUND

    backend = load_backend(MODEL, **placement(args))
    if image is None:
        result = backend.caption_scene(args.scene)
    else:
        result = backend.caption_image(fit(image, backend.image_size, BACKGROUND))
    result.save_npz(args.out)
    rows, cols = result.grid
    print(f"wrote {args.out}: \"{' '.join(result.words)}\" ({len(result.words)} words × {rows}×{cols} regions)")
    return 0
