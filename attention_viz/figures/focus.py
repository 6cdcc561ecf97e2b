"""Token focus: one query token's attention to one key token in every head, and one attention
row drawn over the sentence itself."""

from __future__ import annotations

import html
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from .axes import hover_text, plotly_text
from .style import TEMPLATE
from .text_width import colour_bar_margin, left_margin

WEIGHTS = ("weight", "attention weight")  # titled "attention from … to …"; any other quantity by its name


def focus_heatmap(focus: np.ndarray, query_label: str, key_label: str, query_at: int | None = None,
                  key_at: int | None = None, quantity: str = "weight", zmax: float | None = None) -> go.Figure:
    """``focus`` [layers, heads]: how much ``query_label`` (at position ``query_at``) attends to
    ``key_label`` in each head (``quantity`` names the value: an attention weight, a value-weighted
    norm). ``zmax``: the top of the colour range (the query's, so it stays when the key changes;
    default this matrix's largest value). A transparent marker on every cell makes a head clickable
    (heatmap cells cannot be selected); its ``customdata`` is (layer, head)."""
    layers, heads = focus.shape
    where = lambda label, at: hover_text(f"“{label}”" + ("" if at is None else f" (position {at})"))  # noqa: E731
    pair = f"{where(query_label, query_at)} → {where(key_label, key_at)}"
    cells = np.array([(layer, head) for layer in range(layers) for head in range(heads)])
    figure = go.Figure([
        go.Heatmap(
            z=focus.astype(np.float32),
            x=list(range(heads)),
            y=list(range(layers)),
            colorscale="Blues",
            zmin=0.0,
            zmax=max(float(focus.max()), 1e-6) if zmax is None else zmax,
            hovertemplate=f"layer %{{y}}, head %{{x}}<br>{pair}<br>{quantity} %{{z:.3f}}<extra></extra>",
            colorbar=dict(title=dict(text=quantity)),
        ),
        go.Scatter(
            x=cells[:, 1], y=cells[:, 0], mode="markers", showlegend=False,
            customdata=np.column_stack([cells, focus.reshape(-1)]),  # clickable: needs a hover of its own
            hovertemplate=f"layer %{{customdata[0]}}, head %{{customdata[1]}}<br>{pair}<br>"
                          f"{quantity} %{{customdata[2]:.3f}}<br>click to open<extra></extra>",
            marker=dict(size=22, symbol="square", color="rgba(0,0,0,0.01)"),
            selected=dict(marker=dict(color="rgba(214,39,40,0.35)")), unselected=dict(marker=dict(opacity=1)),
        ),
    ])
    figure.update_layout(
        title=dict(text=f"{'attention' if quantity in WEIGHTS else quantity} from {plotly_text(query_label)} to "
                        f"{plotly_text(key_label)} — click a head"),
        xaxis=dict(title="head", tickmode="linear", dtick=1, side="top"),
        yaxis=dict(title="layer", tickmode="linear", dtick=1, autorange="reversed"),
        height=int(min(700, 90 + 45 * layers)),
        margin=dict(l=left_margin([str(layers - 1)], 12), r=colour_bar_margin(quantity), t=90, b=10),
        template=TEMPLATE,
        clickmode="event+select",
    )
    return figure


def highlighted_text(labels: Sequence[str], weights: np.ndarray, query_index: int | None = None) -> str:
    """HTML: each token on a background as dark as its weight; the query token outlined.

    Every label is HTML-escaped: user text never becomes markup.
    """
    top = float(weights.max()) if weights.size and weights.max() > 0 else 1.0
    spans = []
    for i, (label, weight) in enumerate(zip(labels, weights)):
        alpha = float(weight) / top
        color = "#fff" if alpha > 0.55 else "#111"
        outline = "outline:2px solid #d62728;" if i == query_index else ""
        spans.append(
            f'<span title="{html.escape(label)}: {float(weight):.3f}" style="background:rgba(8,81,156,{alpha:.3f});'
            f'color:{color};{outline}padding:2px 3px;margin:1px;border-radius:3px;display:inline-block">'
            f"{html.escape(label)}</span>"
        )
    return '<div style="line-height:2.1;font-size:1.05rem">' + "".join(spans) + "</div>"
