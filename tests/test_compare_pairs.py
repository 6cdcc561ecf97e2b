"""The pages of issue 30's "one app" part on pairs: two typed sentences get the table of heads where a
followed token's attention moved (a clicked row opens that head in both, on one colour range), and
Token focus keeps its colour range when the key changes."""

import json

import numpy as np
import pytest
from apphelpers import app

from attention_viz.analysis.focus import focus_matrix, query_top
from attention_viz.figures.focus import focus_heatmap

TIRED = "The animal didn't cross the street because it was too tired."
LONGER = "Yesterday the big animal didn't cross the old street because it was too wide."


def specs(at) -> dict[str, dict]:
    return {chart.key: json.loads(chart.proto.spec) for chart in at.get("plotly_chart")}


def colour_range(spec: dict) -> tuple[float, float]:
    return spec["data"][0]["zmin"], spec["data"][0]["zmax"]


@pytest.mark.slow
def test_two_typed_sentences_rank_the_heads_and_a_clicked_row_opens_both_on_one_range():
    at = app(view="compare", mode="sentences", text=TIRED, text_b=LONGER)
    assert not at.exception and not at.error
    assert at.selectbox(key="compare_pair_follow").format_func(at.selectbox(key="compare_pair_follow").value) \
        == "10: it (B: 13)"  # the pronoun, at another position in B
    assert any("only the tokens present in both" in c.value for c in at.caption)
    table = at.dataframe[0].value
    assert list(table.columns) == ["layer", "head", "move", "gained_b", "gained_a"]
    assert list(table["move"]) == sorted(table["move"], reverse=True) and 0 < table["move"].iloc[0] <= 1
    assert "big" not in set(table["gained_b"]) | set(table["gained_a"])  # a word only B has is not compared

    third = int(table["layer"].iloc[2]), int(table["head"].iloc[2])
    at.session_state["compare_pair_shift"] = {"selection": {"rows": [2], "columns": [], "cells": []}}
    at.run()
    assert not at.exception and not at.error
    shown = specs(at)
    pair = [shown[k] for k in ("compare_pair_row_a", "compare_pair_row_b", "compare_pair_a", "compare_pair_b")]
    for spec in pair:
        assert f"layer {third[0]}, head {third[1]}" in spec["layout"]["title"]["text"]
    assert len({colour_range(spec) for spec in pair}) == 1 and colour_range(pair[0])[1] > 0
    assert [spec["layout"]["yaxis"]["tickvals"] for spec in pair[:2]] == [["10: it"], ["13: it"]]  # each at its place
    assert "compare_pair_diff" not in shown  # positions do not line up: no cell-by-cell difference
    assert {"pair_follow": "10", "pair_layer": str(third[0]), "pair_head": str(third[1])}.items() \
        <= {k: (v[0] if isinstance(v, list) else v) for k, v in at.query_params.items()}.items()


@pytest.mark.slow
def test_the_followed_token_comes_from_the_link():
    at = app(view="compare", mode="sentences", text=TIRED, text_b=LONGER, pair_follow="2")
    assert not at.exception and not at.error
    assert at.selectbox(key="compare_pair_follow").value == 2  # "animal"
    assert "“animal”" in specs(at)["compare_pair_row_a"]["layout"]["title"]["text"]


@pytest.mark.slow
def test_the_preset_fills_both_sentences_and_it_leaves_animal_for_street():
    at = app(view="compare", mode="coreference")
    assert not at.exception and not at.error
    assert at.selectbox(key="coref_follow").value == 10  # "it"
    top = at.dataframe[0].value.iloc[0]
    assert top["gained_a"] == "animal"  # the head that moved most had "it" on "animal" with tired
    assert colour_range(specs(at)["coref_row_a"]) == colour_range(specs(at)["coref_row_b"])


@pytest.mark.slow
def test_token_focus_keeps_one_colour_range_whichever_key():
    at = app(view="focus")
    assert not at.exception and not at.error
    first = specs(at)["focus_chart"]["data"][0]
    at.selectbox(key="focus_key").set_value(8).run()  # "street" instead of "animal"
    second = specs(at)["focus_chart"]["data"][0]
    assert "street" in specs(at)["focus_chart"]["layout"]["title"]["text"]
    assert (first["zmin"], first["zmax"]) == (second["zmin"], second["zmax"]) and first["zmax"] > 0
    assert first["z"] != second["z"]  # the cells did change


def test_the_focus_figure_takes_its_range_from_the_query_not_the_key():
    P = np.random.default_rng(0).random((2, 3, 5, 5)).astype(np.float32)
    top = query_top(P, 1)
    assert top == pytest.approx(float(P[:, :, 1].max()))
    ranges = {(f.data[0].zmin, f.data[0].zmax) for f in
              (focus_heatmap(focus_matrix(P, 1, k), "q", f"k{k}", zmax=top) for k in range(5))}
    assert ranges == {(0.0, top)}
    own = focus_heatmap(focus_matrix(P, 1, 0), "q", "k0").data[0].zmax  # without it: the key's own largest
    assert own == pytest.approx(float(P[:, :, 1, 0].max())) and own < top


@pytest.mark.slow
def test_after_a_new_sentence_b_the_figures_show_the_head_the_table_puts_first():
    at = app(view="compare", mode="sentences", text=TIRED, text_b=LONGER)
    assert not at.exception and not at.error
    at.text_input(key="compare_text_b").set_value("The animal didn't cross the street because it was too small.").run()
    assert not at.exception and not at.error
    table = at.dataframe[0].value
    top = int(table["layer"].iloc[0]), int(table["head"].iloc[0])
    shown = specs(at)
    for key in ("compare_pair_a", "compare_pair_b"):
        assert f"layer {top[0]}, head {top[1]}" in shown[key]["layout"]["title"]["text"]
