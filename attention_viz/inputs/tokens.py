"""Text → tokens with display labels, spans into the text, flags and word grouping.

Everything downstream (figures, exports, the page) shows tokens through :class:`Tokens`, never
through raw vocabulary strings. The rules, in one place:

**Labels.** A token's label is the piece of the *original* text it came from, found through the
tokenizer's character offsets. So "The" shows as "The" even for an uncased model, "naïve" keeps
its accent, and a character the vocabulary maps to ``[UNK]`` (e.g. 欢 for MiniLM) shows as itself
while ``unknown`` flags it. Special tokens show their token string (``[CLS]``, ``<s>``).
Without usable offsets the token string is cleaned instead (``##`` dropped, ``Ġ``/``▁`` read as a
space, GPT-2 byte-level strings decoded to UTF-8). A label is never empty and never spans lines:
surrounding whitespace is trimmed, a whitespace-only piece shows as ``␣`` (space), ``⏎``
(newline) or ``⇥`` (tab), other invisible characters as ``U+XXXX``, a lone combining mark on a
dotted circle ``◌``.

**Offsets.** ``offsets[i]`` is the span the label was cut from: the tokenizer's span with
surrounding whitespace trimmed (byte-level BPE spans include the leading space of ``Ġworld``) and
extended over combining marks / variation selectors / format characters that the tokenizer's
normalizer dropped right after it (so "❤️" keeps its U+FE0F and still renders as an emoji).
Invariant: for a non-special token with a span, ``label == text[start:end]`` unless the piece is
whitespace only. ``None`` when there is no span (tokens added by the post-processor).

**Repeats.** Tokens are positions: two "the" are two entries. Plots use integer positions; where
unique strings are needed, :func:`unique_labels` suffixes later occurrences with a subscript
occurrence number ("the", "the₂", "the₃").

**Words.** A word is what a reader sees as one word: a maximal run of tokens with no whitespace
between their spans. Punctuation stays with its word ("didn't" and "tired." are one word each,
though BERT's pre-tokenizer splits them), pieces of one character (byte-level BPE splits an emoji
into several tokens) are one word. Two rules follow the tokenizers: each CJK ideograph is its own
word (Chinese has no spaces and BERT treats every ideograph as a word; we have no segmenter), and
whitespace-only tokens (byte-level ``Ġ``, ``Ċ``) join the word that follows them, as the space of
``Ġworld`` does; trailing ones at the end of the text form one last word. Special tokens belong to
no word (``word_ids[i] is None``) and are units of their own in word-level views.
"""

from __future__ import annotations

import functools
import json
import unicodedata
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

if TYPE_CHECKING:  # only for type hints; the module needs no Encoding at import time
    from tokenizers import Encoding

Span = tuple[int, int]

__all__ = [
    "Tokens",
    "clean_token",
    "from_encoding",
    "from_words",
    "group_words",
    "load_tokenizer",
    "tokenize",
    "unique_labels",
]


UNKNOWN_MARK = " ⟨unk⟩"  # after the label of a word a closed vocabulary maps to <unk>


@dataclass(frozen=True)
class Tokens:
    """One tokenized text. All per-token tuples have the same length (one entry per position)."""

    text: str
    ids: tuple[int, ...]
    labels: tuple[str, ...]
    offsets: tuple[Span | None, ...]
    special: tuple[bool, ...]
    unknown: tuple[bool, ...]
    word_ids: tuple[int | None, ...]

    def __post_init__(self) -> None:
        n = len(self.ids)
        for name in ("labels", "offsets", "special", "unknown", "word_ids"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"Tokens.{name} has {len(getattr(self, name))} entries, ids has {n}")

    def __len__(self) -> int:
        return len(self.ids)

    # -- word level -----------------------------------------------------------------------------
    def word_groups(self) -> list[tuple[int, ...]]:
        """Token positions of each word-level unit, in text order.

        Units are the words (``word_ids``) plus every special token (or token without a word id)
        on its own. This is the axis of :func:`group_words` and :meth:`words`.
        """
        groups: list[list[int]] = []
        unit_of_word: dict[int, int] = {}
        for i, (wid, sp) in enumerate(zip(self.word_ids, self.special)):
            if sp or wid is None:
                groups.append([i])
            elif wid in unit_of_word:
                groups[unit_of_word[wid]].append(i)
            else:
                unit_of_word[wid] = len(groups)
                groups.append([i])
        return [tuple(g) for g in groups]

    def words(self) -> list[str]:
        """Labels of the units of :meth:`word_groups`: the word's text (first to last span),
        or the token label for special tokens and tokens without spans."""
        out: list[str] = []
        for group in self.word_groups():
            spans = [self.offsets[i] for i in group if self.offsets[i] is not None]
            if self.special[group[0]] or not spans:
                out.append(_visible("".join(self.labels[i] for i in group)))
            else:
                start = min(s for s, _ in spans)
                end = max(e for _, e in spans)
                marked = any(self.unknown[i] for i in group) and UNKNOWN_MARK in "".join(self.labels[i] for i in group)
                out.append(_visible(self.text[start:end]) + (UNKNOWN_MARK if marked else ""))
        return out

    def unknown_words(self) -> list[str]:
        """Each word a closed vocabulary read as <unk> and marked so (a subword [UNK] keeps its plain label)."""
        return [t.removesuffix(UNKNOWN_MARK) for t, u in zip(self.labels, self.unknown) if u and t.endswith(UNKNOWN_MARK)]

    # -- serialization --------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict (lists, ints, strs, bools, None); :meth:`from_dict` inverts it exactly."""
        d = asdict(self)
        d["offsets"] = [None if o is None else [o[0], o[1]] for o in self.offsets]
        for key in ("ids", "labels", "special", "unknown", "word_ids"):
            d[key] = list(d[key])
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Tokens:
        return cls(
            text=str(d["text"]),
            ids=tuple(int(i) for i in d["ids"]),
            labels=tuple(str(s) for s in d["labels"]),
            offsets=tuple(None if o is None else (int(o[0]), int(o[1])) for o in d["offsets"]),
            special=tuple(bool(b) for b in d["special"]),
            unknown=tuple(bool(b) for b in d["unknown"]),
            word_ids=tuple(None if w is None else int(w) for w in d["word_ids"]),
        )

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False)

    @classmethod
    def from_json(cls, s: str) -> Tokens:
        return cls.from_dict(json.loads(s))


# ---------------------------------------------------------------------------------------------
# Labels
# ---------------------------------------------------------------------------------------------

_WHITESPACE_SYMBOLS = {"\n": "⏎", "\r": "⏎", "\t": "⇥"}  # any other whitespace shows as "␣"
_INVISIBLE_CATEGORIES = {"Cc", "Cf", "Co", "Cn", "Zl", "Zp", "Zs"}
_COMBINING_CATEGORIES = {"Mn", "Me"}
# Characters a normalizer may drop after a token that still belong to it on screen.
_TRAILING_CATEGORIES = {"Mn", "Me", "Cf"}


def _control_picture(c: str) -> str:
    code = ord(c)
    if code < 0x20:
        return chr(0x2400 + code)
    return "␡" if code == 0x7F else c


def _visible(label: str) -> str:
    """Make a label printable on one line and never empty (see the module docstring)."""
    label = label.replace("\r\n", "\n")
    stripped = label.strip()
    if not stripped:
        if not label:
            return "∅"
        return "".join(_WHITESPACE_SYMBOLS.get(c, "␣") for c in label)
    # Why: a label must fit on one axis tick; inner line breaks/tabs become symbols, and control
    # characters (NUL, ESC, ...) their Unicode "control picture" (␀, ␛) so nothing invisible hides.
    label = "".join(_WHITESPACE_SYMBOLS.get(c, _control_picture(c)) for c in stripped)
    categories = {unicodedata.category(c) for c in label}
    if categories <= _COMBINING_CATEGORIES:
        return "◌" + label  # a lone combining mark, shown the way Unicode charts show it
    if categories <= _INVISIBLE_CATEGORIES | _COMBINING_CATEGORIES:
        return " ".join(f"U+{ord(c):04X}" for c in label)
    return label


_BYTE_LEVEL = decoders.ByteLevel()  # GPT-2's byte table lives in the tokenizers library


def clean_token(token: str, byte_level: bool = False) -> str:
    """A vocabulary string as readable text: ``##`` dropped, ``▁``/``Ġ`` as spaces, byte-level
    strings decoded by the ``tokenizers`` ByteLevel decoder (a piece holding only part of a UTF-8
    character shows as U+FFFD ``�``).

    This is the fallback label when a token has no span in the text; the result is raw text
    (may be whitespace or empty), :func:`_visible` makes it displayable.
    """
    if token.startswith("##") and len(token) > 2:
        token = token[2:]
    if byte_level:
        return _BYTE_LEVEL.decode([token])
    # Why: without the byte-level flag "Ġ"/"Ċ" can only be the GPT-2 space/newline markers.
    return token.replace("▁", " ").replace("Ġ", " ").replace("Ċ", "\n")


def unique_labels(tokens: Tokens | Sequence[str]) -> list[str]:
    """Labels made unique for places that key by string (legends, dict keys, categorical axes).

    The first occurrence keeps its label; later ones get a subscript occurrence number:
    ``["the", "cat", "the"] → ["the", "cat", "the₂"]``. Always unique, even if the text itself
    contains a label like "the₂". Plots should still use integer positions.
    """
    labels = list(tokens.labels) if isinstance(tokens, Tokens) else list(tokens)
    subscripts = str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉")
    seen: set[str] = set()
    count: dict[str, int] = {}
    out: list[str] = []
    for label in labels:
        candidate = label
        while candidate in seen:
            count[label] = count.get(label, 1) + 1
            candidate = label + str(count[label]).translate(subscripts)
        seen.add(candidate)
        out.append(candidate)
    return out


# ---------------------------------------------------------------------------------------------
# Spans and words
# ---------------------------------------------------------------------------------------------


def _is_cjk(c: str) -> bool:
    """The CJK ideograph blocks BERT's ``tokenize_chinese_chars`` splits on."""
    cp = ord(c)
    return (
        0x4E00 <= cp <= 0x9FFF
        or 0x3400 <= cp <= 0x4DBF
        or 0x20000 <= cp <= 0x2A6DF
        or 0x2A700 <= cp <= 0x2B73F
        or 0x2B740 <= cp <= 0x2B81F
        or 0x2B820 <= cp <= 0x2CEAF
        or 0xF900 <= cp <= 0xFAFF
        or 0x2F800 <= cp <= 0x2FA1F
    )


def _display_spans(text: str, raw: Sequence[Span | None]) -> list[Span | None]:
    """Trim whitespace around each span and extend it over trailing dropped marks (see module doc)."""
    # The next token's raw start bounds the extension, so a mark that is a token of its own (or part
    # of an overlapping byte piece) is never claimed twice. Found right to left in one pass: a search
    # from each token was quadratic (2 s at 32k tokens).
    limits, following = [len(text)] * len(raw), len(text)
    for k in range(len(raw) - 1, -1, -1):
        limits[k] = following
        if raw[k] is not None:
            following = raw[k][0]  # type: ignore[index]
    spans: list[Span | None] = []
    for span, limit in zip(raw, limits):
        if span is None:
            spans.append(None)
            continue
        s, e = span
        if text[s:e].strip():
            while text[s].isspace():
                s += 1
            while text[e - 1].isspace():
                e -= 1
        while e < limit and unicodedata.category(text[e]) in _TRAILING_CATEGORIES:
            e += 1
        spans.append((s, e))
    return spans


def _same_word(text: str, a: Span, b: Span) -> bool:
    """Does the token spanning ``b`` continue the word of the token spanning ``a`` just before?"""
    if b[0] < a[1]:
        return True  # overlapping spans: pieces of one character (byte-level BPE)
    if any(c.isspace() for c in text[a[1] : b[0]]):
        return False
    return not any(_is_cjk(c) for c in text[a[0] : a[1]] + text[b[0] : b[1]])


def _word_ids(
    text: str, spans: Sequence[Span | None], special: Sequence[bool], blank: Sequence[bool]
) -> tuple[int | None, ...]:
    """``blank[i]``: token ``i`` is whitespace only (a spanned "Ġ"/"Ċ", or a span-less lone "▁")."""
    word_ids: list[int | None] = []
    current = -1
    prev: Span | None = None  # span of the previous token if it can be continued
    for span, sp, is_blank in zip(spans, special, blank):
        if sp:
            word_ids.append(None)
            prev = None
            continue
        wordy = span is not None and not is_blank
        if not (wordy and prev is not None and _same_word(text, prev, span)):  # type: ignore[arg-type]
            current += 1
        word_ids.append(current)
        prev = span if wordy else None
    # Whitespace-only tokens join the word after them (right to left, so a run of them does too).
    for k in range(len(word_ids) - 2, -1, -1):
        if blank[k] and not special[k] and word_ids[k + 1] is not None and spans[k + 1] is not None:
            word_ids[k] = word_ids[k + 1]
    # Renumber 0, 1, 2, ... in text order.
    renumber: dict[int, int] = {}
    return tuple(None if w is None else renumber.setdefault(w, len(renumber)) for w in word_ids)


# ---------------------------------------------------------------------------------------------
# Building Tokens
# ---------------------------------------------------------------------------------------------


def _blank_over_text(string: str, covered: str, byte_level: bool) -> bool:
    """A whitespace-only piece whose span covers visible characters (a mis-attributed span)."""
    return not clean_token(string, byte_level).strip() and bool(covered.strip())


def from_encoding(
    text: str,
    encoding: Encoding,
    unk_id: int | None,
    special_ids: set[int],
    *,
    byte_level: bool = False,
) -> Tokens:
    """Tokens of ``text`` from a ``tokenizers.Encoding`` of it.

    A token is special if its id is in ``special_ids`` or the encoding's special-tokens mask says
    so (pass ``special_ids`` without the unk id: an unknown character is real text).
    ``byte_level`` only matters for tokens without offsets (GPT-2 strings are then decoded).
    """
    ids = tuple(encoding.ids)
    strings = encoding.tokens
    special = tuple(bool(m) or i in special_ids for i, m in zip(ids, encoding.special_tokens_mask))
    unknown = tuple(unk_id is not None and i == unk_id for i in ids)
    # An empty span means "no position in the text" (post-processor tokens get (0, 0)).
    # A blank piece (SentencePiece's lone "▁") can carry the span of the character after it; it
    # has no text of its own, so it gets no span and shows as "␣".
    raw: list[Span | None] = [
        (s, e) if 0 <= s < e <= len(text) and not _blank_over_text(string, text[s:e], byte_level) else None
        for (s, e), string in zip(encoding.offsets, strings)
    ]
    spans = _display_spans(text, raw)
    blank = [
        not (text[span[0] : span[1]] if span is not None else clean_token(string, byte_level)).strip()
        for string, span in zip(strings, spans)
    ]
    labels: list[str] = []
    for string, sp, span in zip(strings, special, spans):
        if sp:
            labels.append(_visible(string))
        elif span is not None:
            labels.append(_visible(text[span[0] : span[1]]))
        else:
            labels.append(_visible(clean_token(string, byte_level)))
    return Tokens(
        text=text,
        ids=ids,
        labels=tuple(labels),
        offsets=tuple(spans),
        special=special,
        unknown=unknown,
        word_ids=_word_ids(text, spans, special, blank),
    )


def from_words(
    words: Sequence[str],
    ids: Sequence[int],
    special: Sequence[bool],
    *,
    unk_id: int | None = None,
) -> Tokens:
    """Tokens for a whitespace vocabulary (our demo models): one token per word.

    ``text`` is the non-special words joined by single spaces and offsets point into it, so the
    result behaves like any tokenizer output (each non-special token is its own word).
    """
    if not len(words) == len(ids) == len(special):
        raise ValueError("words, ids and special must have the same length")
    parts: list[str] = []
    offsets: list[Span | None] = []
    pos = 0
    for word, sp in zip(words, special):
        if sp:
            offsets.append(None)
            continue
        if not word or any(c.isspace() for c in word):
            raise ValueError(f"a whitespace-vocabulary word must be non-empty, no spaces: {word!r}")
        if parts:
            pos += 1  # the joining space
        offsets.append((pos, pos + len(word)))
        parts.append(word)
        pos += len(word)
    special_t = tuple(bool(s) for s in special)
    # a word the vocabulary lacks is read as <unk>: its label says so (axes, hovers), not only its id
    unknown = tuple(unk_id is not None and int(i) == unk_id and not sp for i, sp in zip(ids, special_t))
    word_ids: list[int | None] = []
    n_words = 0
    for sp in special_t:
        word_ids.append(None if sp else n_words)
        n_words += 0 if sp else 1
    return Tokens(
        text=" ".join(parts),
        ids=tuple(int(i) for i in ids),
        labels=tuple(_visible(w) + (UNKNOWN_MARK if u else "") for w, u in zip(words, unknown)),
        offsets=tuple(offsets),
        special=special_t,
        unknown=unknown,
        word_ids=tuple(word_ids),
    )


# ---------------------------------------------------------------------------------------------
# Tokenizers
# ---------------------------------------------------------------------------------------------


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else {}


def _bert_wordpiece(folder: Path) -> Tokenizer:
    """A BERT WordPiece tokenizer from ``vocab.txt``, configured like ``BertTokenizer``."""
    vocab: dict[str, int] = models.WordPiece.read_file(str(folder / "vocab.txt"))
    cfg = {**_read_json(folder / "config.json"), **_read_json(folder / "tokenizer_config.json")}
    lowercase = cfg.get("do_lower_case")
    if lowercase is None:
        # Why: no config says it, so ask the vocabulary: a cased one holds words like "The".
        lowercase = not any(
            w.isascii() and not w.startswith("[") and any("A" <= c <= "Z" for c in w) for w in vocab
        )
    names: dict[str, str] = {}
    for key in ("pad", "unk", "cls", "sep", "mask"):
        name = cfg.get(f"{key}_token") or f"[{key.upper()}]"
        # Newer configs store an AddedToken as a dict: {"content": "[UNK]", ...}.
        names[key] = str(name["content"] if isinstance(name, dict) else name)
    unk = names["unk"] if names["unk"] in vocab else "[UNK]"

    tok = Tokenizer(models.WordPiece(vocab=vocab, unk_token=unk, max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(
        clean_text=True,
        handle_chinese_chars=bool(cfg.get("tokenize_chinese_chars", True)),
        strip_accents=cfg.get("strip_accents"),  # None: strip only when lowercasing, like BERT
        lowercase=bool(lowercase),
    )
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece(prefix="##")
    tok.add_special_tokens([name for name in names.values() if name in vocab])
    cls, sep = names["cls"], names["sep"]
    if cls in vocab and sep in vocab:
        tok.post_processor = processors.TemplateProcessing(
            single=f"{cls} $A {sep}",
            pair=f"{cls} $A {sep} $B:1 {sep}:1",
            special_tokens=[(cls, vocab[cls]), (sep, vocab[sep])],
        )
    return tok


def _byte_level_bpe(folder: Path) -> Tokenizer:
    """A GPT-2 style tokenizer from ``vocab.json`` + ``merges.txt``."""
    tok = Tokenizer(models.BPE.from_file(str(folder / "vocab.json"), str(folder / "merges.txt")))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    if tok.token_to_id("<|endoftext|>") is not None:
        tok.add_special_tokens(["<|endoftext|>"])
    return tok


def load_tokenizer(folder: Path | str) -> Tokenizer:
    """The tokenizer of a model folder, offline.

    ``tokenizer.json`` if present; else ``vocab.txt`` → BERT WordPiece (lowercasing from
    ``tokenizer_config.json``/``config.json`` ``do_lower_case``, else inferred from the vocabulary);
    else ``vocab.json`` + ``merges.txt`` → GPT-2 byte-level BPE. Padding and truncation are
    switched off (MiniLM's ``tokenizer.json`` pads and truncates to 128!): :func:`tokenize` does
    its own truncation without touching the shared tokenizer.
    """
    folder = Path(folder)
    if (folder / "tokenizer.json").is_file():
        tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    elif (folder / "vocab.txt").is_file():
        tok = _bert_wordpiece(folder)
    elif (folder / "vocab.json").is_file() and (folder / "merges.txt").is_file():
        tok = _byte_level_bpe(folder)
    else:
        raise FileNotFoundError(f"no tokenizer.json, vocab.txt or vocab.json+merges.txt in {folder}")
    tok.no_padding()
    tok.no_truncation()
    return tok


def _unk_id(tokenizer: Tokenizer) -> int | None:
    unk = getattr(tokenizer.model, "unk_token", None)
    if unk:
        return tokenizer.token_to_id(unk)
    unk_id = getattr(tokenizer.model, "unk_id", None)  # Unigram keeps an id, not a string
    return unk_id if isinstance(unk_id, int) else None


def _is_byte_level(tokenizer: Tokenizer) -> bool:
    return any("ByteLevel(" in repr(part) for part in (tokenizer.pre_tokenizer, tokenizer.decoder))


def _copy(tokenizer: Tokenizer) -> Tokenizer:
    """A private copy without padding or truncation."""
    copy = Tokenizer.from_str(tokenizer.to_str())
    copy.no_padding()
    copy.no_truncation()
    return copy


@functools.lru_cache(maxsize=4)
def _truncating(tokenizer: Tokenizer, max_tokens: int) -> Tokenizer:
    """A private copy that truncates at ``max_tokens``, made once per tokenizer and length (a copy
    serializes the whole vocabulary: far slower than the encode it serves); never changed after."""
    copy = _copy(tokenizer)
    copy.enable_truncation(max_tokens)
    return copy


def tokenize(tokenizer: Tokenizer, text: str, max_tokens: int) -> tuple[Tokens, int]:
    """Tokenize ``text`` to at most ``max_tokens`` tokens, special tokens included.

    Returns the tokens and how many text tokens were dropped from the end to fit. Truncation
    happens before the post-processor adds special tokens, so ``[CLS] ... [SEP]`` stays well formed.
    ``Tokens.text`` is always the whole original text. Safe to call concurrently on one tokenizer:
    it is never mutated (one with padding/truncation switched on is copied first).
    """
    shared = tokenizer
    if tokenizer.truncation is not None or tokenizer.padding is not None:
        tokenizer = _copy(tokenizer)
    budget = max_tokens - tokenizer.num_special_tokens_to_add(is_pair=False)
    if budget < 1:
        raise ValueError(f"max_tokens={max_tokens} leaves no room for text tokens")
    # One encode call, so the post-processor runs once: RoBERTa's and BART's trim the leading
    # space off every "Ġword" span, and a second pass would trim the word's first letter too.
    encoding = tokenizer.encode(text)
    dropped = max(0, len(encoding.ids) - max_tokens)
    if dropped:
        # Truncation must happen before the special tokens are added, inside encode: a private
        # copy (long texts only) keeps the shared tokenizer untouched.
        tokenizer = _truncating(shared, max_tokens)
        encoding = tokenizer.encode(text)
    unk_id = _unk_id(tokenizer)
    special_ids = {
        i for i, added in tokenizer.get_added_tokens_decoder().items() if added.special and i != unk_id
    }
    tokens = from_encoding(text, encoding, unk_id, special_ids, byte_level=_is_byte_level(tokenizer))
    return tokens, dropped


# ---------------------------------------------------------------------------------------------
# Word-level attention
# ---------------------------------------------------------------------------------------------


def group_words(
    pattern: np.ndarray, tokens: Tokens, key_tokens: Tokens | None = None
) -> tuple[np.ndarray, list[str]]:
    """Token-level attention ``[..., query, key]`` → word-level ``[..., query_word, key_word]``.

    The rule of Clark et al. 2019 ("What does BERT look at?"): attention *to* a word is the
    **sum** over its pieces (keys), attention *from* a word is the **mean** of its pieces' rows
    (queries). Summing columns keeps each row a distribution, and a mean of distributions is a
    distribution, so rows that summed to 1 still sum to 1. Words are :meth:`Tokens.word_groups`
    (each special token is a unit of its own). Any leading dims (layers, heads) are kept.

    ``key_tokens`` is for cross-attention, where keys are another text (default: ``tokens``).
    The labels returned are the query-side words; the key side's are ``key_tokens.words()``.
    """
    pattern = np.asarray(pattern)
    key_tokens = tokens if key_tokens is None else key_tokens
    if pattern.ndim < 2 or pattern.shape[-2:] != (len(tokens), len(key_tokens)):
        raise ValueError(
            f"pattern shape {pattern.shape} does not end in ({len(tokens)}, {len(key_tokens)})"
        )
    dtype = pattern.dtype if np.issubdtype(pattern.dtype, np.floating) else np.float64
    q_groups, k_groups = tokens.word_groups(), key_tokens.word_groups()
    average = np.zeros((len(q_groups), len(tokens)), dtype=dtype)  # (Wq, q)
    for w, group in enumerate(q_groups):
        average[w, list(group)] = 1.0 / len(group)
    member = np.zeros((len(key_tokens), len(k_groups)), dtype=dtype)  # (k, Wk)
    for w, group in enumerate(k_groups):
        member[list(group), w] = 1.0
    words = average @ pattern.astype(dtype, copy=False) @ member  # (..., Wq, Wk)
    return words, tokens.words()
