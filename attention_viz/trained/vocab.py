"""Word <-> id vocabularies: the translation models' source and target, the captioner's, the
induction model's symbols."""

from __future__ import annotations

import json
from collections import Counter
from typing import TYPE_CHECKING, Iterable, Sequence

if TYPE_CHECKING:
    from .corpus import Pair

class Vocab:
    """Word <-> id mapping with ``<pad>``=0, ``<bos>``=1, ``<eos>``=2, ``<unk>``=3."""

    PAD, BOS, EOS, UNK = 0, 1, 2, 3
    SPECIALS = ("<pad>", "<bos>", "<eos>", "<unk>")

    def __init__(self, words: Iterable[str]) -> None:
        self.itos: list[str] = list(self.SPECIALS)
        self.itos += [w for w in dict.fromkeys(words) if w not in self.SPECIALS]
        self.stoi: dict[str, int] = {w: i for i, w in enumerate(self.itos)}

    @classmethod
    def build(cls, sentences: Iterable[Sequence[str]], min_count: int = 1) -> Vocab:
        """Vocabulary of the words in ``sentences``, most frequent first (ties alphabetical)."""
        counts = Counter(word for sentence in sentences for word in sentence)
        kept = (w for w, c in counts.items() if c >= min_count)
        return cls(sorted(kept, key=lambda w: (-counts[w], w)))

    def encode(self, words: Iterable[str], add_bos_eos: bool = False) -> list[int]:
        ids = [self.stoi.get(w, self.UNK) for w in words]
        return [self.BOS, *ids, self.EOS] if add_bos_eos else ids

    def decode(self, ids: Iterable[int], strip: bool = True) -> list[str]:
        """Words for ``ids``; with ``strip``, drop <pad>/<bos> and stop at the first <eos>."""
        words = []
        for i in ids:
            i = int(i)  # accept numpy / torch integers
            if strip and i == self.EOS:
                break
            if strip and i in (self.PAD, self.BOS):
                continue
            words.append(self.itos[i] if 0 <= i < len(self.itos) else self.SPECIALS[self.UNK])
        return words

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, word: object) -> bool:
        return word in self.stoi

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Vocab) and self.itos == other.itos

    def to_json(self) -> str:
        return json.dumps({"itos": self.itos}, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> Vocab:
        itos = json.loads(text)["itos"]
        if tuple(itos[: len(cls.SPECIALS)]) != cls.SPECIALS:
            raise ValueError("not a Vocab JSON: special tokens missing")
        return cls(itos[len(cls.SPECIALS) :])


def build_vocabs(pairs: Iterable[Pair]) -> tuple[Vocab, Vocab]:
    """Separate (source, target) vocabularies of ``pairs`` (usually the train split)."""
    pairs = list(pairs)
    return Vocab.build(p.source for p in pairs), Vocab.build(p.target for p in pairs)
