"""A plain-text file a user uploads: the way in for texts longer than the sentence box holds
(thousands of tokens, read blockwise by decoders that can). Bytes in, text out, or a
:class:`ModelError` that says in one line what is wrong with the file."""

from __future__ import annotations

from .errors import ModelError

MAX_FILE_BYTES = 500_000  # ~100k words of English: past what any model here reads (32k tokens)


def read_text_file(name: str, data: bytes) -> str:
    """The file's text (UTF-8, a byte-order mark dropped, line ends as written)."""
    if len(data) > MAX_FILE_BYTES:
        raise ModelError(f"{name} is {len(data):,} bytes; files up to {MAX_FILE_BYTES:,} bytes are read")
    if b"\x00" in data:  # NUL never occurs in text; it does in nearly every binary format
        raise ModelError(f"{name} is not a text file (it holds binary data)")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise ModelError(f"{name} is not UTF-8 text (byte {error.start + 1} cannot be decoded); "
                         "save it as UTF-8 and upload it again") from None
    if not text.strip():
        raise ModelError(f"{name} is empty")
    return text
