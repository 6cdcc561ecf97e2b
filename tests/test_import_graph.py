"""The import graph drawn from the source: no module imports one that imports it back (directly or
round a circle), and packages import only downward in the data flow of docs/ARCHITECTURE.md.
Imports for type checking only (under ``if TYPE_CHECKING:``) draw no edge: they never run."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "attention_viz"

# Lower first: a package may import from its own level or below, never from above.
LAYERS = [
    {"errors"},
    {"inputs"},
    {"core"},
    {"runtime", "weights"},
    {"analysis"},
    {"trained"},
    {"backends"},
    {"cards", "figures"},
    {"atlas"},
    {"api"},
    {"cli", "ui"},
    {"__main__", "__init__"},
]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in PACKAGE.rglob("*.py")}


def _type_checking_only(tree: ast.AST) -> set[int]:
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for inner in node.body:
                lines |= set(range(inner.lineno, (inner.end_lineno or inner.lineno) + 1))
    return lines


def imports_of(path: Path, type_only: bool = False) -> set[str]:
    """The package's modules ``path`` imports (``type_only``: those under ``if TYPE_CHECKING:`` too)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = set() if type_only else _type_checking_only(tree)
    name = module_name(path).split(".")
    package = name if path.name == "__init__.py" else name[:-1]
    found = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom | ast.Import) or node.lineno in skip:
            continue
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name in MODULES}
            continue
        base = package[: len(package) - node.level + 1] if node.level else []
        target = ".".join(base + (node.module.split(".") if node.module else []))
        for alias in node.names:
            found.add(f"{target}.{alias.name}" if f"{target}.{alias.name}" in MODULES else target)
    return {module for module in found if module in MODULES and module != module_name(path)}


GRAPH = {module: imports_of(path) for module, path in MODULES.items()}
# type-only imports included: a circle through them still ties two modules together for a reader
TYPED_GRAPH = {module: imports_of(path, type_only=True) for module, path in MODULES.items()}


def unit(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def level(module: str) -> int:
    return next(i for i, layer in enumerate(LAYERS) if unit(module) in layer)


def circles(graph: dict[str, set[str]] | None = None) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan) of ``graph`` (default GRAPH)."""
    graph = GRAPH if graph is None else graph
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in graph[module]:
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for module in graph:
        if module not in index:
            visit(module)
    return found


def test_every_package_has_a_layer():
    assert {unit(module) for module in MODULES} <= set().union(*LAYERS)


def test_no_module_imports_round_a_circle():
    assert circles() == []


def test_no_circle_even_through_type_only_imports():
    assert circles(TYPED_GRAPH) == []


def test_packages_import_only_downward():
    upward = {(module, other) for module, others in GRAPH.items() for other in others if level(other) > level(module)}
    assert upward == set()


MAX_LINES = 600  # a module a newcomer reads in one sitting; past it, split it along its sections


def test_no_module_is_longer_than_a_sitting():
    long = {module: n for module, path in MODULES.items() if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}


def test_the_top_level_holds_entry_points_only():
    top = sorted(path.name for path in PACKAGE.glob("*.py"))
    assert top == ["__init__.py", "__main__.py", "api.py", "errors.py"]


def test_the_check_sees_a_circle():
    GRAPH["attention_viz.errors"] = GRAPH["attention_viz.errors"] | {"attention_viz.core.names"}
    try:
        GRAPH.setdefault("attention_viz.core.names", set())
        names_imports = GRAPH["attention_viz.core.names"]
        GRAPH["attention_viz.core.names"] = names_imports | {"attention_viz.errors"}
        assert circles() == [["attention_viz.core.names", "attention_viz.errors"]]
    finally:
        GRAPH["attention_viz.errors"] = imports_of(MODULES["attention_viz.errors"])
        GRAPH["attention_viz.core.names"] = imports_of(MODULES["attention_viz.core.names"])
