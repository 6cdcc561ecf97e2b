"""Where a result came from: the model that ran, whose code ran it, what it read and with which
settings. Every figure's subtitle and download name are made from the provenance of the result it
was drawn from, so a picture saved into a paper names the model and input it really shows, not
whatever the sidebar held when it was saved. Plain data (no torch): it rides in a result's meta and
round-trips through its ``.npz``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

FILE, IMAGE, ATLAS = "file: ", "image: ", "atlas: "  # how a source that is not typed text is named


@dataclass(frozen=True)
class Provenance:
    model: str  # the model's name as the app and the CLI take it (``minilm``, ``hf:...``)
    implementation: str = ""  # "ours" or "transformers": whose code ran the forward
    source: str = ""  # the text read, or "file: <name>" (an uploaded file), "image: <name>", "atlas: <name>"
    target: str | None = None  # the decoder's teacher-forced text, None when it wrote its own
    settings: tuple[str, ...] = ()  # what else shaped the run, in words: "positions off", "zero ablation of …"

    def from_file(self, name: str) -> Provenance:
        """The same run, its text read from the uploaded file ``name`` (the text itself is too long
        to name a figure)."""
        return replace(self, source=FILE + name)

    def from_image(self, name: str) -> Provenance:
        return replace(self, source=IMAGE + name)

    @property
    def is_text(self) -> bool:
        """Whether the source is the text itself, not the name of a file, an image or an atlas."""
        return not self.source.startswith((FILE, IMAGE, ATLAS))

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "implementation": self.implementation, "source": self.source,
                "target": self.target, "settings": list(self.settings)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Provenance:
        target = data.get("target")
        return cls(str(data["model"]), str(data.get("implementation") or ""), str(data.get("source") or ""),
                   None if target is None else str(target),
                   tuple(str(setting) for setting in data.get("settings") or ()))


def image_of(seed: int | None) -> str:
    """The source of an image run: a generated scene by its seed; an image given as pixels is named
    by whoever knows its name (see :meth:`Provenance.from_image`)."""
    return IMAGE + ("given as pixels" if seed is None else f"scene {seed}")


def run_of(model: str, implementation: str, source: str, target: str | None = None,
           *settings: str | None) -> dict[str, Any]:
    """What a backend puts in ``meta["provenance"]`` of a run on ``source`` (as JSON-ready data, the
    way meta is saved); a setting that is None (e.g. no ablation) is left out."""
    return Provenance(model, implementation, source, target, tuple(s for s in settings if s)).to_dict()
