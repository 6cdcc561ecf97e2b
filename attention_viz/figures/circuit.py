"""A circuit as a graph: heads as nodes along their layer's row (the embeddings below, the logits
above, each layer's feed-forward block to its right), the top edges drawn from the node that writes
to the input that reads, their width by |score|, their colour by sign (red helps the clean answer,
blue works against it) and their dash by which input of a head reads them (q solid, k dashed, v
dotted). Components outside the circuit are faint. Plain data in (analysis/circuit.py), no torch."""

from __future__ import annotations

import plotly.graph_objects as go

from ..analysis.circuit import QKV, Circuit, entry_point, input_kind, position
from .axes import plotly_text
from .style import TEMPLATE
from .text_width import left_margin

DASH = {"q": "solid", "k": "dash", "v": "dot", "": "solid"}
POSITIVE, NEGATIVE, FAINT = "#c0392b", "#2c6fbb", "#b8b8b8"
MAX_WIDTH = 8.0


def circuit_graph(circuit: Circuit, dark: bool = False) -> go.Figure:
    """The top ``circuit.top`` edges; the last trace holds the nodes (a click selects one)."""
    graph, edges = circuit.graph, circuit.edges()
    largest = max((abs(e["score"]) for e in edges), default=1.0) or 1.0
    figure = go.Figure()
    for kind in QKV:  # the legend: which dash is which input
        figure.add_trace(go.Scatter(x=[None], y=[None], mode="lines", name=f"into a head's {kind}",
                                    line=dict(color=FAINT, dash=DASH[kind], width=2)))
    for edge in reversed(edges):  # the largest drawn last, on top
        (x0, y0), (x1, y1) = position(graph, edge["from"]), entry_point(graph, edge["to"])
        hover = plotly_text(f"{edge['from']} → {edge['to']}: {edge['score']:+.4f}")
        figure.add_trace(go.Scatter(
            x=[x0, x1], y=[y0, y1], mode="lines", showlegend=False, hoverinfo="text", text=[hover, hover],
            line=dict(color=POSITIVE if edge["score"] > 0 else NEGATIVE, dash=DASH[input_kind(edge["to"])],
                      width=1.0 + (MAX_WIDTH - 1.0) * abs(edge["score"]) / largest),
            opacity=0.85,
        ))
    inside = set(circuit.circuit_nodes())
    names = [*graph.nodes, "logits"]
    points = [position(graph, n) for n in names]
    ink = "#e8e8e8" if dark else "#222222"
    figure.add_trace(go.Scatter(
        x=[p[0] for p in points], y=[p[1] for p in points], mode="markers+text", name="components",
        text=[plotly_text(n) for n in names], textposition="top center", customdata=names, showlegend=False,
        marker=dict(size=[16 if n in inside else 9 for n in names],
                    color=[ink if n in inside else FAINT for n in names], symbol="circle"),
        hovertemplate="%{customdata}<extra></extra>",
    ))
    kept = circuit.metric_kept
    rows = ["embed", *map(str, range(graph.layers)), "logits"]
    figure.update_layout(
        template=TEMPLATE, height=140 + 95 * (graph.layers + 2),
        title=dict(text=f"top {circuit.top} edges of {int(graph.allowed().sum())} ({circuit.method}): the circuit "
                        f"keeps {kept:.2f} of the clean − corrupt gap"),
        xaxis=dict(visible=False, range=[-0.8, graph.heads + 0.8]),
        yaxis=dict(title="layer", tickmode="array", tickvals=list(range(-1, graph.layers + 1)),
                   ticktext=rows, zeroline=False, showgrid=False),
        margin=dict(l=left_margin(rows, 12), r=20),  # the rows' names and the axis title: drawn once, not pushed
        legend=dict(orientation="h", y=-0.05), hovermode="closest", clickmode="event+select",
    )
    return figure


def kept_curve(sizes: list[int], kept: list[float], top: int, method: str) -> go.Figure:
    """The share of the gap kept against the number of edges (log axis), the chosen size marked."""
    figure = go.Figure(go.Scatter(
        x=[max(k, 0.5) for k in sizes], y=kept, mode="lines+markers", name="kept",
        customdata=sizes, hovertemplate="top %{customdata} edges: %{y:.3f} of the gap kept<extra></extra>",
    ))
    figure.add_vline(x=max(top, 0.5), line=dict(color=FAINT, dash="dash"))
    figure.add_hline(y=1.0, line=dict(color=FAINT, width=1))
    figure.update_layout(
        template=TEMPLATE, height=320, showlegend=False,
        title=dict(text=f"how much of the clean − corrupt gap the top edges keep ({method})"),
        xaxis=dict(type="log", title="edges in the circuit (largest |score| first; 0 drawn at 0.5)"),
        yaxis=dict(title="share of the gap kept", zeroline=True),
    )
    return figure
