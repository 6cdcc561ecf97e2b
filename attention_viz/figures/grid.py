"""All heads at a glance: a layers × heads grid of small attention maps, drawn as ONE heatmap.

One trace instead of layers × heads subplots keeps the figure fast to build and small to send:
each map is block-averaged down to at most ``thumb`` × ``thumb`` cells and the tiles are laid out
in one matrix with blank (NaN) gutters between them.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import numpy as np
import plotly.graph_objects as go

from .style import TEMPLATE
from .text_width import colour_bar_margin, left_margin

THUMB = 40  # cells per thumbnail side; 6 × 12 heads × 40² float32 ≈ 0.5 MB on the wire


def downsample(pattern: np.ndarray, size: int) -> np.ndarray:
    """Block-average the last two axes to at most ``size`` × ``size`` (a no-op when smaller)."""
    rows, cols = pattern.shape[-2:]

    def blocks(n: int) -> np.ndarray:
        return np.linspace(0, n, min(n, size) + 1).round().astype(int)

    r, c = blocks(rows), blocks(cols)
    if len(r) - 1 == rows and len(c) - 1 == cols:
        return pattern
    summed = np.add.reduceat(np.add.reduceat(pattern, r[:-1], axis=-2), c[:-1], axis=-1)
    counts = np.outer(np.diff(r), np.diff(c))
    return summed / counts


def tile(stack: np.ndarray, thumb: int = THUMB) -> np.ndarray:
    """[layers, heads, q, k] → one 2-D image with a NaN gutter of one cell between tiles."""
    small = downsample(np.asarray(stack, dtype=np.float32), thumb)  # no copy of a float32 stack
    layers, heads, rows, cols = small.shape
    # each tile gets one NaN row and column after it; laid out [layer, row, head, col] the tiles
    # are one image by a reshape, minus the last row and column of gutter
    image = np.full((layers, rows + 1, heads, cols + 1), np.nan, dtype=np.float32)
    image[:, :rows, :, :cols] = small.transpose(0, 2, 1, 3)
    return image.reshape(layers * (rows + 1), heads * (cols + 1))[:-1, :-1]


def _tile_ticks(name: str, count: int, pitch: int, group_size: int = 1) -> dict:
    """One tick at the middle of each tile row or column, named "head 3" / "layer 2"; with
    ``group_size`` > 1 (grouped-query attention) each also names its K/V head: "head 3<br>kv 1"."""
    return dict(
        tickmode="array",
        tickvals=[i * pitch + (pitch - 2) / 2 for i in range(count)],
        ticktext=[f"{name} {i}" + (f"<br>kv {i // group_size}" if group_size > 1 else "") for i in range(count)],
        showgrid=False,
        zeroline=False,
    )


def tile_owner(layers: int, heads: int, rows: int, cols: int) -> np.ndarray:
    """[image rows, image cols, 2] int8: the (layer, head) each cell of the tiled image belongs to
    (gutters take the tile before them), for the hover."""
    layer = np.repeat(np.arange(layers, dtype=np.int8), rows)[: layers * rows - 1]
    head = np.repeat(np.arange(heads, dtype=np.int8), cols)[: heads * cols - 1]
    return np.stack(np.broadcast_arrays(layer[:, None], head[None, :]), axis=-1)


def heads_grid(stack: np.ndarray, title: str = "", thumb: int = THUMB, zmax: float | None = None,
               quantity: str = "weight", marked: Collection[tuple[int, int]] = (),
               click: str = "click to enlarge", kv_heads: int | None = None) -> go.Figure:
    """Thumbnails of every head; x ticks name heads, y ticks name layers (both 0-indexed).

    A heatmap cell cannot be clicked (Plotly selects only point-like traces), so a transparent
    marker sits at the centre of each tile: selecting it (``customdata`` = layer, head) does what
    ``click`` says. ``quantity`` names a cell's value (colour bar, hover); the ``marked`` heads are
    outlined in red (e.g. the heads chosen for ablation: a frame, which no attention cell looks like). ``kv_heads`` < heads (grouped-query
    attention): the query heads sharing one K/V head are framed together and named in the ticks.
    """
    layers, heads = stack.shape[:2]
    group_size = heads // kv_heads if kv_heads and kv_heads < heads and heads % kv_heads == 0 else 1
    image = tile(stack, thumb)
    rows = (image.shape[0] + 1) // layers  # tile height including its gutter
    cols = (image.shape[1] + 1) // heads
    centres = np.array([(layer, head) for layer in range(layers) for head in range(heads)])
    figure = go.Figure([
        go.Heatmap(
            z=image,
            customdata=tile_owner(layers, heads, rows, cols) if layers < 128 and heads < 128 else None,
            colorscale="Blues",
            zmin=0.0,
            zmax=zmax if zmax is not None else float(np.nanmax(image)) if np.isfinite(image).any() else 1.0,
            hoverongaps=False,
            hovertemplate=f"layer %{{customdata[0]}}, head %{{customdata[1]}}<br>{quantity} %{{z:.3f}}<extra></extra>",
            colorbar=dict(title=dict(text=quantity), thickness=12),
        ),
        go.Scatter(
            x=centres[:, 1] * cols + (cols - 2) / 2, y=centres[:, 0] * rows + (rows - 2) / 2,
            customdata=centres, mode="markers", showlegend=False,
            marker=dict(size=max(8, min(28, 600 // max(heads, 1))), symbol="square",
                        color="rgba(0,0,0,0.01)"),
            hovertemplate=f"layer %{{customdata[0]}}, head %{{customdata[1]}}<br>{click}<extra></extra>",
            selected=dict(marker=dict(color="rgba(214,39,40,0.35)")), unselected=dict(marker=dict(opacity=1)),
        ),
    ])
    figure.update_layout(
        title=dict(text=title),
        xaxis=dict(_tile_ticks("head", heads, cols, group_size), side="top", constrain="domain"),
        yaxis=dict(_tile_ticks("layer", layers, rows), autorange="reversed", scaleanchor="x"),
        height=int(min(1100, max(300, 70 * layers * 12 / max(heads, 1) + 120))),
        margin=dict(l=left_margin([f"layer {layers - 1}"], 12, axis_title=False), r=colour_bar_margin(quantity),
                    t=(60 if title else 40) + (14 if group_size > 1 else 0), b=10),  # "kv" line
        template=TEMPLATE,
        plot_bgcolor="white",
        clickmode="event+select",
        shapes=[*(_kv_frames(heads // group_size, group_size * cols, layers * rows) if group_size > 1 else []),
                *_outlines(sorted(marked), rows, cols)],
    )
    return figure


def _outlines(heads: Sequence[tuple[int, int]], rows: int, cols: int) -> list[dict]:
    """A red frame around each (layer, head) tile, along the gutters around it."""
    return [dict(type="rect", name=f"removed {layer}.{head}", x0=head * cols - 1, x1=(head + 1) * cols - 1,
                 y0=layer * rows - 1, y1=(layer + 1) * rows - 1, line=dict(color="rgb(214,39,40)", width=3),
                 fillcolor="rgba(0,0,0,0)")
            for layer, head in heads]


def _kv_frames(groups: int, width: int, height: int) -> list[dict]:
    """One dashed frame around each block of query heads that share a K/V head."""
    return [dict(type="rect", x0=g * width - 1.5, x1=(g + 1) * width - 1.5, y0=-1.5, y1=height - 0.5,
                 line=dict(color="rgba(214,39,40,0.8)", width=1.5, dash="dash"))
            for g in range(groups)]
