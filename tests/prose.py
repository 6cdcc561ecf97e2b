"""English prose for tests that need a long realistic text (not one word repeated): 3,000 words of
this repo's own documentation as a reader copies it from the rendered page (paragraphs only, no
code, tables or headings, without Markdown's marks), frozen in ``prose.txt`` so that editing the
docs never moves a measured size (the 8 KB link of a 2,500-word text)."""

from __future__ import annotations

import re
from pathlib import Path

TEXT = (Path(__file__).resolve().parent / "prose.txt").read_text(encoding="utf-8")


def english_prose(words: int = 2_500) -> str:
    """The first ``words`` words (at most 3,000), with their spacing and paragraph breaks."""
    pieces = re.findall(r"\S+\s*", TEXT)
    assert len(pieces) >= words, "prose.txt holds fewer words than the test needs"
    return "".join(pieces[:words]).rstrip()
