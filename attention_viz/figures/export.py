"""Standalone exports of figures: one HTML file with plotly.js inside, so it opens offline."""

from __future__ import annotations

import plotly.graph_objects as go

CONFIG = {"displaylogo": False, "toImageButtonOptions": {"format": "png", "scale": 2}}


def standalone_html(figure: go.Figure, title: str = "attention-viz") -> str:
    """A complete HTML page embedding plotly.js (no CDN, no network)."""
    html = figure.to_html(include_plotlyjs=True, full_html=True, config=CONFIG)
    return html.replace("<head>", f"<head><meta charset=\"utf-8\"><title>{_escape(title)}</title>", 1)


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
