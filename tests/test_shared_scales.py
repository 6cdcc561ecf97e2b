"""Figures shown side by side share one colour range by default (the same shade is the same
weight in both); a switch in the link gives each its own; two sentences are subtracted only when
their positions hold the same words."""

import json

import pytest
from apphelpers import app, messages

from attention_viz.analysis.selection import misalignment


def ranges(at, keys: tuple[str, str]) -> list[tuple[float, float]]:
    by_key = {chart.key: chart for chart in at.get("plotly_chart")}
    specs = [json.loads(by_key[k].proto.spec) for k in keys]
    return [(s["data"][0]["zmin"], s["data"][0]["zmax"]) for s in specs]


PAIRS = {  # view and its URL choices → the two charts drawn side by side
    "two heads": ({"view": "compare", "mode": "heads"}, ("compare_chart_a", "compare_chart_b")),
    "coreference pair": ({"view": "compare", "mode": "coreference"}, ("coref_row_a", "coref_row_b")),
    "two sentences": ({"view": "compare", "mode": "sentences"}, ("compare_pair_a", "compare_pair_b")),
    "scaled vs unscaled": ({"view": "inside", "scale": "0"}, ("inside_pattern_scaled", "inside_pattern")),
    "with vs without positions": ({"view": "positional"}, ("positional_with", "positional_without")),
}


@pytest.mark.parametrize("pair", list(PAIRS))
def test_side_by_side_figures_share_one_colour_range_unless_asked(pair):
    params, keys = PAIRS[pair]
    shared = app(**params)
    assert not shared.exception and not shared.error
    a, b = ranges(shared, keys)
    assert a == b and a[1] > 0
    separate = app(**params, separate="1")
    a, b = ranges(separate, keys)
    assert a != b  # each figure on its own range: the two patterns differ
    assert shared.query_params["separate"] in ("0", ["0"]) and separate.query_params["separate"] in ("1", ["1"])


def test_two_unrelated_sentences_of_equal_length_get_no_difference_but_a_message():
    at = app(view="compare", mode="sentences", text="The big dog barked.", text_b="A small cat slept.")
    assert not at.exception
    assert "compare_pair_diff" not in [c.key for c in at.get("plotly_chart")]
    assert any("differ in" in m for m in messages(at))


def test_a_minimal_pair_gets_its_difference():
    at = app(view="compare", mode="sentences")  # tired / wide: one word apart
    assert "compare_pair_diff" in [c.key for c in at.get("plotly_chart")]


def test_misalignment_rules():
    assert misalignment(["a", "b", "c", "d"], ["a", "b", "x", "d"]) is None
    assert "differ in 3 of 4" in misalignment(["a", "b", "c", "d"], ["x", "y", "z", "d"])
    assert "3 and 2 tokens" in misalignment(["a", "b", "c"], ["a", "b"])


def test_clicking_a_coreference_row_shows_that_head_in_both_sentences():
    at = app(view="compare", mode="coreference")
    table = at.dataframe[0].value
    second = (int(table["layer"].iloc[1]), int(table["head"].iloc[1]))
    at.session_state["coref_shift"] = {"selection": {"rows": [1], "columns": [], "cells": []}}  # a click on row 2
    at.run()
    titles = [json.loads(c.proto.spec)["layout"]["title"]["text"] for c in at.get("plotly_chart")
              if c.key != "coref_diff"]
    assert len(titles) == 4 and all(f"layer {second[0]}, head {second[1]}" in t for t in titles), titles
