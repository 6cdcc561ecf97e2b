"""Numbers as the pages print them, where the difference between 0 and "tiny" is the point."""

from __future__ import annotations


def exact(value: float) -> str:
    """``0 (exactly)`` only for a true 0.0; anything else in scientific notation (``4.0e-09``),
    so a tiny weight can never pass for a masked one."""
    return "0 (exactly)" if value == 0.0 else f"{value:.1e}"
