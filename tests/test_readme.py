"""The README is a front door: short, and its code runs as printed."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_readme_stays_a_front_door():
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 200


def test_the_capture_and_patch_example_runs_as_printed():
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Capturing attention"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)  # noqa: S102 - our own README's example
    assert tuple(namespace["logits"].shape[:2]) == (1, 12)
    assert namespace["cap"]["decoder.layers.1.self_attn.pattern"].shape == (1, 4, 12, 12)
