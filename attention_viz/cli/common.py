"""What every command shares: one-line errors on stderr with the usage exit code, and the check of
an ``--out`` folder before a model runs for nothing."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

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
