"""What an ``hf:`` name may load (the operator's model roots and the server's reach), and where atlases live.

Three situations, decided before the named path is touched:

- A person's own machine (the app on loopback, the CLI, a notebook) with no roots set: anything
  ``transformers`` can load, as convenient as ever.
- ``ATTENTION_VIZ_MODEL_ROOTS`` set (folders separated by ``:``; always in the Docker image): a
  folder loads only if it lies inside a root once symlinks and ``..`` are resolved. A relative name
  (``hf:my-bert``) is looked up inside the roots.
- The app served beyond loopback with no roots: no folder loads at all.

While restricted, hub ids load only when the operator allows downloads (ATTENTION_VIZ_ALLOW_DOWNLOAD=1),
and every refusal is one message that names neither the requested path nor whether it exists, so a
link cannot be used to probe the server's disk.

Atlases live under one root (``ATTENTION_VIZ_ATLAS_ROOT``, by default the user's cache folder); a
link names an atlas by a plain name, which :func:`atlas_folder` turns into a folder inside that root.
"""

from __future__ import annotations

import ipaddress
import os
import re
from pathlib import Path

from ..errors import ModelError
from .settings import downloads_allowed

# What a hub id looks like (``org/name`` or ``name``): a spec that is not a folder is read as one.
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?")
MODEL_ROOTS_ENV = "ATTENTION_VIZ_MODEL_ROOTS"
MAX_SPEC_CHARS = 1000  # longer than any real path or hub id; bounds the work a link can ask for


def model_roots() -> list[Path] | None:
    """The operator's roots, resolved; None when ``ATTENTION_VIZ_MODEL_ROOTS`` is unset or empty."""
    raw = os.environ.get(MODEL_ROOTS_ENV, "")
    roots = [Path(os.path.realpath(Path(part).expanduser())) for part in raw.split(":") if part.strip()]
    return roots or None


def beyond_loopback(address: str | None) -> bool:
    """Whether a server bound to ``address`` answers other machines (no address = every interface)."""
    if not address or not address.strip():
        return True
    host = address.strip().strip("[]")
    if host.lower() == "localhost":
        return False
    try:
        return not ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name other than localhost may resolve to anything
        return True


def hf_source(spec: str, *, exposed: bool = False) -> str:
    """The spec to hand to the ``hf:`` backend, or ModelError when this server may not load it.

    ``exposed``: the app is served beyond loopback (the page edge reads Streamlit's config).
    Inside the roots the resolved folder is returned, so what loads is exactly what was checked, and
    one folder reached by several names is loaded once.
    """
    roots = model_roots()
    if not spec or (roots is None and not exposed):  # (an empty spec gets the backend's own message)
        return spec

    roots = roots or []
    path = _expanded(spec) if len(spec) <= MAX_SPEC_CHARS and "\0" not in spec else None
    if path is not None:
        # A relative name is looked up inside the roots, never in the server's working directory.
        candidates = [path] if path.is_absolute() else [root / path for root in roots]
        inside = [folder for folder in map(_inside, candidates, [roots] * len(candidates)) if folder]
        existing = next((folder for folder in inside if folder.is_dir()), None)
        if existing is not None:
            return str(existing)
        if HUB_ID.fullmatch(spec) and downloads_allowed() and not path.exists():
            return spec
        if inside:  # inside a root but missing: the backend says so, naming only that path
            return str(inside[0])
    raise ModelError(refusal(roots, hub=downloads_allowed()))


def refusal(roots: list[Path], hub: bool) -> str:
    """The one message for every refused spec: the same for paths that exist and paths that don't."""
    hubs = "; hub ids are allowed" if hub else ""
    if roots:
        where = ", ".join(str(root) for root in roots)
        return f"this server loads hf: models only from folders inside {where} (its {MODEL_ROOTS_ENV}){hubs}"
    return (f"this server is reachable beyond this machine, so it loads no hf: folders until its operator "
            f"sets {MODEL_ROOTS_ENV} (or serves it on 127.0.0.1 only){hubs}")


def _expanded(spec: str) -> Path | None:
    try:
        return Path(spec).expanduser()
    except RuntimeError:  # ~someone with no home directory here
        return None


def _inside(path: Path, roots: list[Path]) -> Path | None:
    """``path`` with symlinks and ``..`` resolved, if that lies inside one of ``roots``."""
    try:
        resolved = Path(os.path.realpath(path))
    except OSError:  # e.g. a name too long for the file system: not a folder anyone can load
        return None
    return resolved if any(resolved.is_relative_to(root) for root in roots) else None


# -- the atlas root -----------------------------------------------------------------------------
# A link or a form names an atlas; only the operator's environment names a folder. Every atlas the app
# reads, builds or removes lies inside this root, so a visitor can neither read nor write elsewhere.

ATLAS_ROOT_ENV = "ATTENTION_VIZ_ATLAS_ROOT"
# A plain folder name: starts with a letter or digit (so never ".", ".." or hidden), no separators.
ATLAS_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")


ATLAS_CORPUS_ENV = "ATTENTION_VIZ_ATLAS_CORPUS"
PROBES_SPEC = re.compile(r"probes(:[1-9][0-9]{0,6}(:[0-9]{1,9})?)?")


def page_corpus() -> str:
    """The corpus an atlas built from the page reads: the built-in probes, or as many of them as the
    operator sets in ``ATTENTION_VIZ_ATLAS_CORPUS`` (``probes:N``, a quicker build on a small server).
    Never a file: the page builds only what the app ships."""
    spec = os.environ.get(ATLAS_CORPUS_ENV, "").strip() or "probes"
    if not PROBES_SPEC.fullmatch(spec):
        raise ModelError(f"{ATLAS_CORPUS_ENV}={spec!r}: the page builds from the probes only (probes or probes:N)")
    return spec


def atlas_root() -> Path:
    """``ATTENTION_VIZ_ATLAS_ROOT``, else the user's cache folder (``$XDG_CACHE_HOME`` or ``~/.cache``)
    ``/attention-viz/atlas``; symlinks resolved, so "inside" is decided on real paths."""
    raw = os.environ.get(ATLAS_ROOT_ENV, "").strip()
    if raw:
        root = Path(raw).expanduser()
    else:
        cache = os.environ.get("XDG_CACHE_HOME", "").strip()
        root = (Path(cache) if cache else Path.home() / ".cache") / "attention-viz" / "atlas"
    return Path(os.path.realpath(root))


def atlas_folder(name: str) -> Path:
    """The folder of the atlas called ``name`` inside the atlas root, or ModelError: a name is one
    plain folder name (letters, digits, ``-_.``, no ``..``), and a folder whose real path leads out
    of the root (a symlink) is refused."""
    if not isinstance(name, str) or not ATLAS_NAME.fullmatch(name) or ".." in name:
        raise ModelError("an atlas is named by a plain name (letters, digits, - _ and ., at most 100, "
                         "no / and no ..), not by a path")
    root = atlas_root()
    folder = _inside(root / name, [root])
    if folder is None or folder == root:
        raise ModelError(f"the atlas {name} leads outside this server's atlas folder ({ATLAS_ROOT_ENV}): it is not opened")
    return folder


def atlas_name(model: str, corpus: str) -> str:
    """A valid atlas name for ``model`` over ``corpus`` (e.g. ``minilm-probes``): every character a
    name may not hold becomes ``_``; a long ``hf:`` path keeps its end (the model's own folder)."""
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", f"{model}-{corpus}").replace("..", "_")
    name = name[-100:].lstrip("_.-")
    return name or "atlas"


def atlas_names() -> list[str]:
    """The atlases in the root (folders holding a manifest), by name: what a visitor may open."""
    root = atlas_root()
    if not root.is_dir():
        return []
    return sorted(entry.name for entry in root.iterdir()
                  if ATLAS_NAME.fullmatch(entry.name) and ".." not in entry.name and (entry / "manifest.json").is_file())


def check_folder_files(folder: str | Path) -> None:
    """The one refusal when roots are set and an entry of ``folder`` (config.json, weights, tokenizer
    files …) is a link that leads out of every root: a folder inside a root reads nothing outside.
    Its top level only, which is all a model load reads, so a request costs one directory listing."""

    roots = model_roots()
    if roots is None:
        return
    with os.scandir(folder) as entries:
        if any(_inside(Path(entry.path), roots) is None for entry in entries):
            raise ModelError(refusal(roots, hub=downloads_allowed()))
