"""Synthetic scenes for the Show, Attend and Tell demo: small images of coloured shapes whose
caption and object boxes are known by construction.

A scene is a 64×64 RGB image on a dark, slightly noisy background with one to three objects.
Every object has a colour (red, green, blue, yellow), a shape (circle, square, triangle) and a
size of 10–16 pixels, and sits in its own cell of an invisible 3×3 layout, jittered inside it.
Because objects never share a row *and* overlap, the spatial words of the caption are true by
construction:

    caption  -> object (relation object){0,2}
    object   -> "a" COLOUR SHAPE
    relation -> "above"     when the next object lies in a lower layout row
              | "left of"   when it lies in the same row, further right

Objects are named in reading order (layout row, then column), so the caption is a function of
the image: a model can in principle reach 100 % exact match. Each object's gold box is
``(x0, y0, x1, y1)`` in pixels of the image, ``x1``/``y1`` exclusive, and each caption word
knows which object it names (colour and shape words) or ``None`` ("a", relations).

Everything is generated from an integer seed with numpy's PCG64 generator; the split of the
seed space (:func:`split_seeds`) keeps training and held-out scenes disjoint. No torch here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

IMAGE_SIZE = 64
LAYOUT = 3  # objects sit in distinct cells of a LAYOUT × LAYOUT layout
MAX_OBJECTS = 3
SIZES = (10, 16)  # smallest and largest side of an object, pixels (inclusive)
BACKGROUND = (30, 30, 34)
COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (220, 50, 45),
    "green": (50, 185, 70),
    "blue": (60, 95, 235),
    "yellow": (235, 210, 50),
}
SHAPES = ("circle", "square", "triangle")
RELATIONS = {"above": ("above",), "left of": ("left", "of")}
WORDS = ("a", *COLOURS, *SHAPES, "above", "left", "of")  # the caption vocabulary
COLOUR_JITTER = 20  # ± per channel, so colour is a range, not one exact value
NOISE = 6.0  # standard deviation of the background noise (grey levels)

# Disjoint seed ranges: scenes used for training never appear in dev or test.
SPLIT_OFFSETS = {"train": 0, "dev": 1_000_000_000, "test": 2_000_000_000}
MAX_SEED = 2**63 - 1


@dataclass(frozen=True)
class SceneObject:
    colour: str
    shape: str
    box: tuple[int, int, int, int]  # (x0, y0, x1, y1) in pixels, x1/y1 exclusive
    cell: tuple[int, int]  # (row, column) in the layout

    @property
    def area(self) -> int:
        x0, y0, x1, y1 = self.box
        return (x1 - x0) * (y1 - y0)


@dataclass(frozen=True)
class Scene:
    seed: int
    image: np.ndarray  # (IMAGE_SIZE, IMAGE_SIZE, 3) uint8
    objects: tuple[SceneObject, ...]  # in reading order, as the caption names them
    caption: tuple[str, ...]
    word_objects: tuple[int | None, ...]  # per caption word: the object it names, or None

    def word_role(self, i: int) -> str | None:
        """"colour", "shape" or None for caption word ``i``."""
        word = self.caption[i]
        return "colour" if word in COLOURS else "shape" if word in SHAPES else None

    def named_box(self, words: tuple[str, ...] | list[str], t: int) -> tuple[int, int, int, int] | None:
        """The gold box of the object that word ``t`` of a generated caption names: when it is a
        colour or shape word equal to this scene's caption word at the same position; else None."""
        if t >= len(self.caption) or words[t] != self.caption[t] or self.word_objects[t] is None:
            return None
        return self.objects[self.word_objects[t]].box


def cell_edges(size: int = IMAGE_SIZE, layout: int = LAYOUT) -> list[int]:
    """Pixel edges of the layout cells: [0, 21, 43, 64] for 64 pixels and 3 cells."""
    return [round(i * size / layout) for i in range(layout + 1)]


def shape_mask(shape: str, side: int) -> np.ndarray:
    """(side, side) bool mask of a shape filling its box: a disc, the full square, or a triangle
    with its base on the bottom edge and its apex at the top centre."""
    centre = (side - 1) / 2
    ys, xs = np.mgrid[0:side, 0:side].astype(np.float64)
    if shape == "square":
        return np.ones((side, side), dtype=bool)
    if shape == "circle":
        return (xs - centre) ** 2 + (ys - centre) ** 2 <= (side / 2) ** 2
    if shape == "triangle":
        half_width = (ys + 1) / 2  # widens linearly from the apex to the full base
        return np.abs(xs - centre) <= half_width
    raise ValueError(f"unknown shape {shape!r}; expected one of {SHAPES}")


def caption_for(objects: tuple[SceneObject, ...]) -> tuple[tuple[str, ...], tuple[int | None, ...]]:
    """The grammar's caption of objects in reading order, and the object each word names."""
    words: list[str] = []
    owners: list[int | None] = []
    for k, obj in enumerate(objects):
        if k:
            previous = objects[k - 1]
            relation = RELATIONS["above" if obj.cell[0] > previous.cell[0] else "left of"]
            words += relation
            owners += [None] * len(relation)
        words += ["a", obj.colour, obj.shape]
        owners += [None, k, k]
    return tuple(words), tuple(owners)


def generate(seed: int, n_objects: int | None = None) -> Scene:
    """The scene of ``seed`` (any integer in [0, 2**63)); ``n_objects`` forces 1..3 objects."""
    if not 0 <= seed <= MAX_SEED:
        raise ValueError(f"a scene seed is an integer from 0 to {MAX_SEED}, got {seed}")
    rng = np.random.default_rng(seed)
    count = int(rng.integers(1, MAX_OBJECTS + 1)) if n_objects is None else n_objects
    if not 1 <= count <= MAX_OBJECTS:
        raise ValueError(f"a scene has 1 to {MAX_OBJECTS} objects, not {count}")
    edges = cell_edges()
    cells = sorted(divmod(int(c), LAYOUT) for c in rng.choice(LAYOUT * LAYOUT, size=count, replace=False))
    image = np.empty((IMAGE_SIZE, IMAGE_SIZE, 3), dtype=np.float64)
    image[:] = BACKGROUND
    image += rng.normal(0.0, NOISE, size=image.shape)
    objects = []
    for row, col in cells:  # sorted: reading order
        colour = list(COLOURS)[int(rng.integers(len(COLOURS)))]
        shape = SHAPES[int(rng.integers(len(SHAPES)))]
        side = int(rng.integers(SIZES[0], SIZES[1] + 1))
        # one free pixel to each cell border, so boxes of neighbouring cells never touch
        x0 = int(rng.integers(edges[col] + 1, edges[col + 1] - side))
        y0 = int(rng.integers(edges[row] + 1, edges[row + 1] - side))
        rgb = np.clip(np.array(COLOURS[colour]) + rng.integers(-COLOUR_JITTER, COLOUR_JITTER + 1, 3), 0, 255)
        mask = shape_mask(shape, side)
        image[y0 : y0 + side, x0 : x0 + side][mask] = rgb
        objects.append(SceneObject(colour, shape, (x0, y0, x0 + side, y0 + side), (row, col)))
    caption, owners = caption_for(tuple(objects))
    pixels = np.clip(np.rint(image), 0, 255).astype(np.uint8)
    return Scene(seed, pixels, tuple(objects), caption, owners)


def split_seeds(split: str, n: int, start: int = 0) -> range:
    """Seeds ``start .. start+n-1`` of one split ("train", "dev", "test"); the ranges never overlap."""
    offset = SPLIT_OFFSETS[split]
    if start < 0 or n < 0 or start + n > 1_000_000_000:
        raise ValueError("a split holds seeds 0 .. 10**9 - 1 relative to its offset")
    return range(offset + start, offset + start + n)


def box_mask(box: tuple[int, int, int, int], size: int = IMAGE_SIZE) -> np.ndarray:
    """(size, size) bool mask of the pixels inside ``box``."""
    x0, y0, x1, y1 = box
    mask = np.zeros((size, size), dtype=bool)
    mask[y0:y1, x0:x1] = True
    return mask


if __name__ == "__main__":  # python -m attention_viz.trained.scenes: a few captions and boxes
    for s in range(5):
        scene = generate(s)
        print(s, " ".join(scene.caption), [(o.colour, o.shape, o.box) for o in scene.objects])
