import sys

from .runtime.settings import apply_process_settings

apply_process_settings()  # before the CLI imports torch

from .cli import main  # noqa: E402

sys.exit(main())
