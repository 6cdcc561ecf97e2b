"""A text carried by a link, compressed: the ``tz`` parameter.

A long text in a plain ``text=`` parameter is its UTF-8 percent-encoded, so a page of English makes a
link few places accept. ``tz`` holds the same text as raw deflate (zlib level 9) in URL-safe base64
without padding, after one character naming the preset dictionary it was compressed against.

The dictionary (``link_words.txt``, one entry a line, joined by spaces) lets a text's first use of a
common word be a reference instead of its letters: the first 4,000 alphabetic whole words of BERT's
uncased WordPiece vocabulary (the one minilm reads; WordPiece learned them roughly in order of
frequency), then a few common English phrases. Deflate codes nearer references in fewer bits, so the
file runs from the least common entry to the most common. A link made today must open for good: the
file never changes (a test pins it); another dictionary would come under a new version character.

Reading a value never trusts it: anything that is not this encoding, is cut short, or opens to more
than the box holds is refused in one sentence, and the inflating stops at the box's size, so a small
value that would open to gigabytes costs no more than a full box.
"""

from __future__ import annotations

import base64
import binascii
import functools
import re
import urllib.parse
import zlib
from pathlib import Path

from ..errors import ModelError

PARAM = "tz"
VERSION = "1"  # the dictionary in link_words.txt
WORDS = Path(__file__).with_name("link_words.txt")
READABLE = 1_000  # characters of a plain ``text=`` value: a link shorter than this stays readable
_WINDOW = -15  # raw deflate (no zlib header or checksum), the largest window: 32 KB
_BASE64URL = re.compile(r"[A-Za-z0-9_-]*")
_MAX_BYTES_PER_CHAR = 4  # UTF-8


@functools.cache
def dictionary(version: str = VERSION) -> bytes:
    """The preset dictionary of ``version``: the words file's entries joined by spaces."""
    if version != VERSION:
        raise ModelError("the compressed text was written by another version of attention-viz")
    entries = WORDS.read_text(encoding="utf-8").splitlines()
    return (" ".join(entries) + " ").encode("utf-8")[-32_768:]  # deflate reaches 32 KB back at most


@functools.lru_cache(maxsize=16)  # the page writes its link after every run, mostly of the same text
def encode(text: str) -> str:
    """``text`` as a ``tz`` value (raises UnicodeEncodeError for a lone surrogate, as UTF-8 does)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, _WINDOW, 9, zlib.Z_DEFAULT_STRATEGY, dictionary())
    packed = packer.compress(text.encode("utf-8")) + packer.flush()
    return VERSION + base64.urlsafe_b64encode(packed).decode("ascii").rstrip("=")


def decode(value: str, max_chars: int) -> str:
    """The text of a ``tz`` value, at most ``max_chars`` characters; ModelError saying why otherwise."""
    version, body = value[:1], value[1:]
    if not version:
        raise ModelError("the compressed text is empty")
    if not _BASE64URL.fullmatch(body) or len(body) % 4 == 1:
        raise ModelError("the compressed text is damaged (it has characters a link's text never has, "
                         "or was cut mid-character)")
    zdict = dictionary(version)
    try:
        packed = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    except binascii.Error:
        raise ModelError("the compressed text is damaged") from None
    limit = max_chars * _MAX_BYTES_PER_CHAR
    inflater = zlib.decompressobj(_WINDOW, zdict=zdict)
    try:
        raw = inflater.decompress(packed, limit + 1)  # never more than the box holds, whatever it claims
    except zlib.error:
        raise ModelError("the compressed text is damaged") from None
    if len(raw) > limit or inflater.unconsumed_tail:
        raise ModelError(f"the compressed text opens to more than the {max_chars:,} characters a link carries")
    if not inflater.eof:
        raise ModelError("the compressed text is cut short (its end is missing)")
    if inflater.unused_data:
        raise ModelError("the compressed text is damaged (something follows its end)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ModelError("the compressed text is damaged (it does not open to UTF-8 text)") from None
    if len(text) > max_chars:
        raise ModelError(f"the compressed text opens to {len(text):,} characters, and a link carries up to "
                         f"{max_chars:,}")
    return text


def link_value(text: str) -> tuple[str, str]:
    """The parameter that carries ``text`` in a link, and its value: ``tz`` where that is shorter than
    the plain ``text`` value and the plain one is past :data:`READABLE`, else ``text`` as it is."""
    plain = len(urllib.parse.quote_plus(text))
    if plain <= READABLE:
        return "text", text
    try:
        packed = encode(text)
    except UnicodeEncodeError:  # a lone surrogate: the plain parameter carries what it can
        return "text", text
    return (PARAM, packed) if len(packed) < plain else ("text", text)
