"""Bad files and over-long links get a sentence a person understands: on the command line one line
(`error: ...`, a non-zero exit, no traceback), in the app a message on the page; never an exception's
class name. Text files in UTF-16 or with a byte-order mark are read, to the same text as UTF-8."""

from __future__ import annotations

import io
import os
import re
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from apphelpers import app, charts, messages
from streamlit.testing.v1 import AppTest

from attention_viz.cli import main
from attention_viz.errors import ModelError
from attention_viz.inputs.images import MAX_PIXELS, load_image, read_image
from attention_viz.inputs.text_file import MAX_FILE_BYTES, read_text_file, read_user_file
from attention_viz.ui.state import DEFAULT_TEXT, MAX_TEXT

ROOT = Path(__file__).resolve().parents[1]
TEXT = "Café naïve — 我喜欢吃苹果 🤖\nThe animal didn't cross the street.\n"
CLASS_NAME = re.compile(r"\b\w*(Error|Exception|Warning)\b")  # OSError, DecompressionBombError, ...
DAMAGED = "is damaged or incomplete: its image data ends early; save it again or pick another file"


# ---------------------------------------------------------------- the files, made here


def jpeg() -> bytes:
    """A real photo-sized JPEG (noise: its scan data fills most of the file)."""
    buffer = io.BytesIO()
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (240, 320, 3), dtype=np.uint8)).save(buffer, "JPEG")
    return buffer.getvalue()


def truncated_jpeg() -> bytes:
    data = jpeg()
    return data[: len(data) // 2]


def corrupt_jpeg() -> bytes:
    """Whole (it ends with its EOI marker) but with garbage in the middle of its scan data."""
    data = bytearray(jpeg())
    data[len(data) // 3 : len(data) // 2] = b"\xff" * (len(data) // 2 - len(data) // 3)
    return bytes(data)


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def bomb_png(width: int = 20_000, height: int = 20_000) -> bytes:
    """A 1-bit PNG header claiming width × height pixels, and pixel data that is not even valid zlib:
    refusing it from the header is the only way to say the size (decoding it would fail otherwise)."""
    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"IDAT", b"not zlib data")
            + _chunk(b"IEND", b""))


def bomb_jpeg() -> bytes:
    """A small JPEG whose frame header (SOF0) says 20 000 × 20 000."""
    buffer = io.BytesIO()
    Image.new("L", (8, 8)).save(buffer, "JPEG")
    data = bytearray(buffer.getvalue())
    at = data.index(b"\xff\xc0")
    data[at + 5 : at + 9] = struct.pack(">HH", 20_000, 20_000)  # after marker, length, precision: height, width
    return bytes(data)


def gif() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (8, 8)).save(buffer, "GIF")
    return buffer.getvalue()


def no_class_names(message: str) -> str:
    assert not CLASS_NAME.search(message), message
    return message


# ---------------------------------------------------------------- images


@pytest.mark.parametrize("data, says", [
    (truncated_jpeg(), f"photo.jpg {DAMAGED}"),
    (jpeg()[:20], f"photo.jpg {DAMAGED}"),  # cut inside the header
    (corrupt_jpeg(), "photo.jpg is damaged: its image data cannot be decoded; save it again or pick another file"),
    (bomb_png(), "photo.jpg is 20,000 × 20,000 pixels (400 megapixels); images up to 40 megapixels are read: "
                 "scale it down and try again"),
    (bomb_jpeg(), "photo.jpg is 20,000 × 20,000 pixels (400 megapixels); images up to 40 megapixels"),
    (bomb_png(8_000, 5_001), "photo.jpg is 8,000 × 5,001 pixels (40.01 megapixels); images up to 40 megapixels"),
    (gif(), "photo.jpg is not a PNG or JPEG image; save it as PNG or JPEG, or pick another file"),
    (b"", "photo.jpg is empty (0 bytes); pick another file"),
], ids=["truncated JPEG", "JPEG cut in its header", "corrupt JPEG", "bomb PNG", "bomb JPEG", "just past the limit",
        "GIF", "empty"])
def test_a_bad_image_gets_one_sentence(data, says):
    with pytest.raises(ModelError) as refused:
        read_image(data, 64, (0, 0, 0), "photo.jpg")
    assert str(refused.value).startswith(says) and "\n" not in str(refused.value)
    no_class_names(str(refused.value))


def test_the_bomb_above_is_one_that_pillow_refuses_in_its_own_words():
    """Image.open refuses past 2 × Image.MAX_IMAGE_PIXELS before any caller sees the size; the 400
    megapixels above are past it and still get our sentence (the header is read by PIL's PNG and JPEG
    readers themselves, without Image.open's check)."""
    assert 20_000 * 20_000 > 2 * Image.MAX_IMAGE_PIXELS > MAX_PIXELS
    with pytest.raises(Image.DecompressionBombError):
        Image.open(io.BytesIO(bomb_png()))


def test_a_whole_image_just_under_the_limit_is_read():
    buffer = io.BytesIO()
    Image.new("RGB", (300, 200), (0, 0, 255)).save(buffer, "PNG")
    image = load_image(buffer.getvalue(), "photo.png")
    assert image.size == (300, 200)
    assert (read_image(buffer.getvalue(), 64, (0, 0, 0))[32, 32] == (0, 0, 255)).all()


# ---------------------------------------------------------------- text files


@pytest.mark.parametrize("encoding", ["utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-16-be", "utf-32"])
def test_a_text_file_reads_to_the_same_text_in_every_marked_encoding(encoding):
    data = TEXT.encode(encoding)
    if encoding in ("utf-16-le", "utf-16-be"):  # Python writes no mark for these: Notepad and others do
        data = "\ufeff".encode(encoding) + data
    assert read_text_file("notes.txt", data) == TEXT


@pytest.mark.parametrize("data, says", [
    (TEXT.encode("utf-16-le"), "notes.txt looks like UTF-16 text without a byte-order mark; open it in a text "
                               "editor, save it with the encoding UTF-8 (Save as → Encoding) and try again"),
    ("Café crème".encode("cp1252"), "notes.txt is not UTF-8 text (byte 4 cannot be decoded; it may be in an "
                                    "older encoding such as Windows-1252); open it in a text editor, save it"),
    (b"\xff\xfe" + b"a\x00\x00\xd8", "notes.txt starts as UTF-16 text, but byte 5 cannot be decoded; open it"),
    (gif(), "notes.txt is not a text file (it holds binary data)"),
    ("\ufeffa\x00b".encode("utf-16-le"), "notes.txt is not a text file (it holds binary data)"),
    ("\ufeff \n".encode("utf-16-be"), "notes.txt is empty"),
], ids=["UTF-16 without a mark", "Windows-1252", "broken UTF-16", "GIF", "UTF-16 holding NUL", "blank UTF-16"])
def test_a_text_file_that_cannot_be_read_gets_one_sentence(data, says):
    with pytest.raises(ModelError) as refused:
        read_text_file("notes.txt", data)
    assert str(refused.value).startswith(says), str(refused.value)
    no_class_names(str(refused.value))


def test_a_named_file_that_is_not_a_plain_file_is_refused_before_it_is_read(tmp_path):
    os.mkfifo(tmp_path / "pipe")  # reading it would wait forever
    with pytest.raises(ModelError, match=r"pipe is not a text file but a special file \(a pipe or a device\)$"):
        read_user_file(tmp_path / "pipe", MAX_FILE_BYTES, "text file")
    big = tmp_path / "big.txt"
    with open(big, "wb") as file:
        file.truncate(3_000_000)
    with pytest.raises(ModelError, match=r"big.txt is 3.0 MB; text files up to 0.5 MB are read$"):
        read_user_file(big, MAX_FILE_BYTES, "text file")


# ---------------------------------------------------------------- the command line


def unreadable(path: Path) -> list[str]:
    """Make ``path`` unreadable; the command prefix under which it is (root reads anything: the
    command then runs without the capabilities that let it)."""
    path.chmod(0)
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: no file is unreadable")
    return ["setpriv", "--bounding-set=-dac_override,-dac_read_search"]


def cli(*args: str, prefix: list[str] = ()) -> subprocess.CompletedProcess:
    return subprocess.run([*prefix, sys.executable, "-m", "attention_viz", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1"})


FILES = {  # name → (how to make it in a folder, what the one line says after the path)
    "missing": (lambda folder: folder / "photo.jpg", "no such {kind}: {path}"),
    "folder": (lambda folder: folder, "{path} is a folder, not a {kind}; name the file inside it"),
    "unreadable": (lambda folder: _write(folder / "photo.jpg", jpeg()),
                   "{path} cannot be read: permission denied (check the file's permissions)"),
    "truncated JPEG": (lambda folder: _write(folder / "photo.jpg", truncated_jpeg()), "{path} " + DAMAGED),
    "bomb PNG": (lambda folder: _write(folder / "photo.jpg", bomb_png()),
                 "{path} is 20,000 × 20,000 pixels (400 megapixels); images up to 40 megapixels are read"),
    "binary text": (lambda folder: _write(folder / "notes.txt", gif()),
                    "{path} is not a text file (it holds binary data)"),
    "Windows-1252 text": (lambda folder: _write(folder / "notes.txt", "Café".encode("cp1252")),
                          "{path} is not UTF-8 text (byte 4 cannot be decoded; it may be in an older encoding"),
}


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


ONLY = {"truncated JPEG": "caption", "bomb PNG": "caption", "binary text": "run", "Windows-1252 text": "run"}


@pytest.mark.parametrize("command, case", [(command, case) for case in FILES for command in ("caption", "run")
                                           if ONLY.get(case, command) == command])
def test_a_bad_file_on_the_command_line_is_one_line(command, case, tmp_path):
    make, says = FILES[case]
    path = make(tmp_path)
    prefix = unreadable(path) if case == "unreadable" else []
    out = str(tmp_path / "out.npz")
    argv = (["caption", "--image", str(path)] if command == "caption" else ["run", "--text-file", str(path)])
    done = cli(*argv, "--out", out, prefix=prefix)
    kind = "image file" if command == "caption" else "text file"
    assert done.returncode == 2, done
    assert done.stderr.startswith("error: " + says.format(path=path, kind=kind)), done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr and not done.stdout
    no_class_names(done.stderr)
    assert not Path(out).exists()


def test_a_utf16_text_file_runs_as_its_utf8_text(tmp_path, capsys):
    """Notepad's "Unicode" (UTF-16 LE with its mark): the same tokens as the text typed in."""
    notes = _write(tmp_path / "notes.txt", TEXT.encode("utf-16"))
    done = cli("run", "--text-file", str(notes), "--out", str(tmp_path / "file.npz"))
    assert done.returncode == 0 and not done.stderr, done.stderr
    assert main(["run", "--text", TEXT, "--out", str(tmp_path / "typed.npz")]) == 0
    with np.load(tmp_path / "file.npz") as by_file, np.load(tmp_path / "typed.npz") as typed:
        assert list(by_file["tokens"]) == list(typed["tokens"]) and "我" in list(typed["tokens"])
        assert np.array_equal(by_file["encoder.layers.5.self_attn.pattern"], typed["encoder.layers.5.self_attn.pattern"])


def test_an_out_path_that_is_a_folder_is_said_in_words(tmp_path, capsys):
    folder = tmp_path / "result.npz"
    folder.mkdir()
    assert main(["run", "--text", "hi", "--out", str(folder)]) == 2
    assert capsys.readouterr().err == f"error: {folder}: is a directory\n"  # not "[Errno 21] Is a directory: '…'"


# ---------------------------------------------------------------- the app


def tick_labels(at: AppTest) -> list[str]:
    return charts(at)[0]["layout"]["xaxis"]["ticktext"]


@pytest.fixture(scope="module")
def default_labels() -> list[str]:
    return tick_labels(app())


def test_an_over_long_link_opens_with_a_message_and_the_default_sentence(default_labels):
    at = app(text="word " * 10_001, view="head", threshold="0.1")  # 50,005 characters
    assert not at.exception and not at.error
    assert messages(at) == [
        "The link's sentence is too long for a link: 50,005 characters, and links carry up to 20,000. The page "
        "shows the default instead; to read it, save it as a .txt file and upload it in the sidebar's “Or a long "
        "text (.txt file)” box (pasted into the Sentence box, only its first 20,000 characters are kept)."]
    assert at.text_area(key="text").value == DEFAULT_TEXT
    assert tick_labels(at) == default_labels
    assert at.slider(key="head_threshold").value == 0.1  # the rest of the link still applies
    assert at.query_params["text"] == DEFAULT_TEXT  # the address bar no longer carries 50 KB
    at.text_area(key="text").set_value("A sentence of my own.").run()
    assert not messages(at)  # said until the user gives the page a text of their own


def test_a_link_just_at_the_limit_is_read_whole():
    at = app(text=("word " * 4_000)[:MAX_TEXT])
    assert not at.exception
    assert at.text_area(key="text").value == ("word " * 4_000)[:MAX_TEXT]
    assert not any("too long for a link" in m for m in messages(at))


@pytest.mark.parametrize("params, says", [
    ({"model": "hf:" + "a" * 30_000}, "The link's model name is too long for a link: 30,003 characters, and links "
                                      "carry up to 20,000. The page shows the default instead; to read it, paste it "
                                      "into its box (up to 20,000 characters)."),
    ({"view": "compare", "mode": "sentences", "text_b": "b " * 15_000},
     "The link's second sentence is too long for a link: 30,000 characters"),
])
def test_any_over_long_value_in_a_link_is_said_and_left_out(params, says, default_labels):
    at = app(**params)
    assert not at.exception and not at.error
    assert [m for m in messages(at) if "too long for a link" in m][0].startswith(says)
    assert tick_labels(at) == default_labels


def test_a_utf16_upload_reads_as_its_utf8_text():
    at = app()
    at.file_uploader(key="text_file").set_value(("notes.txt", TEXT.encode("utf-16"), "text/plain")).run()
    assert not at.exception and not messages(at)
    by_file = tick_labels(at)
    at.file_uploader(key="text_file").set_value(None).run()
    at.text_area(key="text").set_value(TEXT).run()
    assert by_file == tick_labels(at) and "我" in by_file


@pytest.mark.parametrize("data, says", [
    (gif(), "notes.txt is not a text file (it holds binary data)"),
    ("Café".encode("cp1252"), "notes.txt is not UTF-8 text (byte 4 cannot be decoded; it may be in an older "
                              "encoding such as Windows-1252); open it in a text editor, save it with the encoding "
                              "UTF-8 (Save as → Encoding) and try again"),
    (TEXT.encode("utf-16-be"), "notes.txt looks like UTF-16 text without a byte-order mark"),
], ids=["GIF", "Windows-1252", "UTF-16 without a mark"])
def test_a_bad_text_upload_is_said_and_the_sentence_still_runs(data, says, default_labels):
    at = app()
    at.file_uploader(key="text_file").set_value(("notes.txt", data, "text/plain")).run()
    assert not at.exception
    assert [m for m in messages(at)][0].startswith(says)
    no_class_names(messages(at)[0])
    assert tick_labels(at) == default_labels


@pytest.mark.parametrize("data, says", [
    (truncated_jpeg(), f"the uploaded file {DAMAGED}"),
    (bomb_png(), "the uploaded file is 20,000 × 20,000 pixels (400 megapixels); images up to 40 megapixels are "
                 "read: scale it down and try again"),
    (corrupt_jpeg(), "the uploaded file is damaged: its image data cannot be decoded"),
], ids=["truncated JPEG", "bomb PNG", "corrupt JPEG"])
def test_a_bad_image_upload_is_said_on_the_image_page(data, says):
    at = app(view="image")
    at.radio(key="image_source").set_value("upload").run()
    at.file_uploader(key="image_upload").set_value(("photo.jpg", data, "image/jpeg")).run()
    assert not at.exception
    assert [e.value for e in at.error] and at.error[0].value.startswith(says), [e.value for e in at.error]
    no_class_names(at.error[0].value)
