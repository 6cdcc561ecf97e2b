"""A text longer than a model reads, as windows of the model's length.

A model reads at most its ``max_tokens``; past that, a run keeps the first ones. Windows let a reader look
at any stretch instead: the text is cut into consecutive pieces that each fit the model, and a run of
one piece is a run of that window. The pieces tile the text (joined they give it back), and each cut
falls between words (whitespace, or beside a CJK ideograph, which BERT's tokenizers read as a word of its
own), so a piece tokenizes as that stretch of the whole text does (a word cut in two would come back as
two other words). A word longer than a whole window is the one exception: it is cut.

Only the tokenizer is needed (a backend's ``tokenize``: text → its tokens up to the model's limit, and
how many were dropped), called on bounded pieces, so a long file costs time in proportion to its length.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .tokens import Tokens, _is_cjk  # each ideograph is a word of its own, as tokens.py groups them

Tokenize = Callable[[str], "tuple[Tokens, int]"]
FIRST_PIECE = 4_096  # characters tokenized to find a window's end; doubled while the model reads it all


@dataclass(frozen=True)
class TextWindow:
    """One window: a span of the text and the tokens cut from it (not those the tokenizer adds)."""

    begin: int  # characters
    end: int
    first: int  # index of its first token among the whole text's tokens
    count: int

    def of(self, text: str) -> str:
        return text[self.begin : self.end]

    def label(self, total: int) -> str:
        """“tokens 1,025–1,536 of 3,812”, counted from 1 as a reader counts."""
        return f"tokens {self.first + 1:,}–{self.first + self.count:,} of {total:,}"


def total_tokens(windows: list[TextWindow]) -> int:
    return windows[-1].first + windows[-1].count if windows else 0


def _text_positions(tokens: Tokens) -> list[int]:
    """Positions of the tokens cut from the text, those with a span: a typed ``[MASK]`` is one, the
    ``[CLS]`` the tokenizer adds is not."""
    return [i for i, span in enumerate(tokens.offsets) if span is not None]


def _cut(tokens: Tokens, kept: list[int]) -> int:
    """How many of the ``kept`` text tokens the window holds: all, unless the model's limit fell inside a
    word, which then starts the next window (if it is not the window's only word)."""
    last = kept[-1]
    end = tokens.offsets[last][1]
    text = tokens.text
    if end >= len(text) or text[end].isspace() or _is_cjk(text[end]) or _is_cjk(text[end - 1]):
        return len(kept)
    word = tokens.word_ids[last]
    starts = [n for n, i in enumerate(kept) if tokens.word_ids[i] == word]
    return starts[0] if starts and starts[0] > 0 else len(kept)


def _next(text: str, begin: int, tokenize: Tokenize) -> tuple[int, int] | None:
    """The end (characters) and text token count of the window starting at ``begin``; None where the
    tokens do not point into the text (tokenizers of whitespace vocabularies rewrite it)."""
    size = FIRST_PIECE
    while True:
        piece = text[begin : begin + size]
        tokens, dropped = tokenize(piece)
        if tokens.text != piece:
            return None
        kept = _text_positions(tokens)
        if not kept:
            return None
        if not dropped and begin + size < len(text):  # the model reads all of this piece: look further
            size *= 2
            continue
        if not dropped:
            return len(text), len(kept)
        count = _cut(tokens, kept)
        end = begin + tokens.offsets[kept[count - 1]][1]
        return (end, count) if end > begin else None


def count_tokens(text: str, tokenize: Tokenize) -> int:
    """How many tokens are cut from the whole of ``text`` (not counting those the tokenizer adds)."""
    tokens, dropped = tokenize(text)
    return len(_text_positions(tokens)) + dropped


def split(text: str, tokenize: Tokenize, most: int | None = None) -> list[TextWindow] | None:
    """``text`` as consecutive windows of the model's length (one when it fits), the first ``most`` of them
    when given (each window costs a tokenization); None where this tokenizer cannot be windowed (its
    tokens are not spans of the text)."""
    windows: list[TextWindow] = []
    begin = first = 0
    while begin < len(text) and (most is None or len(windows) < most):
        if windows and not text[begin:].strip():  # trailing whitespace: the last window's, holding no token
            windows[-1] = TextWindow(windows[-1].begin, len(text), windows[-1].first, windows[-1].count)
            break
        found = _next(text, begin, tokenize)
        if found is None:
            return None
        end, count = found
        windows.append(TextWindow(begin, end, first, count))
        begin, first = end, first + count
    return windows
