"""Activation patching as plain data: which sites carry the difference between two inputs.

A *clean* and a *corrupt* input of the same token length differ in one fact (Meng et al. 2022's
causal tracing; Wang et al. 2022's path patching; Heimersheim & Nanda, "How to use and interpret
activation patching"). The model runs on both; then it runs the corrupt input again with one site
replaced by its clean value (*denoising*), or the clean input with one corrupt value (*noising*).
A scalar metric of the output (a logit difference, a log-probability difference, a similarity
difference) is read off every run, and each site gets its **restored fraction**

    (metric(patched) − metric(corrupt)) / (metric(clean) − metric(corrupt))

1 where the site alone carries the whole difference, 0 where it carries none. Under noising the
same formula reads the other way: near 1 the site is not needed, near 0 losing it loses everything.

Sites (a row per layer, or per attention of an encoder–decoder):

* ``heads`` — each head's output (its context before W_O) at every position: rows × heads;
* ``resid`` — the residual stream entering each layer at one position: rows × positions;
* ``head_positions`` — each head's output at one position: rows × heads × positions;
* ``patterns`` — a head's attention pattern alone, its values kept: rows × heads.

No torch here: the runner (attention_viz/backends/patching.py) hands over the metrics it measured.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ModelError

SITES = ("heads", "resid", "head_positions", "patterns")
SITE_DESCRIPTIONS = {
    "heads": "each head's output (its context before W_O) at every position",
    "resid": "the residual stream entering each layer, at one position",
    "head_positions": "each head's output at one position",
    "patterns": "each head's attention pattern alone (values kept)",
}


def check_site(site: str) -> str:
    if site not in SITES:
        raise ModelError(f"unknown site {site!r}: choose {', '.join(SITES)}")
    return site


def nothing_to_restore(clean: float, corrupt: float) -> bool:
    """Whether the two metrics are equal up to float32 rounding, so no fraction can be formed."""
    return abs(clean - corrupt) <= 1e-6 * max(1.0, abs(clean), abs(corrupt))


# When the two inputs' metrics are this close, the restored fraction divides small differences by a
# small gap: any site that nudges the metric reads as "restores it all" or more. A gap under the floor
# (in the metric's own units: a cosine, a logit or a log-probability difference) or under the share of
# the larger |metric| trips the warning. The shipped presets' gaps are well above both (test_patching.py).
SMALL_GAP = 0.02
SMALL_SHARE = 0.05


def gap_warning(clean: float, corrupt: float) -> str | None:
    """One sentence when |clean − corrupt| is too small for the restored fractions to mean anything
    (under SMALL_GAP, or under SMALL_SHARE of the larger |metric|); None otherwise."""
    gap, scale = abs(clean - corrupt), max(abs(clean), abs(corrupt))
    if gap >= SMALL_GAP and gap >= SMALL_SHARE * scale:
        return None
    return (f"The clean and corrupt inputs differ by only {gap:.4g} in the metric (under {SMALL_GAP} or "
            f"{SMALL_SHARE:.0%} of its size, {scale:.4g}): every restored fraction divides by that gap, so "
            "tiny changes read as large ones and this map means little. Choose a pair the model tells apart.")


def check_restorable(clean: float, corrupt: float) -> None:
    """A ModelError instead of a division by zero when the two inputs measure the same."""
    if nothing_to_restore(clean, corrupt):
        raise ModelError(f"nothing to restore: the clean and corrupt inputs give the same metric ({clean:.6g}); "
                         "choose inputs (or answer words) the model tells apart")


def restored_fraction(patched: np.ndarray, clean: float, corrupt: float) -> np.ndarray:
    """(patched − corrupt) / (clean − corrupt), elementwise; NaN stays NaN (a cell with no site)."""
    check_restorable(clean, corrupt)
    return (np.asarray(patched, dtype=np.float64) - corrupt) / (clean - corrupt)


@dataclass(frozen=True)
class Patching:
    """One patching experiment: the two inputs, the metric on each, and every site's patched metric.

    ``patched`` has one row per entry of ``rows`` (a layer, or ``encoder 0`` / ``decoder 0`` /
    ``cross 0`` on an encoder–decoder); ``heads``/``patterns``: (rows, heads); ``resid``: (rows,
    positions); ``head_positions``: (rows, heads, positions). Where rows read inputs of different
    lengths (an encoder–decoder's source and target) the shorter ones are padded with NaN.
    """

    model: str
    site: str
    metric: str  # what was measured, in words
    tokens: tuple[str, ...]  # the clean input's token labels
    corrupt_tokens: tuple[str, ...]
    clean: float
    corrupt: float
    patched: np.ndarray
    rows: tuple[str, ...]
    noising: bool = False
    # encoder–decoder: the decoder inputs each run was teacher-forced on (<bos> + words)
    target_tokens: tuple[str, ...] | None = None
    corrupt_target_tokens: tuple[str, ...] | None = None

    @property
    def warning(self) -> str | None:
        """A sentence when the two metrics are too close for the map to mean anything (gap_warning)."""
        return gap_warning(self.clean, self.corrupt)

    @property
    def restored(self) -> np.ndarray:
        """Every site's restored fraction, shaped like ``patched``."""
        return restored_fraction(self.patched, self.clean, self.corrupt)

    def __getitem__(self, key: str) -> Any:
        """The JSON's keys: ``result["heads"]`` is the restored fraction (numpy)."""
        return self.to_dict(arrays=True)[key]

    def keys(self) -> list[str]:
        return list(self.to_dict(arrays=True))

    def to_dict(self, arrays: bool = False) -> dict[str, Any]:
        """The CLI's JSON: ``tokens``, ``corrupt_tokens``, ``metric``, ``clean``, ``corrupt`` and the
        site's restored fractions (one list per row; NaN → null). An encoder–decoder adds ``rows``
        and the decoder inputs (``target_tokens``, ``corrupt_target_tokens``); a gap too small to
        read the map by adds ``warning`` (a sentence)."""
        restored = self.restored
        out: dict[str, Any] = {
            "tokens": list(self.tokens),
            "corrupt_tokens": list(self.corrupt_tokens),
            "metric": self.metric,
            "clean": float(self.clean),
            "corrupt": float(self.corrupt),
            self.site: restored if arrays else _json_ready(restored),
        }
        if self.target_tokens is not None:
            out["rows"] = list(self.rows)
            out["target_tokens"] = list(self.target_tokens)
            out["corrupt_target_tokens"] = list(self.corrupt_target_tokens or ())
        if self.warning is not None:
            out["warning"] = self.warning
        return out


def _json_ready(values: np.ndarray) -> list:
    return [_json_ready(row) if isinstance(row, np.ndarray) else (None if math.isnan(row) else round(float(row), 6))
            for row in values]


@dataclass(frozen=True)
class Preset:
    """A clean/corrupt pair that shows something, per model."""

    clean: str
    corrupt: str
    answer: str
    wrong: str
    site: str
    what: str  # one sentence: what the pair tests

    @property
    def inputs(self) -> tuple[str, str, str, str]:
        return self.clean, self.corrupt, self.answer, self.wrong


PRESETS: dict[str, Preset] = {
    "minilm": Preset(
        "The animal didn't cross the street because it was too tired.",
        "The animal didn't cross the street because it was too wide.",
        "animal", "street", "heads",
        "coreference: 'tired' makes 'it' the animal, 'wide' the street",
    ),
    "toy-translate": Preset(
        "the law that the council signed .",
        "the treaty that the council signed .",
        "signée", "signé", "heads",
        "gender agreement: the participle after 'que' agrees with its feminine or masculine antecedent",
    ),
    "induction": Preset(
        "q 7 m x 2 k a q 7 m x 2 k",
        "k x a 2 q m 7 q 7 m x 2 k",
        "a", "x", "heads",
        "induction: after a repeated 'k' the model predicts what followed 'k' before (a), which the "
        "shuffled first copy changes (x)",
    ),
}


def resolve_inputs(model: str, clean: str | None, corrupt: str | None, answer: str | None,
                   wrong: str | None) -> tuple[str, str, str, str]:
    """clean, corrupt, answer, wrong: as given, or all four from the model's preset."""
    given = (clean, corrupt, answer, wrong)
    if all(value is not None for value in given):
        return clean, corrupt, answer, wrong  # type: ignore[return-value]
    preset = PRESETS.get(model)
    if preset is None or any(value is not None for value in given):
        raise ModelError("give the clean and corrupt texts, the answer and the wrong word"
                         + ("" if preset is None else f" (or none of them for {model}'s preset pair)"))
    return preset.inputs
