"""Mutation testing, small and our own: change the math one operator at a time and see whether a test notices.

Each mutant is one edit of one module of ``attention_viz/analysis/`` or of the runners in
``attention_viz/backends/`` (the operators below); the module's related tests then run on a copy of
the project with that edit, and the mutant is *killed* when one fails (or runs past the time limit),
*survives* when all pass. Survivors are where the tests are thin: a test that pins the number down
against an independent reference would have failed. They are written to ``docs/mutants.md``.

Related tests: the test files that name the module (``attention_viz.analysis.patching``, ``from
..analysis import patching``) or a module of the project that imports it; the browser tests are left
out (each starts a server). The heavy libraries are imported once here and every run is a forked
child, so a mutant costs its tests, not torch's import.

    .venv/bin/python .ci/mutants.py                       # every module (hours)
    .venv/bin/python .ci/mutants.py attention_viz/analysis/alti.py --per-file 20
"""

from __future__ import annotations

import argparse
import ast
import datetime
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNNERS = ("patching", "mixing", "head_effects", "long_passes")  # attention_viz/backends/: the runs behind analysis/
OPERATORS = ("flip a sign", "swap + and -", "drop a term", "change a comparison", "change a constant")
COMPARISONS = {ast.Lt: "<=", ast.LtE: "<", ast.Gt: ">=", ast.GtE: ">", ast.Eq: "!=", ast.NotEq: "=="}
SYMBOLS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=",
           ast.Add: "+", ast.Sub: "-"}  # fmt: skip


@dataclass(frozen=True)
class Mutant:
    path: str  # relative to the project root
    line: int
    operator: str
    start: int  # byte offsets into the file
    end: int
    replacement: bytes

    def apply(self, source: bytes) -> bytes:
        return source[: self.start] + self.replacement + source[self.end :]

    def describe(self, source: bytes) -> tuple[str, str]:
        """The mutated lines before and after, whitespace collapsed."""
        first = source.rfind(b"\n", 0, self.start) + 1
        last = source.find(b"\n", self.end)
        last = len(source) if last < 0 else last
        after = source[first : self.start] + self.replacement + source[self.end : last]
        return " ".join(source[first:last].decode().split()), " ".join(after.decode().split())


def _offsets(source: bytes) -> list[int]:
    """Byte offset of each line's start (ast's col_offset counts UTF-8 bytes)."""
    starts = [0]
    for match in re.finditer(rb"\n", source):
        starts.append(match.end())
    return starts


def _skipped(tree: ast.AST) -> set[int]:
    """Nodes never mutated: error messages (raise, f-strings) and annotations."""
    out: set[int] = set()
    for node in ast.walk(tree):
        roots = []
        if isinstance(node, (ast.Raise, ast.JoinedStr)):
            roots.append(node)
        if isinstance(node, (ast.AnnAssign, ast.arg)) and node.annotation is not None:
            roots.append(node.annotation)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns is not None:
            roots.append(node.returns)
        for root in roots:
            out.update(id(n) for n in ast.walk(root))
    return out


def mutants(path: str, source: bytes | None = None) -> list[Mutant]:
    """Every mutant of the module at ``path`` (its text: ``source``, or read from the project)."""
    source = (ROOT / path).read_bytes() if source is None else source
    tree = ast.parse(source)
    starts = _offsets(source)
    skipped = _skipped(tree)

    def at(line: int, col: int) -> int:
        return starts[line - 1] + col

    def span(node: ast.AST) -> tuple[int, int]:
        return at(node.lineno, node.col_offset), at(node.end_lineno, node.end_col_offset)

    def between(left: ast.AST, right: ast.AST, symbol: str) -> tuple[int, int] | None:
        """Where ``symbol`` stands between two operands (the first occurrence, brackets and comments aside)."""
        lo, hi = span(left)[1], span(right)[0]
        gap = source[lo:hi]
        found = re.search(rb"(?<![<>=!])" + re.escape(symbol.encode()) + rb"(?![<>=])", gap)
        return None if found is None else (lo + found.start(), lo + found.end())

    out: list[Mutant] = []
    for node in ast.walk(tree):
        if id(node) in skipped or not hasattr(node, "lineno"):
            continue
        line = node.lineno
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            start = span(node)[0]
            if source[start : start + 1] == b"-":
                out.append(Mutant(path, line, "flip a sign", start, start + 1, b""))
        elif isinstance(node, ast.BinOp) and type(node.op) in (ast.Add, ast.Sub):
            where = between(node.left, node.right, SYMBOLS[type(node.op)])
            if where:
                other = b"-" if isinstance(node.op, ast.Add) else b"+"
                out.append(Mutant(path, line, "swap + and -", *where, other))
            start, end = span(node)
            left = source[slice(*span(node.left))]
            out.append(Mutant(path, line, "drop a term", start, end, b"(" + left + b")"))
        elif isinstance(node, ast.AugAssign) and type(node.op) in (ast.Add, ast.Sub):
            lo = span(node.target)[1]
            symbol = SYMBOLS[type(node.op)].encode() + b"="
            found = source.find(symbol, lo)
            other = b"-=" if isinstance(node.op, ast.Add) else b"+="
            out.append(Mutant(path, line, "swap + and -", found, found + 2, other))
        elif isinstance(node, ast.Compare):
            for left, op, right in zip([node.left, *node.comparators], node.ops, node.comparators):
                if type(op) in COMPARISONS and (where := between(left, right, SYMBOLS[type(op)])):
                    out.append(Mutant(path, line, "change a comparison", *where, COMPARISONS[type(op)].encode()))
        elif isinstance(node, ast.Constant) and type(node.value) in (int, float):
            value = node.value
            changed = value + 1 if isinstance(value, int) else (value * 2 if value else 1.0)
            out.append(Mutant(path, line, "change a constant", *span(node), repr(changed).encode()))
    return sorted(out, key=lambda m: (m.start, m.operator))


# -- which tests -----------------------------------------------------------------------------------


def _dotted(path: str) -> str:
    return path.removesuffix(".py").replace("/", ".")


def _names_module(text: str, dotted: str) -> bool:
    package, _, name = dotted.rpartition(".")
    short = package.rpartition(".")[2]  # analysis, backends
    return bool(re.search(rf"\b{re.escape(dotted)}\b|\b{short}\.{name}\b|from [.\w]*\b{short} import [^\n]*\b{name}\b"
                          rf"|from \.{name} import|from \. import [^\n]*\b{name}\b", text))


def related_tests(path: str) -> list[str]:
    """Test files naming the module, or naming a module of the project that imports it."""
    dotted = _dotted(path)
    importers = {dotted}
    for module in (ROOT / "attention_viz").rglob("*.py"):
        relative = module.relative_to(ROOT).as_posix()
        if relative != path and _names_module(module.read_text(), dotted):
            importers.add(_dotted(relative))
    tests = []
    for test in sorted((ROOT / "tests").glob("test_*.py")):
        if test.name.startswith("test_browser"):
            continue
        text = test.read_text()
        if any(_names_module(text, name) for name in importers):
            tests.append(test.relative_to(ROOT).as_posix())
    return tests


def targets() -> list[str]:
    analysis = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "attention_viz/analysis").glob("*.py")
                      if p.name != "__init__.py")
    return analysis + [f"attention_viz/backends/{name}.py" for name in RUNNERS]


# -- running -------------------------------------------------------------------------------------


def copy_project(into: Path) -> None:
    """The tracked and untracked (not ignored) files: the tests see the project as git does."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            check=True, capture_output=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, into / name)


def run_tests(copy: Path, tests: list[str], limit: float, log: Path | None = None) -> str:
    """'passed', 'failed' or 'timeout': the tests in a forked child (pytest in the copy), killed at
    ``limit``; pytest's output goes to ``log`` (None: nowhere)."""
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 1
        try:
            os.setsid()
            os.chdir(copy)
            sys.dont_write_bytecode = True  # the copy is never compiled to disk: each mutant is read afresh
            sys.path.insert(0, str(copy))
            out = os.open(log or os.devnull, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(out, 1)
            os.dup2(out, 2)
            import pytest

            code = pytest.main([*tests, "-x", "-q", "-n", "0", "-p", "no:cacheprovider", "-p", "no:randomly",
                                "--durations=0", "-o", "addopts="])
        finally:
            os._exit(int(code))
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return "passed" if os.waitstatus_to_exitcode(status) == 0 else "failed"
        time.sleep(0.2)
    os.killpg(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return "timeout"


def spaced(items: list, count: int | None) -> list:
    """``count`` items evenly spaced over ``items`` (all when None or fewer)."""
    if count is None or len(items) <= count:
        return items
    return [items[round(i * (len(items) - 1) / (count - 1))] for i in range(count)] if count > 1 else items[:1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", help="modules to mutate (default: analysis/ and the backends' runners)")
    parser.add_argument("--per-file", type=int, help="at most this many mutants a module, evenly spaced")
    parser.add_argument("--doc", default="docs/mutants.md", help="where the survivors are written")
    args = parser.parse_args(argv)
    files = args.files or targets()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import numpy, torch, transformers  # noqa: E401, F401  (once, for every forked run)

    started = time.monotonic()
    command = "make mutants" if not args.files and args.per_file is None else (
        ".venv/bin/python .ci/mutants.py " + " ".join([*args.files, *(["--per-file", str(args.per_file)]
                                                                         if args.per_file else [])]))
    rows: list[tuple] = []
    survivors: list[tuple[str, int, str, str, str]] = []  # where, line, operator, the line before and after
    with tempfile.TemporaryDirectory(prefix="mutants-") as folder:
        copy = Path(folder)
        copy_project(copy)
        for path in files:
            source = (copy / path).read_bytes()  # the copy's: the project may change while this runs
            tests = related_tests(path)
            found = mutants(path, source)
            chosen = spaced(found, args.per_file)
            counts = {"failed": 0, "timeout": 0, "passed": 0}
            t0 = time.monotonic()
            if not tests:
                note, alive = "no related test", chosen
            elif run_tests(copy, tests, 1800, copy / "unmutated.log") != "passed":
                note, alive, chosen = "the related tests fail unmutated: skipped", [], []
                print(f"{path}: the related tests fail unmutated:\n" + (copy / "unmutated.log").read_text()[-3000:])
            else:
                note, alive = ", ".join(Path(t).name for t in tests), []
                limit = 2 * (time.monotonic() - t0) + 30
                try:
                    for mutant in chosen:
                        (copy / path).write_bytes(mutant.apply(source))
                        outcome = run_tests(copy, tests, limit)
                        counts[outcome] += 1
                        if outcome == "passed":
                            alive.append(mutant)
                        print(f"{path}:{mutant.line} {mutant.operator}: {outcome}", flush=True)
                finally:
                    (copy / path).write_bytes(source)
            survivors += [(path, m.line, m.operator, *m.describe(source)) for m in alive]
            rows.append((path, len(found), len(chosen), counts["failed"], counts["timeout"], len(alive), note))
            # written after every module: a long run that is stopped still leaves what it measured
            minutes = (time.monotonic() - started) / 60
            (ROOT / args.doc).write_text(document(rows, survivors, command, minutes, len(rows) < len(files)))
    print(f"{sum(r[5] for r in rows)} survivors of {sum(r[2] for r in rows)} mutants; written to {args.doc}")
    return 0


def document(rows: list[tuple], survivors: list[tuple], command: str, minutes: float, partial: bool = False) -> str:
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "# Mutants that survived",
        "",
        "Generated by `.ci/mutants.py` (`make mutants`); do not edit by hand. Each mutant is one edit of",
        f"one module ({', '.join(OPERATORS)}); its related tests",
        "run on a copy of the project, and the mutant is killed when one fails or runs past twice the",
        "unmutated time plus 30 s. A survivor is a change of the math that no test noticed: a test against an",
        "independent reference is missing there, or the change cannot alter a result (an equivalent mutant).",
        "",
        f"`{command}` — {date}, {minutes:.0f} min" + (" so far (still running)." if partial else "."),
        "",
        "| module | mutants | run | killed | timed out | survived | tests run |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    lines += [f"| {path} | {found} | {run} | {killed} | {timeout} | {alive} | {tests} |"
              for path, found, run, killed, timeout, alive, tests in rows]
    lines += ["", "## Survivors", ""]
    if not survivors:
        lines.append("None.")
    else:
        lines += ["| where | operator | line | mutated |", "|---|---|---|---|"]
        lines += [f"| {path}:{line} | {operator} | `{_cell(before)}` | `{_cell(after)}` |"
                  for path, line, operator, before, after in survivors]
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("`", "'")


if __name__ == "__main__":
    sys.exit(main())
