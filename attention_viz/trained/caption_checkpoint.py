"""The folder of the trained captioner (``show-attend-tell``): save it, load it back.

    config.json        {"architecture": "show-attend-tell", "config": {...CaptionerConfig}}
    model.safetensors  the weights, float32
    vocab.json         the caption Vocab (vocab.Vocab.to_json)
    training.json      how it was trained (for the model card)

As for the translation models, weights are read with ``safetensors`` only and must match the
architecture exactly; anything else is refused with the reason.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from .captioner import CaptionerConfig, ShowAttendTell
from .shipped import CAPTIONER_FILES as FILES
from .shipped import missing
from .vocab import Vocab

ARCHITECTURE = "show-attend-tell"


@dataclass
class TrainedCaptioner:
    model: ShowAttendTell  # in eval mode
    vocab: Vocab
    training: dict


def save(folder: Path, model: ShowAttendTell, vocab: Vocab, training: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    config = {"architecture": ARCHITECTURE, "config": asdict(model.config)}
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    state = {name: tensor.detach().contiguous().clone() for name, tensor in model.state_dict().items()}
    save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt", "architecture": ARCHITECTURE})
    (folder / "model.safetensors").chmod(0o644)  # safetensors creates it owner-only
    (folder / "vocab.json").write_text(vocab.to_json() + "\n", encoding="utf-8")
    (folder / "training.json").write_text(json.dumps(training, indent=2) + "\n", encoding="utf-8")


def missing_files(folder: Path) -> list[str]:
    return missing(folder, FILES)


def load(folder: str | Path) -> TrainedCaptioner:
    """Load a captioner folder; ValueError (with the reason) when it is incomplete or inconsistent."""
    folder = Path(folder)
    missing = missing_files(folder)
    if missing:
        raise ValueError(f"{folder} is missing {', '.join(missing)}")
    try:
        spec = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        if spec.get("architecture") != ARCHITECTURE:
            raise ValueError(f"{folder} holds a {spec.get('architecture')!r} model, not {ARCHITECTURE}")
        model = ShowAttendTell(CaptionerConfig(**spec["config"]))
        state = load_file(str(folder / "model.safetensors"))
        vocab = Vocab.from_json((folder / "vocab.json").read_text(encoding="utf-8"))
        model.load_state_dict(state, strict=True)
    except (OSError, KeyError, TypeError, RuntimeError, json.JSONDecodeError, SafetensorError) as error:
        raise ValueError(f"cannot read the captioner in {folder}: {error}") from error
    if model.config.vocab_size != len(vocab):
        raise ValueError(f"{folder}: the vocabulary does not match the model's config")
    training_path = folder / "training.json"
    training = json.loads(training_path.read_text(encoding="utf-8")) if training_path.is_file() else {}
    return TrainedCaptioner(model.eval(), vocab, training)
