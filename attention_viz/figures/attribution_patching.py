"""Attribution patching's estimates drawn as activation patching's restored fractions are (same
rows, columns and scale centred at 0), titled as estimates."""

from __future__ import annotations

import plotly.graph_objects as go

from ..analysis.patching import SITE_DESCRIPTIONS, Patching
from .axes import plotly_text
from .patching import patching_heatmap


def attribution_heatmap(result: Patching, height: int | None = None) -> go.Figure:
    """The heatmap of :func:`~attention_viz.figures.patching.patching_heatmap`, its title saying the
    fractions are first-order estimates."""
    figure = patching_heatmap(result, height)
    figure.update_layout(title_text=plotly_text(f"{SITE_DESCRIPTIONS[result.site]}: estimated by attribution "
                                                "patching ((a_clean − a_corrupt) · ∂metric/∂a)"))
    return figure
