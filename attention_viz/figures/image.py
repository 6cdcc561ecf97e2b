"""Attention over image regions, drawn on the image (Show, Attend and Tell's figure): plain arrays
in, pixels or ``go.Figure`` out. No torch, no streamlit.

A map is a ``(rows, cols)`` grid of weights; region (r, c) covers the pixels
``[r·h, (r+1)·h) × [c·w, (c+1)·w)`` of an ``H × W`` image (``h = H / rows``, ``w = W / cols``).
:func:`upsample` turns it into one weight per pixel: ``smooth=False`` copies each region's weight
to exactly its pixels (the raw grid), ``smooth=True`` interpolates bilinearly between region
centres (the paper's figures upsample and blur the same way). :func:`overlay` dims the image where
the word did not look.
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from PIL import Image
from plotly.subplots import make_subplots

from .axes import plotly_text
from .style import TEMPLATE
from .text_width import colour_bar_room, left_margin, number_labels, x_axis_room

DIM = 0.2  # brightness left to pixels the word did not look at
SCALE = 4  # a 64-pixel scene is drawn 256 pixels wide, so the smooth map has room to be smooth
STRIP_COLUMNS = 6
BOX_COLOUR = "#00e5ff"
CELL = 40  # px: a region of the raw weights' grid, room for its number ("0.034" at 9 px: 22 px)
TITLE_ROOM = 30  # the raw weights' title above the column numbers


def _centres(cells: int, pixels: int) -> np.ndarray:
    """Each pixel's position in cell units, measured from the first cell's centre, clamped to the grid."""
    position = (np.arange(pixels) + 0.5) * cells / pixels - 0.5
    return np.clip(position, 0.0, cells - 1.0)


def upsample(attention: np.ndarray, height: int, width: int, smooth: bool = True) -> np.ndarray:
    """(rows, cols) weights → (height, width) weights (same scale: not renormalized)."""
    attention = np.asarray(attention, dtype=np.float64)
    rows, cols = attention.shape
    if not smooth:
        row_of = np.arange(height) * rows // height
        col_of = np.arange(width) * cols // width
        return attention[np.ix_(row_of, col_of)]
    y, x = _centres(rows, height), _centres(cols, width)
    y0, x0 = np.floor(y).astype(int), np.floor(x).astype(int)
    y1, x1 = np.minimum(y0 + 1, rows - 1), np.minimum(x0 + 1, cols - 1)
    fy, fx = (y - y0)[:, None], (x - x0)[None, :]
    top = attention[np.ix_(y0, x0)] * (1 - fx) + attention[np.ix_(y0, x1)] * fx
    bottom = attention[np.ix_(y1, x0)] * (1 - fx) + attention[np.ix_(y1, x1)] * fx
    return top * (1 - fy) + bottom * fy


def enlarge(image: np.ndarray, scale: int = SCALE) -> np.ndarray:
    """Nearest-neighbour enlargement: each pixel becomes a ``scale × scale`` block."""
    return np.repeat(np.repeat(image, scale, axis=0), scale, axis=1)


def overlay(image: np.ndarray, attention: np.ndarray, smooth: bool = True, scale: int = SCALE) -> np.ndarray:
    """The image enlarged ``scale`` times, each pixel dimmed to ``DIM + (1 − DIM) · a / max a``."""
    big = enlarge(np.asarray(image, dtype=np.uint8), scale)
    weights = upsample(attention, big.shape[0], big.shape[1], smooth)
    top = float(weights.max())
    light = DIM + (1 - DIM) * (weights / top if top > 0 else weights)
    return np.clip(np.rint(big * light[..., None]), 0, 255).astype(np.uint8)


def png_image(pixels: np.ndarray) -> go.Image:
    """(H, W, 3) uint8 pixels as a PNG the browser shows as it is. Given as ``z`` instead, Plotly.js
    paints every pixel into a canvas with its own fillRect and re-encodes the canvas as PNG on each
    draw (~1.5 s of the browser's CPU for one 256-pixel picture here); the JSON of ``z`` is also
    ~8× the PNG's size."""
    buffer = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(pixels, dtype=np.uint8), "RGB").save(buffer, "PNG")
    return go.Image(source="data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii"),
                    hoverinfo="skip")


def _region_hover(attention: np.ndarray, size: tuple[int, int]) -> go.Heatmap:
    """An invisible heatmap, one cell per region placed over its pixels, so hover names the region."""
    rows, cols = attention.shape
    cell_h, cell_w = size[0] / rows, size[1] / cols
    return go.Heatmap(
        z=np.asarray(attention, dtype=np.float32), x0=cell_w / 2 - 0.5, dx=cell_w, y0=cell_h / 2 - 0.5, dy=cell_h,
        opacity=0, showscale=False, hovertemplate="region (row %{customdata[0]}, col %{customdata[1]})"
        "<br>weight %{z:.4f}<extra></extra>",
        customdata=np.stack(np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij"), axis=-1),
    )


def _box_shapes(boxes: Sequence[tuple[int, int, int, int]], scale: int) -> list[dict]:
    """Rectangles over image pixels [x0, x1) × [y0, y1) (pixel i spans i − 0.5 .. i + 0.5 in Plotly)."""
    return [
        dict(type="rect", x0=x0 * scale - 0.5, x1=x1 * scale - 0.5, y0=y0 * scale - 0.5, y1=y1 * scale - 0.5,
             line=dict(color=BOX_COLOUR, width=2, dash="dot"))
        for x0, y0, x1, y1 in boxes
    ]


def _grid_shapes(rows: int, cols: int, height: int, width: int) -> list[dict]:
    lines = [dict(type="line", x0=c * width / cols - 0.5, x1=c * width / cols - 0.5, y0=-0.5, y1=height - 0.5)
             for c in range(1, cols)]
    lines += [dict(type="line", y0=r * height / rows - 0.5, y1=r * height / rows - 0.5, x0=-0.5, x1=width - 0.5)
              for r in range(1, rows)]
    return [dict(line, line=dict(color="rgba(255,255,255,0.35)", width=1)) for line in lines]


def word_attention_figure(
    image: np.ndarray,
    attention: np.ndarray,
    title: str = "",
    smooth: bool = True,
    boxes: Sequence[tuple[int, int, int, int]] = (),
    scale: int = SCALE,
) -> go.Figure:
    """One word's map over the image; ``smooth=False`` shows the raw grid with its cell borders.
    ``boxes`` (pixels of ``image``) are outlined, e.g. the gold box of the object the word names."""
    pixels = overlay(image, attention, smooth, scale)
    height, width = pixels.shape[:2]
    figure = go.Figure([png_image(pixels), _region_hover(attention, (height, width))])
    shapes = _box_shapes(boxes, scale)
    if not smooth:
        shapes += _grid_shapes(*attention.shape, height, width)
    figure.update_layout(
        title=dict(text=plotly_text(title), x=0.01, xanchor="left"),
        shapes=shapes, width=width + 40, height=height + 70, margin=dict(l=20, r=20, t=50, b=20),
        xaxis=dict(visible=False, range=[-0.5, width - 0.5]),
        yaxis=dict(visible=False, range=[height - 0.5, -0.5], scaleanchor="x"),
        template=TEMPLATE,
    )
    return figure


def caption_strip_figure(
    image: np.ndarray, words: Sequence[str], attention: np.ndarray, smooth: bool = True, scale: int = 2,
    columns: int = STRIP_COLUMNS,
) -> go.Figure:
    """Every word of the caption with its map, in order, as in the paper's figures
    (``attention`` (n, rows, cols); at most ``columns`` words per row)."""
    if attention.shape[0] != len(words):
        raise ValueError(f"{len(words)} words but {attention.shape[0]} attention maps")
    if len(words) == 0:
        raise ValueError("the caption is empty")
    return maps_strip_figure(image, [f"{i + 1}. {w}" for i, w in enumerate(words)], attention, smooth, scale, columns)


def maps_strip_figure(
    image: np.ndarray, titles: Sequence[str], maps: np.ndarray, smooth: bool = True, scale: int = 2,
    columns: int = STRIP_COLUMNS,
) -> go.Figure:
    """Several maps over the same image side by side (``maps`` (n, rows, cols), one title each;
    at most ``columns`` per row), each scaled to its own maximum."""
    n = len(titles)
    if maps.shape[0] != n or n == 0:
        raise ValueError(f"{n} titles for {maps.shape[0]} maps")
    cols = min(n, columns)
    rows = math.ceil(n / cols)
    figure = make_subplots(rows=rows, cols=cols, subplot_titles=[plotly_text(t) for t in titles],
                           horizontal_spacing=0.02, vertical_spacing=0.12 / rows)
    for i, one_map in enumerate(maps):
        figure.add_trace(png_image(overlay(image, one_map, smooth, scale)),
                         row=i // cols + 1, col=i % cols + 1)
    size = image.shape[0] * scale
    figure.update_xaxes(visible=False)
    figure.update_yaxes(visible=False, scaleanchor=None)
    figure.update_layout(width=cols * (size + 12) + 40, height=rows * (size + 40) + 30,
                         margin=dict(l=10, r=10, t=40, b=10), template=TEMPLATE)
    return figure


def heads_strip_figure(image: np.ndarray, maps: np.ndarray, smooth: bool = True, scale: int = 1) -> go.Figure:
    """A ViT layer's heads side by side: ``maps`` (heads, rows, cols), e.g. each head's [CLS] row."""
    return maps_strip_figure(image, [f"head {h}" for h in range(maps.shape[0])], maps, smooth, scale)


def rollout_strip_figure(image: np.ndarray, maps: np.ndarray, smooth: bool = True, scale: int = 1) -> go.Figure:
    """Rollout after each layer, side by side: ``maps`` (layers, rows, cols)."""
    return maps_strip_figure(image, [f"after layer {i}" for i in range(maps.shape[0])], maps, smooth, scale)


def scale_for(size: int, pixels: int = 256) -> int:
    """The whole enlargement that draws a ``size``-pixel image about ``pixels`` wide (at least 1)."""
    return max(1, round(pixels / size))


def grid_values_figure(attention: np.ndarray, title: str = "") -> go.Figure:
    """The raw ``(rows, cols)`` weights as numbers, rows top to bottom like the image."""
    z = np.asarray(attention, dtype=np.float32)
    top = float(z.max()) or 1.0
    figure = go.Figure(go.Heatmap(
        z=z, colorscale="Blues", zmin=0.0, zmax=top,
        text=np.round(z, 3), texttemplate="%{text:.3f}", textfont=dict(size=9),
        hovertemplate="row %{y}, col %{x}<br>weight %{z:.4f}<extra></extra>", colorbar=dict(x=1),
    ))
    rows, cols = z.shape
    # Margins that hold the numbers and the colour bar, and a figure as large as the cells plus them. Cells
    # stay square by shrinking the plot, not by stretching an axis's range: a stretched range would show
    # empty rows, numbered (−1, −2, …), whatever the page's width (Streamlit sets it, not ``width``).
    margin = dict(l=left_margin(number_labels(0, rows - 1), 12), r=colour_bar_room("", number_labels(0, top), 30),
                  t=TITLE_ROOM + x_axis_room(number_labels(0, cols - 1), 12), b=20)
    figure.update_layout(
        title=dict(text=plotly_text(title), x=0.01, xanchor="left"),
        xaxis=dict(title="column", dtick=1, side="top", constrain="domain", constraintoward="left"),
        yaxis=dict(title="row", dtick=1, autorange="reversed", scaleanchor="x", constrain="domain",
                   constraintoward="top"),
        width=CELL * cols + margin["l"] + margin["r"], height=CELL * rows + margin["t"] + margin["b"], margin=margin,
        template=TEMPLATE,
    )
    return figure
