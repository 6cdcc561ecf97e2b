"""A plain-text file a user uploads or names: the way in for texts longer than the sentence box holds
(thousands of tokens, read blockwise by decoders that can). Bytes in, text out, or a
:class:`ModelError` that says in one sentence what is wrong with the file and what to do about it.

Also where any file a user names on the command line is read (:func:`read_user_file`): a missing
file, a folder or a file without read permission is a sentence too, never an ``OSError``."""

from __future__ import annotations

import codecs
import stat
from pathlib import Path

from ..errors import ModelError

MAX_FILE_BYTES = 500_000  # ~100k words of English: past what any model here reads (32k tokens)
# byte-order mark → (encoding, its name for people). UTF-32 LE's mark begins with UTF-16 LE's: tried first.
BOMS = {
    codecs.BOM_UTF32_LE: ("utf-32-le", "UTF-32"),
    codecs.BOM_UTF32_BE: ("utf-32-be", "UTF-32"),
    codecs.BOM_UTF8: ("utf-8", "UTF-8"),
    codecs.BOM_UTF16_LE: ("utf-16-le", "UTF-16"),
    codecs.BOM_UTF16_BE: ("utf-16-be", "UTF-16"),
}
SAVE_AS_UTF8 = "open it in a text editor, save it with the encoding UTF-8 (Save as → Encoding) and try again"


def read_text_file(name: str, data: bytes) -> str:
    """The file's text (UTF-8, or UTF-16/UTF-32 with a byte-order mark; the mark dropped, line ends as
    written)."""
    if len(data) > MAX_FILE_BYTES:
        raise ModelError(f"{name} is {len(data):,} bytes; files up to {MAX_FILE_BYTES:,} bytes are read")
    bom = next((mark for mark in BOMS if data.startswith(mark)), b"")
    encoding, label = BOMS.get(bom, ("utf-8", "UTF-8"))
    # NUL never occurs in text; it does in nearly every binary format, and in UTF-16/32 (read by their mark)
    if encoding == "utf-8" and b"\x00" in data:
        if _utf16_without_mark(data):
            raise ModelError(f"{name} looks like UTF-16 text without a byte-order mark; {SAVE_AS_UTF8}")
        raise ModelError(f"{name} is not a text file (it holds binary data)")
    try:
        text = data[len(bom):].decode(encoding)
    except UnicodeDecodeError as error:
        where = f"byte {len(bom) + error.start + 1} cannot be decoded"
        if bom:
            raise ModelError(f"{name} starts as {label} text, but {where}; {SAVE_AS_UTF8}") from None
        raise ModelError(f"{name} is not UTF-8 text ({where}; it may be in an older encoding such as "
                         f"Windows-1252); {SAVE_AS_UTF8}") from None
    if "\x00" in text:
        raise ModelError(f"{name} is not a text file (it holds binary data)")
    if not text.strip():
        raise ModelError(f"{name} is empty")
    return text


def _utf16_without_mark(data: bytes) -> bool:
    """Whether the bytes read as UTF-16 (either order) into printable text: a NUL beside most ASCII
    letters, as UTF-16 writes them. Only to say so; such a file is not guessed at and read."""
    for encoding in ("utf-16-le", "utf-16-be"):
        try:
            text = data.decode(encoding)
        except UnicodeDecodeError:
            continue
        if text.strip() and all(c.isprintable() or c in "\t\r\n" for c in text):
            return True
    return False


def read_text_path(path: str | Path) -> str:
    """The text of the file at ``path`` (a command line's argument), read as :func:`read_text_file` reads an upload."""
    return read_text_file(str(path), read_user_file(path, MAX_FILE_BYTES, "text file"))


def read_user_file(path: str | Path, max_bytes: int, kind: str) -> bytes:
    """The bytes of the file at ``path``; ModelError when it is missing, a folder, not a plain file, not
    readable or larger than ``max_bytes`` (told from its size, before reading it)."""
    path = Path(path)
    try:
        info = path.stat()
        if stat.S_ISDIR(info.st_mode):
            raise ModelError(f"{path} is a folder, not a {kind}; name the file inside it")
        if not stat.S_ISREG(info.st_mode):  # a pipe or a device would be read forever, or block
            raise ModelError(f"{path} is not a {kind} but a special file (a pipe or a device)")
        if info.st_size > max_bytes:
            raise ModelError(f"{path} is {info.st_size / 1e6:.1f} MB; {kind}s up to {max_bytes / 1e6:g} MB are read")
        return path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        raise ModelError(f"no such {kind}: {path}") from None
    except PermissionError:
        raise ModelError(f"{path} cannot be read: permission denied (check the file's permissions)") from None
    except OSError as error:
        raise ModelError(f"{path} cannot be read: {(error.strerror or 'the system refused').lower()}") from None
