"""What every command shares: one-line errors on stderr with the usage exit code, the check of
an ``--out`` folder before a model runs for nothing, and ``--device`` / ``--dtype`` for the commands
that run a model."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..runtime.device import DEVICE_ENV, DEVICES, DTYPE_ENV, DTYPES

EXIT_USAGE = 2


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse prints the whole usage; one line is enough
        raise SystemExit(fail(f"{message} (see --help)"))


def fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return EXIT_USAGE


def missing_folder(out: str) -> str | None:
    """The error for an ``--out`` whose folder does not exist, found before a model runs for nothing."""
    folder = Path(out).parent
    return None if folder.is_dir() else f"--out: the folder {folder} does not exist"


def add_placement_options(command: argparse.ArgumentParser) -> None:
    command.add_argument("--device", choices=DEVICES,
                         help=f"where the model runs (default: {DEVICE_ENV}, else auto: CUDA when torch sees a GPU, "
                              "else the CPU)")
    command.add_argument("--dtype", choices=DTYPES,
                         help=f"the weights' type (default: {DTYPE_ENV}, else float32 on the CPU, bfloat16 on CUDA); "
                              "attention scores and patterns are computed in float32 either way")


def placement(args: argparse.Namespace) -> dict[str, str | None]:
    """``--device`` / ``--dtype`` as load_backend's keywords (which checks them after the model's name,
    so a misspelt model is still answered before torch loads)."""
    return {"device": args.device, "dtype": args.dtype}
