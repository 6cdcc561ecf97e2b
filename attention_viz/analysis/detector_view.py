"""The head-detector page's plain data: every score over runs already made (the probe set plus
the user's text), the user's marked query → key pairs in link form, and a repeated sequence to
type in."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from ..core.names import CROSS, Group
from ..core.result import AttentionResult
from .detector import MASKS, detect, offset_mask, pairs_mask

NAMES = {
    "previous_token": "previous token",
    "duplicate_token": "duplicate token",
    "induction": "induction",
    "sink": "sink (special / first token)",
    "self": "self",
}
MEANINGS = {
    "previous_token": "share of attention on the token just before",
    "duplicate_token": "share on earlier copies of the same token (rows that have one)",
    "induction": "share on the token after an earlier copy: [A][B] … [A] → [B] (rows that have one)",
    "sink": "share on the special tokens ([CLS], [SEP], <bos>), or the first token when there are none",
    "self": "share on the token itself",
}
OFFSET = "offset"
PATTERN = "pattern"


def self_attentions(result: AttentionResult) -> list[Group]:
    """The attentions the detector can score: queries and keys from one sequence (not cross)."""
    return [group for group in result.attentions() if group != CROSS]


def detector_scores(
    probes: Sequence[AttentionResult], user: AttentionResult, group: Group, offset: int
) -> dict[str, np.ndarray]:
    """The built-in scores plus fixed offset ``offset`` (key ``OFFSET``), ``{name: [layers, heads]}``,
    averaged over every counted row of ``probes`` and ``user``. The runs are done already, so the
    detector's "texts" are their indices."""
    runs = [*probes, user]
    masks = {**MASKS, OFFSET: offset_mask(offset)}
    return detect(lambda index: runs[int(index)], [str(i) for i in range(len(runs))], group, masks)


def long_detector_scores(probes: Sequence[AttentionResult], summed: dict[str, tuple[np.ndarray, int]],
                         group: Group, offset: int) -> dict[str, np.ndarray]:  # fmt: skip
    """:func:`detector_scores` with a long text's row scores (``summed``: analysis.long_detector's
    ``long_scores``) in place of the user's run."""
    masks = {**MASKS, OFFSET: offset_mask(offset)}
    return detect(lambda index: probes[int(index)], [str(i) for i in range(len(probes))], group, masks, summed)


def pattern_scores(user: AttentionResult, group: Group, pairs: Iterable[tuple[int, int]]) -> np.ndarray:
    """``[layers, heads]``: each head's share of attention on the marked pairs of the user's text,
    averaged over the marked query rows."""
    return detect(lambda _: user, [""], group, {PATTERN: pairs_mask(pairs)})[PATTERN]


def format_pairs(pairs: Iterable[tuple[int, int]]) -> str:
    """``[(5, 2), (7, 1)]`` → ``"5-2,7-1"`` (query-key, 0-indexed: the link's spelling)."""
    return ",".join(f"{q}-{k}" for q, k in pairs)


def parse_pairs(text: str, n_tokens: int) -> list[tuple[int, int]]:
    """Pairs from the link; items that are malformed, repeated or outside ``n_tokens`` are dropped."""
    pairs: list[tuple[int, int]] = []
    for item in text.split(","):
        q, dash, k = item.strip().partition("-")
        if dash and q.isdigit() and k.isdigit() and int(q) < n_tokens and int(k) < n_tokens:
            pair = (int(q), int(k))
            if pair not in pairs:
                pairs.append(pair)
    return pairs


def repeated_sequence_of(texts: Sequence[str]) -> str | None:
    """The first text that is one sequence of words typed twice (a probe for induction heads)."""
    for text in texts:
        words = text.split()
        half = len(words) // 2
        if half and len(words) % 2 == 0 and words[:half] == words[half:]:
            return text
    return None
