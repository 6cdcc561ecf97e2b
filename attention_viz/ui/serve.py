"""``make run``: Streamlit serving app.py, with what the first page needs made ready before it answers.

Streamlit runs app.py only once a visitor's session starts, so a fresh server would import torch and
the pages' libraries, load the default model and run its sentence while its first visitor waits. This
process does that first, then starts Streamlit's own command line on app.py with the same flags: the
imported modules and the model registry belong to the process, so the first page finds them ready.
Before the server starts, not beside it: a page importing the same modules meanwhile could meet them
half-imported (Plotly's lazy submodules).

    python -m attention_viz.ui.serve [streamlit run's flags, e.g. --server.port 8501]
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from ..runtime.settings import apply_process_settings

APP = Path(__file__).resolve().parents[2] / "app.py"


def warm_up() -> None:
    """Import what the landing view imports, load the default model and run it once on the default
    sentence (its first forward costs more than the next). A failure is logged, never fatal: the first
    visitor then pays as before and sees the page's own message. Nothing here reads Streamlit's config:
    its command line sets the flags below."""
    try:
        import pandas  # noqa: F401  (what app.py imports at a server's first run)
        import plotly.graph_objects  # noqa: F401
        import plotly.io  # noqa: F401
        import pyarrow  # noqa: F401

        from ..backends.registry import DEFAULT_MODEL, load_backend
        from . import cache  # noqa: F401
        from .state import DEFAULT_TEXT
        from .views import head  # noqa: F401  (the landing view)

        load_backend(DEFAULT_MODEL).run(DEFAULT_TEXT)
    except Exception:  # never keep the server from starting over a warm-up
        logging.getLogger("attention_viz").exception("warming the default model up failed")


def main(argv: Sequence[str]) -> None:
    apply_process_settings()  # before anything imports torch, as app.py does
    warm_up()
    from streamlit.web import cli

    cli.main(["run", str(APP), *argv], prog_name="streamlit")


if __name__ == "__main__":
    main(sys.argv[1:])
