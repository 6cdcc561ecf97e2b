"""Download buttons. Files are built only when clicked (callables), so drawing a page costs nothing."""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from ..figures.export import standalone_html
from ..result import AttentionResult


def figure_downloads(figure: go.Figure, stem: str, key: str) -> None:
    st.download_button(
        "Download figure (HTML, works offline)", data=lambda: standalone_html(figure, stem),
        file_name=f"{stem}.html", mime="text/html", key=f"{key}_html", on_click="ignore",
    )
    st.caption("PNG: use the camera icon in the figure's toolbar.")


def result_downloads(result: AttentionResult) -> None:
    left, right = st.columns(2)
    left.download_button(
        "Attention tensors (.npz)", data=result.to_npz_bytes, file_name="attention.npz",
        mime="application/octet-stream", key="result_npz", on_click="ignore",
    )
    right.download_button(
        "Attention tensors (.json)", data=result.to_json, file_name="attention.json",
        mime="application/json", key="result_json", on_click="ignore",
    )
