"""English prose from the repo, for tests that need a long realistic text (not one word repeated)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("docs/deploy.md", "docs/atlas-cluster.md", "docs/notebook.md", "docs/ARCHITECTURE.md", "README.md")


def english_prose(words: int = 2_500) -> str:
    """``words`` words of English prose from the repo's documentation, as a reader copies it from the
    rendered page: paragraphs only (no code blocks, tables or headings), without Markdown's marks."""
    paragraphs: list[str] = []
    for name in SOURCES:
        fenced = False
        for block in re.split(r"\n\s*\n", (ROOT / name).read_text(encoding="utf-8")):
            lines = block.splitlines()
            fences = sum(line.lstrip().startswith("```") for line in lines)
            if fences or fenced:
                fenced ^= fences % 2 == 1
                continue
            if all(line.startswith(("|", "#", "    ", "![")) for line in lines):
                continue
            paragraph = " ".join(line.strip() for line in lines)
            paragraph = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", paragraph)  # a link reads as its text
            paragraphs.append(re.sub(r"[`*]", "", paragraph))
    pieces = re.findall(r"\S+\s*", "\n\n".join(paragraphs))
    assert len(pieces) >= words, "the docs hold fewer words than the test needs"
    return "".join(pieces[:words]).rstrip()
