"""The command line, one module per command: ``python -m attention_viz {run,export,models}``
(main.py), ``caption``, ``heads`` (with ``run --value-norms / --ablate``), ``patch``; ``atlas`` lives
with the atlas."""

from .main import main

__all__ = ["main"]
