"""``python -m attention_viz caption``: the npz contract, and bad input refused in one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from attention_viz.cli import main
from attention_viz.errors import ModelError
from attention_viz.inputs.images import MAX_BYTES, read_image
from attention_viz.trained import scenes

ROOT = Path(__file__).resolve().parents[1]


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "attention_viz", "caption", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1"})


def test_scene_npz_contract(tmp_path):
    out = tmp_path / "r.npz"
    done = cli("--scene", "7", "--out", str(out))
    assert done.returncode == 0, done.stderr
    scene = scenes.generate(7)
    with np.load(out, allow_pickle=False) as data:
        words = [str(w) for w in data["caption"]]
        attention, image, boxes = data["attention"], data["image"], data["boxes"]
        assert int(data["seed"]) == 7
    assert words and "<eos>" not in words
    assert attention.shape == (len(words), 8, 8) and attention.dtype == np.float32
    assert np.allclose(attention.sum(axis=(1, 2)), 1.0, atol=1e-5)
    assert np.array_equal(image, scene.image)
    assert len(boxes) == len(scene.objects)
    for entry, obj in zip(boxes, scene.objects):
        assert (str(entry["colour"]), str(entry["shape"]), tuple(int(v) for v in entry["box"])) == (
            obj.colour, obj.shape, obj.box)
        x0, y0, x1, y1 = entry["box"]
        assert 0 <= x0 < x1 <= image.shape[1] and 0 <= y0 < y1 <= image.shape[0]
    assert " ".join(words) in done.stdout


def test_image_file_gives_the_scene_caption(tmp_path):
    """A scene saved as PNG (lossless, already 64×64) is read back pixel for pixel: same caption."""
    png = tmp_path / "scene.png"
    Image.fromarray(scenes.generate(7).image).save(png)
    by_image, by_scene = tmp_path / "i.npz", tmp_path / "s.npz"
    assert main(["caption", "--image", str(png), "--out", str(by_image)]) == 0
    assert main(["caption", "--scene", "7", "--out", str(by_scene)]) == 0
    with np.load(by_image) as a, np.load(by_scene) as b:
        assert list(a["caption"]) == list(b["caption"])
        assert np.allclose(a["attention"], b["attention"])
        assert "boxes" not in a.files and "seed" not in a.files


def _one_line_error(capsys, argv: list[str]) -> str:
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse's usage errors leave through SystemExit
        code = exit_.code
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err
    return err


def test_bad_input_is_one_line(tmp_path, capsys):
    text = tmp_path / "notes.png"
    text.write_text("this is not an image")
    assert "not a PNG or JPEG" in _one_line_error(capsys, ["caption", "--image", str(text), "--out", str(tmp_path / "a.npz")])
    gif = tmp_path / "x.gif"
    Image.new("RGB", (8, 8)).save(gif)
    assert "not a PNG or JPEG" in _one_line_error(capsys, ["caption", "--image", str(gif), "--out", str(tmp_path / "a.npz")])
    assert "no such image" in _one_line_error(capsys, ["caption", "--image", str(tmp_path / "missing.png"),
                                                       "--out", str(tmp_path / "a.npz")])
    huge = tmp_path / "huge.png"
    with open(huge, "wb") as f:
        f.truncate(MAX_BYTES + 1)
    assert _one_line_error(capsys, ["caption", "--image", str(huge), "--out", str(tmp_path / "a.npz")]) == (
        f"error: {huge} is 20.0 MB; image files up to 20 MB are read\n")  # told from its size, never read
    assert ".npz" in _one_line_error(capsys, ["caption", "--scene", "1", "--out", str(tmp_path / "a.txt")])
    for argv in (["caption", "--scene", "-4", "--out", "a.npz"], ["caption", "--scene", "x", "--out", "a.npz"],
                 ["caption", "--scene", "1", "--image", "f.png", "--out", "a.npz"], ["caption", "--out", "a.npz"]):
        _one_line_error(capsys, argv)
    assert not any(tmp_path.glob("*.npz"))


def test_huge_dimensions_refused_before_decoding(tmp_path):
    """A tiny file that claims 12 000 × 5 000 pixels (a decompression bomb) is refused from its header."""
    bomb = tmp_path / "bomb.png"
    Image.new("1", (12_000, 5_000)).save(bomb)
    assert bomb.stat().st_size < 200_000
    with pytest.raises(ModelError, match=r"is 12,000 × 5,000 pixels \(60 megapixels\); images up to 40 megapixels"):
        read_image(bomb.read_bytes(), 64, (0, 0, 0))


def test_images_are_fitted_without_distortion():
    """A wide red image fills the middle band of the square; the rest is background; transparency
    is laid on the background."""
    import io

    buffer = io.BytesIO()
    Image.new("RGBA", (200, 100), (255, 0, 0, 255)).save(buffer, format="PNG")
    fitted = read_image(buffer.getvalue(), 64, (10, 20, 30))
    assert fitted.shape == (64, 64, 3) and fitted.dtype == np.uint8
    assert (fitted[16:48] == (255, 0, 0)).all()
    assert (fitted[:16] == (10, 20, 30)).all() and (fitted[48:] == (10, 20, 30)).all()
    buffer = io.BytesIO()
    Image.new("RGBA", (64, 64), (255, 255, 255, 0)).save(buffer, format="PNG")
    assert (read_image(buffer.getvalue(), 64, (10, 20, 30)) == (10, 20, 30)).all()
    buffer = io.BytesIO()
    Image.new("RGB", (640, 480), (0, 200, 0)).save(buffer, format="JPEG")
    jpeg = read_image(buffer.getvalue(), 64, (0, 0, 0))
    assert np.abs(jpeg[32, 32].astype(int) - (0, 200, 0)).max() < 10
