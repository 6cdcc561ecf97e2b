"""Head tables in plain words: column headers with units and a help line each (no snake_case),
and a click on a row that opens that head."""

from __future__ import annotations

import pandas as pd
import streamlit as st

# statistic key → (header, help); statistics of shares are fractions of a row's weight (0–1)
COLUMNS = {
    "layer": ("layer", "0-indexed"),
    "head": ("head", "0-indexed"),
    "entropy": ("entropy (bits)", "Mean row entropy: 0 = every row on one token; log2(n) = spread evenly."),
    "entropy_norm": ("entropy (share of max)", "Entropy ÷ log2(tokens a row may see): 0 = focused, 1 = uniform."),
    "distance": ("distance (tokens)", "Mean |query − key| position gap, weighted by attention."),
    "special": ("on special tokens", "Share of weight on [CLS], [SEP] and the like (0–1)."),
    "first": ("on the first token", "Share of weight on position 0 (0–1)."),
    "previous": ("on the previous token", "Share of weight on the token just before (0–1)."),
    "self": ("on itself", "Share of weight a token gives itself (0–1)."),
    "next": ("on the next token", "Share of weight on the token just after (0–1)."),
    "offset": ("strongest offset (tokens)", "The relative position key − query with the most weight."),
    "offset_share": ("share at that offset", "Weight at the strongest offset (0–1)."),
    "top_weight": ("largest weight", "Mean of each row's largest weight: 1 = every row picks one token."),
    "role": ("role", "What the statistics suggest the head does."),
    "move": ("move (0–1)", "How far the followed token's attention moved from A to B: half the summed |A − B| of "
                           "its two rows over the keys compared (0 = the same row, 1 = nothing in common)."),
    "gained_b": ("gained most in B", "The key whose share of the row grew most from A to B."),
    "gained_a": ("gained most in A", "The key whose share of the row is larger in A than in B by the most."),
}


def head_table(rows: list[dict], key: str) -> tuple[int, int] | None:
    """Draw ``rows`` (one per head) with readable headers; the (layer, head) of a clicked row."""
    frame = pd.DataFrame(rows)
    config = {name: st.column_config.Column(header, help=help_)
              for name, (header, help_) in COLUMNS.items() if name in frame}
    for name in frame.columns:
        if name not in COLUMNS:  # a statistic without a header yet: at least no underscores
            config[name] = st.column_config.Column(name.replace("_", " "))
    for name in frame.select_dtypes("float").columns:
        config[name] = st.column_config.NumberColumn(config[name]["label"], help=config[name].get("help"),
                                                     format="%.3f")
    event = st.dataframe(frame, key=key, hide_index=True, column_config=config, on_select="rerun",
                         selection_mode="single-row")
    picked = event.selection.rows if event is not None else []
    if not picked or not {"layer", "head"} <= set(frame.columns):
        return None
    row = frame.iloc[picked[0]]
    return int(row["layer"]), int(row["head"])


def follow(clicked: tuple[int, int] | None, source: str, layer_key: str, head_key: str) -> None:
    """Point the layer and head widgets (drawn after this) at a newly clicked head. A selection
    stays in its widget across reruns, so it is applied once: moving the sliders afterwards wins."""
    seen = f"_clicked_{source}"
    if clicked is not None and clicked != st.session_state.get(seen):
        st.session_state[layer_key], st.session_state[head_key] = clicked
    st.session_state[seen] = clicked


def clicked_tile(event, heads: int, curve: int = 1) -> tuple[int, int] | None:
    """(layer, head) of a selected tile marker of the all-heads grid (trace ``curve``)."""
    points = event.selection.points if event is not None else []
    for point in points:
        if point.get("curve_number") == curve and point.get("point_index") is not None:
            index = int(point["point_index"])
            return index // heads, index % heads
    return None
