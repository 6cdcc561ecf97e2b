"""The logit lens as a heatmap: rows are depths (the embeddings, then after each layer), columns the
input's positions; each cell names the most likely next token there and is coloured by its
probability, or by the named answer's probability. Hover lists the top tokens. Integer positions on
the axes, labelled with the tokens, so repeated tokens never merge."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from ..analysis.logit_lens import LogitLens
from .axes import hover_text, plotly_text, shorten
from .style import TEMPLATE
from .text_width import heatmap_margins

ROW_HEIGHT = 34  # px per depth: room for the token written in the cell
X_ANGLE = 45


def _axis(labels: Sequence[str]) -> dict:
    return dict(tickmode="array", tickvals=list(range(len(labels))),
                ticktext=[plotly_text(shorten(label)) for label in labels], showgrid=False)


def logit_lens_heatmap(lens: LogitLens, height: int | None = None) -> go.Figure:
    """Top next token per depth and position, coloured by p(answer) when the lens has an answer,
    else by the top token's own probability (0 to 1 either way)."""
    z = lens.answer_probs if lens.answer_probs is not None else lens.top_probs[..., 0]
    shown = "p(" + lens.answer + ")" if lens.answer is not None else "p(top token)"
    columns = [f"{i}: {token}" for i, token in enumerate(lens.tokens)]
    top = [[shorten(row[0], 10) for row in depth] for depth in lens.top_tokens]
    listed = [["<br>".join(f"{hover_text(repr(t))} {p:.3f}" for t, p in zip(cell, probs))
               for cell, probs in zip(depth, depth_probs)]
              for depth, depth_probs in zip(lens.top_tokens, lens.top_probs)]
    figure = go.Figure(go.Heatmap(
        z=np.asarray(z), x=list(range(len(columns))), y=list(range(len(lens.rows))),
        text=[[plotly_text(t) for t in row] for row in top], texttemplate="%{text}", textfont=dict(size=10),
        customdata=[[[hover_text(r), hover_text(c), cell] for c, cell in zip(columns, depth)]
                    for r, depth in zip(lens.rows, listed)],
        colorscale="Blues", zmin=0.0, zmax=1.0,
        colorbar=dict(title=dict(text=plotly_text(shown), side="right"), thickness=12),
        hovertemplate=f"%{{customdata[0]}}<br>position %{{customdata[1]}}<br>{hover_text(shown)} %{{z:.3f}}"
                      "<br>top next tokens:<br>%{customdata[2]}<extra></extra>",
    ))
    figure.update_layout(
        template=TEMPLATE,
        title=dict(text=plotly_text("Logit lens: the next token each depth would predict, through the final "
                                    "norm and unembedding"), font=dict(size=14)),
        xaxis=dict(**_axis(columns), tickangle=-X_ANGLE, side="top"),
        yaxis=dict(**_axis(lens.rows), autorange="reversed"),
        height=height or max(260, 170 + ROW_HEIGHT * len(lens.rows)),
        margin=heatmap_margins(([shorten(r) for r in lens.rows], 12), ([shorten(c) for c in columns], 12), X_ANGLE,
                               title_room=30, colour_bar_title=shown),
    )
    return figure
