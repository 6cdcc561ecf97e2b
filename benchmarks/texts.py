"""Input texts of an exact token count, so every contender reads the same n positions.

Ordinary English prose (so the attention patterns are the usual ones, not those of one word
repeated), rotated by ``variant`` words: each variant is a new text, hence a real model run in the
app rather than a cache hit, with different tokens at every position.
"""

from __future__ import annotations

from attention_viz.backends.base import Backend

PASSAGE = (
    "The animal didn't cross the street because it was too tired. Attention lets every word of a "
    "sentence look at every other word and decide how much each one matters for its own meaning. "
    "In the old port town the fishermen mended their nets while the children ran along the harbour "
    "wall, counting the boats that came back before the storm. A transformer reads all of its input "
    "at once; the order of the words reaches it only through the position encodings added to the "
    "embeddings. Some heads follow the previous token, some the next, and some park their weight on "
    "the separator when nothing else in the sentence is relevant to them. The committee met on a "
    "rainy Tuesday in March and agreed, after a long discussion about the budget, to build a new "
    "library next to the station, with a reading room that opens early for students and late for "
    "workers who come home on the last train."
)
FILLER = "and"  # one WordPiece token wherever it stands


def text_of_tokens(backend: Backend, n: int, variant: int = 0) -> str:
    """A text that ``backend`` tokenizes to exactly ``n`` tokens, special tokens included."""
    words = PASSAGE.split()
    shift = variant % len(words)
    words = (words[shift:] + words[:shift]) * (n // 20 + 2)  # comfortably more than n tokens

    def count(chosen: list[str]) -> int:
        tokens, dropped = backend.tokenize(" ".join(chosen))
        return len(tokens) + dropped

    low, high = 0, len(words)  # binary search: the most words whose tokens still fit
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if count(words[:middle]) <= n else (low, middle - 1)
    chosen = words[:low]
    while count(chosen) < n:  # top up one token at a time
        chosen.append(FILLER)
    text = " ".join(chosen)
    tokens, dropped = backend.tokenize(text)
    if len(tokens) != n or dropped:
        raise RuntimeError(f"no text of exactly {n} tokens (got {len(tokens)}, {dropped} dropped)")
    return text
