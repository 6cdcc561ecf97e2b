"""The folder of one trained demo model: build the model from its config, save it, load it back.

A model folder holds::

    config.json        {"architecture": "transformer" | "rnn", "config": {...}}  (the model's dataclass)
    model.safetensors  the weights, float32
    src_vocab.json     source Vocab (vocab.Vocab.to_json)
    tgt_vocab.json     target Vocab
    training.json      how it was trained: data, hyperparameters, steps, time, losses (for the model card)

Weights are read with ``safetensors`` only (never a pickle) and the state dict must match the
architecture exactly, so a wrong or truncated file is refused instead of half-loaded.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import nn

from ..core.model import TransformerConfig
from .rnn import RNNConfig, RNNSeq2Seq
from .shipped import MODELS_DIR
from .shipped import TRANSFORMER_FILES as FILES
from .shipped import missing
from .transformer import TranslationTransformer
from .vocab import Vocab

ARCHITECTURES = ("transformer", "rnn")


@dataclass
class TrainedModel:
    """A loaded model with its vocabularies; ``model`` is in eval mode."""

    architecture: str
    model: nn.Module
    src_vocab: Vocab
    tgt_vocab: Vocab
    training: dict

    @property
    def has_attention(self) -> bool:
        return self.architecture == "transformer" or bool(self.model.config.attention)

    @property
    def max_len(self) -> int:
        return int(self.model.config.max_len)


def build_model(architecture: str, config: dict) -> nn.Module:
    if architecture == "transformer":
        return TranslationTransformer(TransformerConfig(**config))
    if architecture == "rnn":
        return RNNSeq2Seq(RNNConfig(**config))
    raise ValueError(f"unknown architecture {architecture!r}; expected one of {ARCHITECTURES}")


def save(folder: Path, architecture: str, model: nn.Module, src_vocab: Vocab, tgt_vocab: Vocab, training: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    config = {"architecture": architecture, "config": asdict(model.config)}
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    state = {name: tensor.detach().contiguous().clone() for name, tensor in model.state_dict().items()}
    save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt", "architecture": architecture})
    (folder / "model.safetensors").chmod(0o644)  # safetensors creates it owner-only
    (folder / "src_vocab.json").write_text(src_vocab.to_json() + "\n", encoding="utf-8")
    (folder / "tgt_vocab.json").write_text(tgt_vocab.to_json() + "\n", encoding="utf-8")
    (folder / "training.json").write_text(json.dumps(training, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def missing_files(folder: Path) -> list[str]:
    return missing(folder, FILES)


def load(folder: str | Path) -> TrainedModel:
    """Load a model folder; ValueError (with the reason) when it is incomplete or inconsistent."""
    folder = Path(folder)
    missing = missing_files(folder)
    if missing:
        raise ValueError(f"{folder} is missing {', '.join(missing)}")
    try:
        spec = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        model = build_model(spec["architecture"], spec["config"])
        state = load_file(str(folder / "model.safetensors"))
        src_vocab = Vocab.from_json((folder / "src_vocab.json").read_text(encoding="utf-8"))
        tgt_vocab = Vocab.from_json((folder / "tgt_vocab.json").read_text(encoding="utf-8"))
    except (OSError, KeyError, TypeError, json.JSONDecodeError, SafetensorError) as error:
        raise ValueError(f"cannot read the model in {folder}: {error}") from error
    model.load_state_dict(state, strict=True)
    config = model.config
    if (config.vocab_size, config.decoder_vocab_size) != (len(src_vocab), len(tgt_vocab)):
        raise ValueError(f"{folder}: the vocabularies do not match the model's config")
    training_path = folder / "training.json"
    training = json.loads(training_path.read_text(encoding="utf-8")) if training_path.is_file() else {}
    return TrainedModel(spec["architecture"], model.eval(), src_vocab, tgt_vocab, training)

