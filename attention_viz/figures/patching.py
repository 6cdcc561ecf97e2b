"""Activation patching's restored fractions as a heatmap: rows are layers (or an encoder–decoder's
attentions), columns heads or token positions; a diverging scale centred at 0, red where patching
the site restores the clean answer, blue where it pushes the other way. Integer positions on the
axes, labelled with the tokens, so repeated tokens never merge."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from ..analysis.patching import SITE_DESCRIPTIONS, Patching
from .axes import plotly_text, shorten
from .style import TEMPLATE
from .text_width import heatmap_margins

ROW_HEIGHT = 28  # px per heatmap row
DIVERGING = "RdBu_r"  # blue below 0, white at 0, red above
X_ANGLE = 45  # column labels turned, so positions' tokens fit side by side


def _axis(labels: Sequence[str]) -> dict:
    return dict(tickmode="array", tickvals=list(range(len(labels))),
                ticktext=[plotly_text(shorten(label)) for label in labels], showgrid=False)


def grid(result: Patching) -> tuple[np.ndarray, list[str], list[str], str]:
    """The 2-D map of ``result``: its values, row labels, column labels and what a column is.
    ``head_positions`` gets one row per (layer, head)."""
    restored = result.restored
    if result.site == "head_positions":
        rows = [f"{row} head {h}" for row in result.rows for h in range(restored.shape[1])]
        return restored.reshape(-1, restored.shape[2]), rows, _position_labels(result, restored.shape[2]), "position"
    if result.site == "resid":
        return restored, list(result.rows), _position_labels(result, restored.shape[1]), "position"
    return restored, list(result.rows), [f"head {h}" for h in range(restored.shape[1])], "head"


def _position_labels(result: Patching, n: int) -> list[str]:
    """Clean tokens by position; an encoder–decoder's rows read the source or the target, so both."""
    if result.target_tokens is None:
        return [f"{i}: {t}" for i, t in enumerate(result.tokens)]
    source, target = list(result.tokens), list(result.target_tokens)
    return [f"{i}: " + " / ".join(t[i] for t in (source, target) if i < len(t)) for i in range(n)]


def patching_heatmap(result: Patching, height: int | None = None) -> go.Figure:
    """Restored fraction per site; the colour range is symmetric around 0 and covers at least ±1."""
    z, rows, columns, column_kind = grid(result)
    named = columns if column_kind == "head" else [f"position {c}" for c in columns]  # hover: "head 1", "position 3: it"
    finite = np.abs(z[np.isfinite(z)])
    limit = max(1.0, float(finite.max()) if finite.size else 1.0)
    figure = go.Figure(go.Heatmap(
        z=z, x=list(range(len(columns))), y=list(range(len(rows))),
        customdata=[[[plotly_text(r), plotly_text(c)] for c in named] for r in rows],
        colorscale=DIVERGING, zmid=0.0, zmin=-limit, zmax=limit,
        colorbar=dict(title=dict(text="restored", side="right"), thickness=12),
        hovertemplate="%{customdata[0]}<br>%{customdata[1]}<br>restored %{z:.3f}<extra></extra>",
        hoverongaps=False,
    ))
    mode = "noising (clean run, one corrupt value)" if result.noising else "denoising (corrupt run, one clean value)"
    figure.update_layout(
        template=TEMPLATE,
        title=dict(text=plotly_text(f"{SITE_DESCRIPTIONS[result.site]}: {mode}"), font=dict(size=14)),
        xaxis=dict(**_axis(columns), tickangle=-X_ANGLE, side="top"),
        yaxis=dict(**_axis(rows), autorange="reversed"),
        height=height or max(260, 160 + ROW_HEIGHT * len(rows)),
        # margins that already hold the labels: Plotly draws once (see figures/text_width.py)
        margin=heatmap_margins(([shorten(r) for r in rows], 12), ([shorten(c) for c in columns], 12), X_ANGLE,
                               title_room=30, colour_bar_title="restored"),
    )
    return figure
