"""make mutants (.ci/mutants.py): each operator makes the edit it names, at the right bytes even after
non-ASCII text (ast counts UTF-8 bytes), every mutant still parses, messages and annotations are left
alone, and a module's related tests are the files that name it or a module importing it."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("mutants", ROOT / ".ci" / "mutants.py")
mutants = sys.modules["mutants"] = importlib.util.module_from_spec(_spec)  # dataclasses look it up
_spec.loader.exec_module(mutants)

SOURCE = '''"""α · β − γ: non-ASCII before the code."""
def f(x: int = 3, y=0.5) -> float:
    if x <= 2 and y != 1:
        raise ValueError(f"x − {x + 1}")
    total = -x + y * 2
    total -= 1
    return (x - y) / total
'''.encode()


def edits() -> set[tuple[str, str]]:
    """(operator, the mutated line) of every mutant of SOURCE."""
    out = set()
    for mutant in mutants.mutants("sample.py", SOURCE):
        changed = mutant.apply(SOURCE)
        ast.parse(changed)  # every mutant is still Python
        assert changed != SOURCE
        out.add((mutant.operator, mutant.describe(SOURCE)[1]))
    return out


def test_each_operator_makes_its_edit():
    found = edits()
    expected = {
        ("change a comparison", "if x < 2 and y != 1:"),
        ("change a comparison", "if x <= 2 and y == 1:"),
        ("change a constant", "if x <= 3 and y != 1:"),
        ("flip a sign", "total = x + y * 2"),
        ("swap + and -", "total = -x - y * 2"),
        ("drop a term", "total = (-x)"),
        ("change a constant", "total = -x + y * 3"),
        ("swap + and -", "total += 1"),
        ("change a constant", "total -= 2"),
        ("swap + and -", "return (x + y) / total"),
        ("drop a term", "return ((x)) / total"),
    }
    assert expected <= found, expected - found


def test_messages_and_annotations_are_left_alone():
    lines = {line for _, line in edits()}
    assert not any("raise" in line for line in lines)  # the f-string's x + 1 is a message
    assert not any(line.startswith("def f") and "int" not in line for line in lines)
    defaults = {line for line in lines if line.startswith("def f")}
    assert defaults == {"def f(x: int = 4, y=0.5) -> float:", "def f(x: int = 3, y=1.0) -> float:"}


def test_related_tests_name_the_module_or_an_importer():
    related = mutants.related_tests("attention_viz/analysis/value_zeroing.py")
    # test_context_mixing imports backends.mixing, which imports analysis.value_zeroing
    assert {"tests/test_context_mixing.py", "tests/test_reference_mixing.py"} <= set(related)
    assert not [name for name in related if Path(name).name.startswith("test_browser")]
    assert "tests/test_readme.py" not in related
    assert "attention_viz/backends/mixing.py" in mutants.targets()


def test_the_page_lists_each_module_and_each_survivor():
    rows = [("attention_viz/analysis/a.py", 12, 3, 2, 0, 1, "test_a.py")]
    survivors = [("attention_viz/analysis/a.py", 7, "change a comparison", "x = a | b <= 1", "x = a | b < 1")]
    page = mutants.document(rows, survivors, "make mutants", 3.0, partial=True)
    assert "| attention_viz/analysis/a.py | 12 | 3 | 2 | 0 | 1 | test_a.py |" in page
    assert "| attention_viz/analysis/a.py:7 | change a comparison | `x = a \\| b <= 1` | `x = a \\| b < 1` |" in page
    assert "3 min so far (still running)." in page
    assert "None." in mutants.document(rows[:0], [], "make mutants", 1.0)
