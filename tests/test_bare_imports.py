"""What runs a model on a bare GPU image (torch, transformers, numpy; no streamlit, no plotly) loads
neither: ``python -m attention_viz run / heads / patch`` and ``attention_viz.api.run``, in turn in one
fresh interpreter that notes after each step which of the libraries it has imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

STEPS = (
    "import json, sys\n"
    "from attention_viz.runtime.settings import apply_process_settings\n"
    "apply_process_settings()  # as python -m attention_viz does\n"
    "from attention_viz.cli import main\n"
    "def loaded():\n"
    "    return sorted({m.split('.')[0] for m in sys.modules} & {'plotly', 'streamlit', 'torch'})\n"
    "seen = {}\n"
    "for step, args in json.loads(sys.argv[1]).items():\n"
    "    assert main(args) == 0, step\n"
    "    seen[step] = loaded()\n"
    "import attention_viz.api as api\n"
    "result = api.run('minilm', 'The animal was tired.')\n"
    "assert result.pattern(('encoder', 'self_attn'), 0).shape[0] == 12\n"
    "seen['api.run'] = loaded()\n"
    "print(json.dumps(seen))\n"
)


@pytest.mark.slow
def test_running_models_imports_nothing_that_draws(tmp_path):
    commands = {
        "run": ["run", "--text", "The animal didn't cross the street.", "--kinds", "pattern,scores",
                "--out", str(tmp_path / "r.npz")],
        "heads": ["heads", "--text", "a b c a b c", "--probes", "0", "--json"],
        "patch": ["patch", "--model", "induction", "--json"],
    }
    done = subprocess.run([sys.executable, "-c", STEPS, json.dumps(commands)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen == {step: ["torch"] for step in ("run", "heads", "patch", "api.run")}  # models ran, nothing drew
    assert (tmp_path / "r.npz").exists()


def test_the_export_views_the_cli_names_are_the_ones_that_exist():
    from attention_viz.cli.main import EXPORT_VIEWS
    from attention_viz.figures.views import VIEWS

    assert EXPORT_VIEWS == (*VIEWS, "heads")
