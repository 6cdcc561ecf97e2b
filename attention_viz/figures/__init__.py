"""Plotly figure builders: numpy arrays and token labels in, ``go.Figure`` out.

No torch, no streamlit here: the same functions serve the page, the exports and the tests.
"""
