"""Long texts from a file: a .txt upload carries texts past the sentence box's 20,000 characters the
box's way (the head view then reads all of it blockwise); a file that cannot be read gets one line,
never a traceback, and the box's sentence still runs."""

from __future__ import annotations

import numpy as np
import pytest

from apphelpers import app, level_maps, plain
from single_view import figures, link, problems
from test_ours_decoder import WORDS, save

from attention_viz.errors import ModelError
from attention_viz.inputs.text_file import MAX_FILE_BYTES, read_text_file
from attention_viz.ui.inputs import MAX_TEXT

LENGTH = 4000  # words; the tiny checkpoint reads 4096 positions
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01"


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    root = tmp_path_factory.mktemp("upload")
    save(root / "llama", "llama", max_position_embeddings=4096)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ATTENTION_VIZ_MODEL_ROOTS", str(root))
        yield f"hf:{root / 'llama'}"


def long_text() -> str:
    """LENGTH words, one in five a long word outside the vocabulary (one <unk> token each)."""
    rng = np.random.default_rng(0)
    return " ".join(rng.choice([*WORDS, *["hippopotamuses"] * 4], LENGTH))


def test_reading_a_text_file():
    assert read_text_file("a.txt", "\ufeffcafé\r\nnaïve".encode()) == "café\r\nnaïve"  # the byte-order mark dropped
    for data, says in ((PNG, "binary"), ("café".encode("latin-1"), "byte 4 cannot be decoded"), (b" \n\t", "empty"),
                       (b"a" * (MAX_FILE_BYTES + 1), f"{MAX_FILE_BYTES:,} bytes are read")):
        with pytest.raises(ModelError, match=says):
            read_text_file("x.txt", data)


def test_an_uploaded_text_longer_than_the_box_is_read_whole(llama):
    text = long_text()
    assert len(text) > MAX_TEXT
    at = app(view="head", model=llama)
    at.file_uploader(key="text_file").set_value(("long.txt", text.encode(), "text/plain")).run()
    assert problems(at) == []
    assert any(f"{LENGTH + 1:,} tokens" in info.value for info in at.info)  # <s> + every word, past the box's limit
    captions = [plain(c.value) for c in at.sidebar.caption]
    assert any("Reading long.txt" in c and "link cannot carry" in c for c in captions)
    [(_, _, levels)] = level_maps(at)
    assert levels.dtype == np.uint8 and levels.shape == (501, 501)  # 8 tokens a tile
    assert link(at).get("text") != text  # the link holds the box's sentence, never the file
    at.file_uploader(key="text_file").set_value(None).run()  # the file removed: the box's sentence again
    assert problems(at) == [] and not at.info and figures(at)[0]["data"][0]["z"]["dtype"] == "f4"


def test_files_that_cannot_be_read_get_one_line(llama):
    at = app(view="head", model=llama, text="the cat sat on the mat")
    for name, data, says in (("image.txt", PNG, "binary data"), ("latin1.txt", "café".encode("latin-1"), "not UTF-8"),
                             ("empty.txt", b"", "empty"), ("big.txt", b"a " * 300_000, "bytes are read")):
        at.file_uploader(key="text_file").set_value((name, data, "text/plain")).run()
        assert not at.exception
        (error,) = [plain(e.value) for e in at.error]
        assert name in error and says in error and "\n" not in error
        assert figures(at)[0]["data"][0]["z"]["dtype"] == "f4"  # the box's sentence still runs
