"""Synthetic scenes: deterministic, captions true by construction, boxes exactly where the shapes
are; the localization arithmetic against hand-computed cases."""

from __future__ import annotations

import numpy as np
import pytest

from attention_viz.analysis.localization import mass_in_box, uniform_share
from attention_viz.trained import scenes

SEEDS = range(300)


def test_same_seed_same_scene_and_seeds_differ():
    a, b = scenes.generate(41), scenes.generate(41)
    assert np.array_equal(a.image, b.image) and a.objects == b.objects and a.caption == b.caption
    assert not np.array_equal(a.image, scenes.generate(42).image)


def test_image_format_and_object_counts():
    counts = set()
    for seed in SEEDS:
        scene = scenes.generate(seed)
        assert scene.image.shape == (scenes.IMAGE_SIZE, scenes.IMAGE_SIZE, 3) and scene.image.dtype == np.uint8
        counts.add(len(scene.objects))
    assert counts == {1, 2, 3}
    for n in (1, 2, 3):
        assert len(scenes.generate(5, n_objects=n).objects) == n


@pytest.mark.parametrize("seed", [-1, 2**63])
def test_bad_seed_refused(seed):
    with pytest.raises(ValueError):
        scenes.generate(seed)


def test_boxes_are_where_the_shapes_are():
    """Each object's colour fills its box's centre, and outside all boxes there is only background."""
    for seed in SEEDS:
        scene = scenes.generate(seed)
        outside = np.ones(scene.image.shape[:2], dtype=bool)
        for obj in scene.objects:
            x0, y0, x1, y1 = obj.box
            assert 0 <= x0 < x1 <= scenes.IMAGE_SIZE and 0 <= y0 < y1 <= scenes.IMAGE_SIZE
            assert scenes.SIZES[0] <= x1 - x0 == y1 - y0 <= scenes.SIZES[1]
            centre = scene.image[(y0 + y1) // 2, (x0 + x1) // 2].astype(int)
            assert np.abs(centre - scenes.COLOURS[obj.colour]).max() <= scenes.COLOUR_JITTER
            # the shape touches every side of its box: the box is tight
            patch = np.abs(scene.image[y0:y1, x0:x1].astype(int) - scenes.BACKGROUND).max(-1) > 60
            assert patch[:, 0].any() and patch[:, -1].any() and patch[0].any() and patch[-1].any()
            outside &= ~scenes.box_mask(obj.box)
        far = np.abs(scene.image[outside].astype(int) - scenes.BACKGROUND).max()
        assert far <= 6 * scenes.NOISE


def test_caption_grammar_is_true_of_the_picture():
    for seed in SEEDS:
        scene = scenes.generate(seed)
        words = list(scene.caption)
        objects = scene.objects
        assert len(scene.word_objects) == len(words)
        position = 0
        for k, obj in enumerate(objects):
            if k:
                before = objects[k - 1]
                if words[position] == "above":
                    assert obj.box[1] >= before.box[3]  # entirely below the previous object
                    position += 1
                else:
                    assert words[position : position + 2] == ["left", "of"]
                    assert obj.box[0] >= before.box[2] and obj.cell[0] == before.cell[0]
                    position += 2
            assert words[position : position + 3] == ["a", obj.colour, obj.shape]
            assert scene.word_objects[position : position + 3] == (None, k, k)
            assert (scene.word_role(position + 1), scene.word_role(position + 2)) == ("colour", "shape")
            position += 3
        assert position == len(words)
        assert set(words) <= set(scenes.WORDS)


def test_objects_never_overlap():
    for seed in SEEDS:
        boxes = [o.box for o in scenes.generate(seed).objects]
        masks = [scenes.box_mask(b) for b in boxes]
        assert sum(m.sum() for m in masks) == np.logical_or.reduce(masks).sum()


def test_split_seeds_are_disjoint():
    train, dev, test = (set(scenes.split_seeds(s, 1000)) for s in ("train", "dev", "test"))
    assert not (train & dev or train & test or dev & test)
    with pytest.raises(ValueError):
        scenes.split_seeds("train", 10, start=10**9)


def test_mass_in_box_by_hand():
    """8×8 regions of 8 pixels. A one-hot region inside the box counts fully; one half covered
    counts half; a uniform map gives exactly the area share."""
    one_hot = np.zeros((8, 8))
    one_hot[2, 3] = 1.0  # pixels x 24..31, y 16..23
    assert mass_in_box(one_hot, (24, 16, 32, 24), 64, 64) == pytest.approx(1.0)
    assert mass_in_box(one_hot, (20, 16, 28, 24), 64, 64) == pytest.approx(0.5)
    assert mass_in_box(one_hot, (0, 0, 24, 64), 64, 64) == pytest.approx(0.0)
    uniform = np.full((8, 8), 1 / 64)
    box = (5, 9, 17, 30)
    assert mass_in_box(uniform, box, 64, 64) == pytest.approx(uniform_share(box, 64, 64))
    assert uniform_share(box, 64, 64) == pytest.approx(12 * 21 / 4096)
