"""The layering rules of docs/ARCHITECTURE.md, checked by import and by reading the source.

* Importing the package changes no process-wide setting (environment variables).
* figures/, result.py, selection.py, names.py, analysis/, the model registry and the hub lookup load
  without torch.
* No module under ui/ imports torch.
* Hook names are built only by names.hook_name: no literal or f-string hook-name pattern elsewhere.
* errors.py imports nothing from attention_viz.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "attention_viz"


def fresh_python(code: str, env: dict[str, str] | None = None) -> str:
    """Run ``code`` in a new interpreter (nothing imported yet) and return its stdout."""
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
        env=env if env is not None else dict(os.environ),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_importing_the_package_sets_no_environment_variable():
    code = (
        "import json, os\n"
        "before = dict(os.environ)\n"
        "import attention_viz, attention_viz.backends.registry, attention_viz.backends.hf, attention_viz.cli\n"
        "print(json.dumps([before, dict(os.environ)]))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    before, after = json.loads(fresh_python(code, env))
    assert after == before


def test_process_settings_are_applied_by_the_entry_points_only():
    code = (
        "import os\n"
        "from attention_viz.runtime.settings import apply_process_settings\n"
        "apply_process_settings()\n"
        "print(os.environ['HF_HUB_OFFLINE'], os.environ['OMP_WAIT_POLICY'], os.environ['TRANSFORMERS_VERBOSITY'])\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "OMP_WAIT_POLICY", "TRANSFORMERS_VERBOSITY")}
    assert fresh_python(code, env).split() == ["1", "PASSIVE", "error"]
    allowed = fresh_python(code.replace("os.environ['HF_HUB_OFFLINE']", "os.environ.get('HF_HUB_OFFLINE')"),
                           {**env, "ATTENTION_VIZ_ALLOW_DOWNLOAD": "1"})
    assert allowed.split()[0] == "None"  # the user opted in to downloads: not forced offline
    for entry in (ROOT / "app.py", PACKAGE / "__main__.py"):
        calls = [
            node for node in ast.walk(ast.parse(entry.read_text(encoding="utf-8")))
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "apply_process_settings"
        ]  # fmt: skip
        assert calls, f"{entry.name} must apply the process settings"



def test_the_server_freezes_its_startup_heap_once_and_still_collects_later_garbage():
    """Streamlit collects every generation after each run; what the first run loaded is frozen so
    that walk stays short. Later cycles must still be collected, and a second call freezes nothing."""
    code = (
        "import gc, weakref\n"
        "from attention_viz.runtime.settings import freeze_startup_heap\n"
        "class Node: pass\n"
        "kept = [Node() for _ in range(1000)]\n"
        "freeze_startup_heap()\n"
        "frozen = gc.get_freeze_count()\n"
        "a, b = Node(), Node(); a.other, b.other = b, a; alive = weakref.ref(a); del a, b\n"
        "freeze_startup_heap()\n"
        "gc.collect(2)\n"
        "print(frozen >= 1000, gc.get_freeze_count() == frozen, alive() is None)\n"
    )
    assert fresh_python(code, dict(os.environ)).split() == ["True", "True", "True"]
    last = ast.parse((ROOT / "app.py").read_text(encoding="utf-8")).body[-1]
    assert isinstance(last, ast.Expr) and getattr(last.value.func, "id", None) == "freeze_startup_heap", (
        "app.py must freeze the heap at the end of its run, when everything long-lived is loaded"
    )

def modules(folder: Path) -> list[str]:
    """Dotted names of every module in ``folder`` (a package under attention_viz)."""
    out = []
    for path in sorted(folder.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        out.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return out


TORCH_FREE = [
    *modules(PACKAGE / "figures"),
    *modules(PACKAGE / "analysis"),
    "attention_viz.core.result",
    "attention_viz.analysis.selection",
    "attention_viz.core.names",
    "attention_viz.errors",
    "attention_viz.backends.registry",  # model names and availability answer without loading a model
    "attention_viz.backends.hub",  # an uncached hub id is refused before torch loads
    "attention_viz.trained.shipped",  # where the demo models are, and whether their files are there
]


def test_plain_data_modules_load_without_torch():
    # One fresh interpreter imports them one by one and notes which import first brought torch in.
    code = (
        "import importlib, json, sys\n"
        f"modules = {TORCH_FREE!r}\n"
        "pulled = []\n"
        "for name in modules:\n"
        "    importlib.import_module(name)\n"
        "    if {'torch', 'transformers'} & set(sys.modules) and not pulled:\n"
        "        pulled.append(name)\n"
        "print(json.dumps(pulled))\n"
    )
    assert len(TORCH_FREE) > 10  # the folders were found
    assert json.loads(fresh_python(code)) == [], "this module pulls in torch"


def test_listing_the_models_and_where_they_are_loads_no_model_framework():
    # `python -m attention_viz models` answers for every model (shipped folders included) without torch
    code = (
        "import json, sys\n"
        "from attention_viz.backends.registry import MODELS, availability\n"
        "found = {name: availability(name)[0] for name in MODELS}\n"
        "print(json.dumps([found, sorted({'torch', 'transformers'} & set(sys.modules))]))\n"
    )
    found, frameworks = json.loads(fresh_python(code))
    assert all(found.values()) and len(found) >= 5  # every shipped model is found, so its lookup ran
    assert frameworks == []


def imported_modules(path: Path) -> set[str]:
    """Every module an ``import`` statement of the file names, relative imports resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = path.relative_to(ROOT).with_suffix("").parts[:-1]
    if path.name == "__init__.py":
        package = path.relative_to(ROOT).parts[:-1]
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(package[: len(package) - node.level + 1])
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            names.add(prefix)
            names.update(f"{prefix}.{alias.name}" for alias in node.names)
    return names


def test_no_page_module_imports_torch():
    offenders = {
        str(path.relative_to(ROOT)): sorted(n for n in imported_modules(path) if n.split(".")[0] == "torch")
        for path in (PACKAGE / "ui").rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_errors_imports_nothing_of_ours():
    ours = [n for n in imported_modules(PACKAGE / "errors.py") if n.startswith("attention_viz")]
    assert ours == []


HOOK_NAME = re.compile(
    r"(encoder|decoder)\.layers\.(\{\}|\d+|\*)\.(self_attn|cross_attn)"  # a full prefix, or
    r"|layers\.(\{\}|\d+|\*)\.(\{\}|self_attn|cross_attn)\.(\{\}|\*|q|k|v|scores|pattern|context|value_norm)$"
    r"|(^|\.)(self_attn|cross_attn)\.(\{\}|\*|q|k|v|scores|pattern|context|value_norm)$"  # attention.kind
)


def string_parts(tree: ast.AST) -> list[tuple[int, str]]:
    """Every string literal and f-string (placeholders as ``{}``), docstrings left out."""
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)
    }  # fmt: skip
    found = []
    inside_fstring = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
            found.append((node.lineno, text))
            inside_fstring.update(id(v) for v in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) not in docstrings and id(node) not in inside_fstring:
                found.append((node.lineno, node.value))
    return found


def test_hook_names_are_built_only_by_names_py():
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: {text!r}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "names.py"
        for line, text in string_parts(ast.parse(path.read_text(encoding="utf-8")))
        if HOOK_NAME.search(text)
    ]
    assert offenders == []


def test_the_hook_name_check_sees_what_it_must():
    caught = 'x = f"{part}.layers.{i}.{attn}.pattern"', 'x = "decoder.layers.*.cross_attn.*"', 'x = f"x.self_attn.{k}"'
    passed = 'x = f"{dst}self_attn.{proj}.weight"', 'x = "self_attn.w_o"', 'def f():\n    """encoder.layers.0.self_attn.q"""'
    for source in caught:
        assert any(HOOK_NAME.search(t) for _, t in string_parts(ast.parse(source))), source
    for source in passed:
        assert not any(HOOK_NAME.search(t) for _, t in string_parts(ast.parse(source))), source


def test_the_checks_see_imports():
    # The AST reading itself: a relative import in a ui module resolves to the absolute name.
    names = imported_modules(PACKAGE / "backends" / "scratch.py")
    assert "torch" in names and "attention_viz.core.hooks.capture" in names
