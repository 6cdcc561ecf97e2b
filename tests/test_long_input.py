"""Long inputs in the app: past the capture limit the head view reads the whole text, keeps each
layer's queries and keys, and draws one head pooled to screen tiles (uint8) or, zoomed in, exact
cells — equal to the model's own captured pattern where both exist."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from apphelpers import app, level_maps, plain, switch_view
from single_view import array, figures, link, problems
from test_ours_decoder import WORDS, save

from attention_viz.analysis.long_input import LOG_FLOOR, LongInput, clamp_region, long_heatmap, thumbnails
from attention_viz.backends.registry import load_backend
from attention_viz.figures.grid import THUMB, tile
from attention_viz.core.hooks import capture
from attention_viz.core.longcontext import queries_and_keys
from attention_viz.core.model import Transformer, TransformerConfig
from attention_viz.core.names import DECODER_SELF
from attention_viz.inputs.tokens import Tokens

LENGTH = 3000  # words; the tiny checkpoint reads 4096 positions, the app captures 1024


def long_text(n: int = LENGTH, seed: int = 0) -> str:
    rng = np.random.default_rng(seed)
    return " ".join(rng.choice(WORDS, n))


def pool(p: np.ndarray, tr: int, tc: int, how: str) -> np.ndarray:
    rows, cols = -(-p.shape[0] // tr), -(-p.shape[1] // tc)
    tiles = [[p[i * tr : (i + 1) * tr, j * tc : (j + 1) * tc] for j in range(cols)] for i in range(rows)]
    return np.array([[t.max() if how == "max" else t.mean() for t in row] for row in tiles])


@pytest.fixture(scope="module")
def small():
    """A tiny rotary GQA decoder, its captured patterns on 700 tokens, and the same input kept blockwise."""
    torch.manual_seed(0)
    config = TransformerConfig(shape="decoder-only", vocab_size=50, d_model=32, h=4, n_kv_heads=2, d_ff=64, N=2,
                               max_len=1024, positional="rotary", norm="pre", norm_type="rms", activation="silu",
                               gated_ffn=True, dropout=0.0)
    model = Transformer(config).eval()
    ids = torch.randint(0, 50, (1, 700))
    with torch.inference_mode(), capture(kinds=("pattern",)) as recorded:
        model(ids)
    patterns = [recorded.steps(name)[-1][0].numpy() for name in recorded.names_recorded()]
    n = ids.shape[1]
    tokens = Tokens("x" * n, tuple(ids[0].tolist()), ("x",) * n, tuple((i, i + 1) for i in range(n)),
                    (False,) * n, (False,) * n, tuple(range(n)))
    return LongInput("tiny", tokens, queries_and_keys(model, ids), 0), patterns


def test_overview_zoom_and_exact_cells_equal_the_captured_pattern(small):
    long, patterns = small
    for layer, head in ((0, 0), (1, 3)):
        full = patterns[layer][head]
        whole = long.overview(layer, head, tiles=64)
        everything = range(700)
        overview = long_heatmap(long, layer, head, whole, everything, everything, "max", tiles=64)
        assert overview.tile_rows == overview.tile_cols == 11 and overview.codes.dtype == np.uint8
        assert np.abs(overview.values() - pool(full, 11, 11, "max")).max() <= overview.scale / 510 + 1e-6
        rows, cols = range(100, 600), range(0, 300)
        zoom = long_heatmap(long, layer, head, whole, rows, cols, "mean", tiles=64)
        expected = pool(full[100:600, 0:300], zoom.tile_rows, zoom.tile_cols, "mean")
        assert np.abs(zoom.values() - expected).max() <= zoom.scale / 510 + 1e-6
        logs = long_heatmap(long, layer, head, whole, rows, cols, "mean", tiles=64, colours="log")
        within = np.abs(np.log10(logs.values()) - np.log10(np.maximum(expected, LOG_FLOOR)))
        assert within.max() <= 6 / 510 + 1e-9  # half a level of 6 decades in 255
        cells = long_heatmap(long, layer, head, whole, range(600, 650), range(590, 650), tiles=64)
        assert cells.is_exact and np.abs(cells.exact - full[600:650, 590:650]).max() <= 1e-5
        assert np.all(np.triu(cells.exact, 11) == 0.0)  # key 590 + j is in query 600 + i's future when j > i + 10


def test_grid_thumbnails_pool_each_heads_exact_pattern(small):
    """700 tokens, overviews of 64 tiles (11 tokens each), thumbnails of 16 × 16: each thumbnail cell is
    the max (or mean) over its tokens of the captured pattern, computed here from the full matrix."""
    long, patterns = small
    overviews = [[long.overview(layer, head, tiles=64) for head in range(4)] for layer in range(2)]
    for pooling in ("max", "mean"):
        thumbs = thumbnails(overviews, 16, pooling)
        assert thumbs.shape == (2, 4, 16, 16) and thumbs.dtype == np.float32
        edges = np.linspace(0, 64, 17).round().astype(int) * 11  # 4 tiles = 44 tokens per cell (the last 36)
        for layer, head in ((0, 1), (1, 3)):
            full = patterns[layer][head]
            cells = [[full[edges[i]:edges[i + 1], edges[j]:edges[j + 1]] for j in range(16)] for i in range(16)]
            if pooling == "max":
                expected = np.array([[c.max() for c in row] for row in cells])
                assert np.abs(thumbs[layer, head] - expected).max() <= 1e-6
            else:  # the mean of equal tiles' means; the last row and column of tiles are shorter (700 = 63·11 + 7)
                expected = np.array([[c.mean() for c in row] for row in cells])
                assert np.abs(thumbs[layer, head][:-1, :-1] - expected[:-1, :-1]).max() <= 1e-6
    with pytest.raises(ValueError):
        thumbnails(overviews, 16, "median")


def test_region_is_clamped_and_ordered():
    assert clamp_region(100, 90, 10) == range(10, 91)
    assert clamp_region(100, -5, 500) == range(0, 100)
    assert clamp_region(100, 7, 7) == range(7, 8)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("long")
    save(root / "llama", "llama", max_position_embeddings=4096)
    save(root / "mistral", "mistral", max_position_embeddings=4096)  # a sliding window (tests/test_long_window.py)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ATTENTION_VIZ_MODEL_ROOTS", str(root))
        yield root


def test_backend_reads_past_the_capture_limit(folders):
    backend = load_backend(f"hf:{folders / 'llama'}")
    text = long_text()
    result = backend.run(text)
    assert backend.can_read_long and len(result.tokens) == backend.max_tokens == 1024 and result.meta["dropped"] > 0
    long = backend.long_input(*backend.long_tokens(text))
    assert long.length == LENGTH + 1 and long.dropped == 0  # <s> + every word
    assert long.tokens.ids[:1024] == result.tokens.ids
    whole = long.overview(1, 2)
    cells = long_heatmap(long, 1, 2, whole, range(900, 1024), range(800, 1024))
    assert np.abs(cells.exact - result.pattern(DECODER_SELF, 1, 2)[900:1024, 800:1024]).max() <= 1e-5
    assert load_backend(f"hf:{folders / 'mistral'}").can_read_long


def test_head_view_on_a_long_text_draws_tiles_then_exact_cells(folders):
    model, text = f"hf:{folders / 'llama'}", long_text()
    at = app(view="head", model=model, text=text)  # the app: its sentence box holds 20,000 characters
    assert problems(at) == []
    assert any(f"{LENGTH + 1:,} tokens" in info.value for info in at.info)
    assert not at.warning and any("this view reads all of it" in info.value for info in at.info)  # nothing dropped here
    assert not figures(at)  # levels: our own element (ui/level_canvas.py)
    [element] = at.get("bidi_component")
    assert len(element.proto.bytes) < 1_000_000  # 512 × 512 levels, not 3001² floats
    [(header, _, z)] = level_maps(at)
    assert z.shape == (501, 501) and z[0, 0] == 255  # tiles of 6 tokens; query 0 gives key 0 all its weight
    assert header["zoomable"] and header["rows"] == [0, LENGTH + 1, 6]
    assert any("max pooling" in c.value and "log scale" in c.value for c in at.caption)
    at.radio(key="head_long_scale").set_value("linear").run()
    assert level_maps(at)[0][2].max() == 255  # linear: the largest tile is the scale

    at.radio(key="head_long_pooling").set_value("mean").run()
    assert any("mean pooling" in c.value for c in at.caption)
    at.slider(key="head_layer").set_value(1).run()
    at.select_slider(key="head_head").set_value(2).run()
    for key, value in (("head_long_q0", 900), ("head_long_q1", 1023), ("head_long_k0", 800), ("head_long_k1", 1023)):
        at.slider(key=key).set_value(value).run()
    assert problems(at) == []
    (spec,) = figures(at)
    exact = array(spec["data"][0]["z"])
    captured = load_backend(model).run(text).pattern(DECODER_SELF, 1, 2)  # the ordinary capture, first 1024
    assert np.abs(exact - captured[900:1024, 800:1024]).max() <= 1e-5
    assert any("exact weight" in c.value for c in at.caption)

    params = link(at)
    assert {k: params.get(k) for k in ("long_pooling", "long_q0", "long_q1", "layer", "head")} == {
        "long_pooling": "mean", "long_q0": "900", "long_q1": "1023", "layer": "1", "head": "2"}
    assert params.get("long_scale") == "linear"
    again = app(**params)
    assert problems(again) == [] and np.array_equal(array(figures(again)[0]["data"][0]["z"]), exact)
    again.text_area(key="text").set_value(long_text(seed=1)).run()  # a new text opens on the whole of it
    assert problems(again) == [] and level_maps(again)[0][2].shape == (501, 501)
    again.text_area(key="text").set_value(text).run()
    switch_view(again, "ablation")  # the other views read a window of 1,024 tokens, and say which
    assert any("(window 1 of " in info.value for info in again.info)


def test_grid_view_on_a_long_text_draws_every_head_from_its_whole_pattern(folders):
    model, text = f"hf:{folders / 'llama'}", long_text()
    at = app(view="grid", model=model, text=text)
    assert problems(at) == [] and not at.warning
    assert any("this view reads all of it" in info.value for info in at.info)
    (grid,) = figures(at)
    [(header, _, enlarged)] = level_maps(at)  # the enlarged head: our own element
    assert len(json.dumps(grid)) + len(at.get("bidi_component")[0].proto.bytes) < 3_000_000
    backend = load_backend(model)
    long = backend.long_input(*backend.long_tokens(text))
    overviews = [[long.overview(layer, head) for head in range(long.n_heads)] for layer in range(long.n_layers)]
    drawn = array(grid["data"][0]["z"])
    expected = tile(thumbnails(overviews, THUMB, "max"))
    assert drawn.shape == expected.shape and np.allclose(drawn, expected, atol=1e-6, equal_nan=True)
    assert enlarged.shape == (501, 501) and not header["zoomable"]  # the whole input, 6 tokens a tile
    at.slider(key="grid_layer").set_value(1).run()
    at.select_slider(key="grid_head").set_value(2).run()
    assert problems(at) == [] and level_maps(at)[0][0]["title"] == "layer 1, head 2"
    assert link(at).get("layer") == "1" and link(at).get("head") == "2"


def test_the_long_views_make_no_ordinary_run_until_its_tensors_are_asked_for(folders, monkeypatch):
    """Head, All heads, Token focus, Across layers, Compare and the detector draw a long text whole: the ordinary run of its first 1,024
    tokens (a forward with capture, which they never draw) is made when the downloads box is opened,
    or by a view that draws it. The whole text is tokenized once (0.3 s at 32k tokens), for telling
    that these views read it whole and for reading it."""
    from attention_viz.backends import ours_decoder

    runs, run = [], ours_decoder.OursDecoderBackend.run
    monkeypatch.setattr(ours_decoder.OursDecoderBackend, "run",
                        lambda self, text, *a, **k: runs.append(text) or run(self, text, *a, **k))
    tokenized, tokenize = [], ours_decoder.tokenize
    monkeypatch.setattr(ours_decoder, "tokenize", lambda tokenizer, text, n: tokenized.append(text) or
                        tokenize(tokenizer, text, n))
    model, text = f"hf:{folders / 'llama'}", long_text(seed=3)  # a text no other test has run
    at = app(view="head", model=model, text=text)
    assert problems(at) == [] and len(level_maps(at)) == 1
    assert any("this view reads all of it" in info.value for info in at.info)
    at.slider(key="head_layer").set_value(1).run()
    switch_view(at, "grid")
    assert problems(at) == [] and len(figures(at)) == len(level_maps(at)) == 1 and not at.warning  # grid, enlarged
    assert runs == [] and not at.get("download_button") and tokenized.count(text) == 1
    at.session_state["long_downloads"] = True  # the box opened
    at.run()
    assert problems(at) == [] and runs == [text] and len(at.get("download_button")) == 2 and not at.warning
    switch_view(at, "ablation")  # a view that draws a window of 1,024 tokens: the run of the window's text
    assert problems(at) == [] and runs[0] == text and len(runs) == 2 and text.startswith(runs[1])
    assert any("(window 1 of " in info.value for info in at.info)


def test_short_texts_and_other_models_keep_the_ordinary_head_view(folders):
    at = app(view="head", model=f"hf:{folders / 'llama'}", text=long_text(50))
    assert problems(at) == [] and not at.info
    assert figures(at)[0]["data"][0]["z"]["dtype"] == "f4"


def test_reading_a_long_text_takes_a_heavy_slot_refused_while_the_server_is_full(folders):
    from test_heavy import held

    from attention_viz.ui.heavy import heavy
    from attention_viz.ui.views import long_head

    model, text = f"hf:{folders / 'llama'}", long_text(seed=2)  # a text no other test has read
    long_head.long_input.clear()
    with held(heavy, heavy.slots):
        busy = app(view="head", model=model, text=text)
        assert not busy.exception
        assert any("busy with other heavy work, so reading the whole text" in plain(e.value) for e in busy.error)
        assert figures(busy) == [] and level_maps(busy) == []
    busy.run()  # the refusal was not cached: with a free slot the text is read and drawn
    assert problems(busy) == [] and len(level_maps(busy)) == 1
    busy.slider(key="head_layer").set_value(1).run()
    with held(heavy, heavy.slots):  # another head's pass is heavy work too; the text stays read
        busy.select_slider(key="head_head").set_value(3).run()
        assert any("busy with other heavy work, so this head's pass" in plain(e.value) for e in busy.error)
    busy.run()
    assert problems(busy) == [] and "layer 1, head 3" in level_maps(busy)[0][0]["title"]


def test_a_query_row_in_every_head_equals_the_captured_patterns(small):
    """Token focus of a long text: one query's exact row in every head, numpy's and the torch twin's."""
    from attention_viz.analysis.long_input import query_rows
    from attention_viz.backends.long_passes import TORCH_PASSES

    long, patterns = small
    for query in (0, 345, 699):
        rows = query_rows(long, query)
        assert rows.shape == (2, 4, query + 1) and rows.dtype == np.float32
        expected = np.stack([p[:, query, : query + 1] for p in patterns])
        assert np.abs(rows - expected).max() <= 1e-5
        assert np.abs(rows.sum(-1) - 1).max() <= 1e-5
    twin = LongInput(long.model, long.tokens, long.kept, 0, TORCH_PASSES)
    assert np.abs(query_rows(twin, 345) - query_rows(long, 345)).max() <= 1e-5
    with pytest.raises(IndexError, match="query position 700 out of range for 700 tokens"):
        query_rows(long, 700)


def test_token_focus_on_a_long_text_reads_the_whole_of_it(folders):
    model, text = f"hf:{folders / 'llama'}", long_text()
    at = app(view="focus", model=model, text=text)
    assert problems(at) == [] and not at.warning
    assert any("this view reads all of it" in info.value for info in at.info)
    assert any(f"{LENGTH + 1:,} tokens" in info.value for info in at.info)
    at.slider(key="focus_long_query").set_value(2000).run()
    at.slider(key="focus_long_key").set_value(1500).run()
    at.slider(key="focus_layer").set_value(1).run()
    at.select_slider(key="focus_head").set_value(3).run()
    assert problems(at) == []
    (heatmap,) = figures(at)
    backend = load_backend(model)
    long = backend.long_input(*backend.long_tokens(text))
    q, k = long.kept.head(1, 3)
    exact = long.passes.pattern_block(q, k, range(2000, 2001), range(2001))[0]
    drawn = array(heatmap["data"][0]["z"])
    assert drawn.shape == (2, 4) and abs(drawn[1, 3] - exact[1500]) <= 1e-6
    table = at.dataframe[0].value
    assert table["key position"].tolist() == np.argsort(-exact, kind="stable")[:10].tolist()
    params = link(at)
    assert {k: params.get(k) for k in ("long_query", "long_key", "layer", "head")} == {
        "long_query": "2000", "long_key": "1500", "layer": "1", "head": "3"}
    again = app(**params)
    assert problems(again) == [] and np.array_equal(array(figures(again)[0]["data"][0]["z"]), drawn)
    at.slider(key="focus_long_key").set_value(2500).run()  # after the query: zeros, and the page says why
    assert np.all(array(figures(at)[0]["data"][0]["z"]) == 0) and any("never looks ahead" in c.value for c in at.caption)


def test_a_tokens_rollout_over_a_long_text_is_the_rollout_of_the_captured_patterns(small):
    """Across layers of a long text: the rollout row of one token, from blockwise passes over the rows it
    reaches, equals analysis.rollout over the captured patterns (numpy's passes and the torch twin)."""
    from attention_viz.analysis.long_input import token_rollout
    from attention_viz.analysis.rollout import rollout
    from attention_viz.backends.long_passes import TORCH_PASSES

    long, patterns = small
    rolled = rollout(np.stack(patterns))[-1]
    for query in (0, 431, 699):
        mine = token_rollout(long, query)
        assert mine.shape == (query + 1,) and abs(mine.sum() - 1) <= 1e-6
        assert np.abs(mine - rolled[query, : query + 1]).max() <= 1e-5
    twin = LongInput(long.model, long.tokens, long.kept, 0, TORCH_PASSES)
    assert np.abs(token_rollout(twin, 431) - token_rollout(long, 431)).max() <= 1e-6


def test_across_layers_on_a_long_text_reads_the_whole_of_it(folders):
    model, text = f"hf:{folders / 'llama'}", long_text()
    at = app(view="layers", model=model, text=text)
    assert problems(at) == [] and not at.warning
    assert any("this view reads all of it" in info.value for info in at.info)
    at.slider(key="layers_long_query").set_value(2000).run()
    assert problems(at) == []
    rows, rolled = figures(at)
    backend = load_backend(model)
    long = backend.long_input(*backend.long_tokens(text))
    from attention_viz.analysis.long_input import query_rows, token_rollout

    per_layer, expected = query_rows(long, 2000).mean(axis=1), token_rollout(long, 2000)
    drawn = array(rows["data"][0]["z"])
    assert drawn.shape == (2, 501)  # 2,001 keys in runs of 4
    assert np.abs(drawn - np.maximum.reduceat(per_layer, np.arange(0, 2001, 4), axis=1)).max() <= 1e-6
    assert np.abs(array(rolled["data"][0]["z"])[0] - np.maximum.reduceat(expected, np.arange(0, 2001, 4))).max() <= 1e-6
    assert at.dataframe[0].value["key position"].tolist() == np.argsort(-expected, kind="stable")[:10].tolist()
    assert link(at).get("long_query") == "2000"
    at.slider(key="layers_long_query").set_value(300).run()  # few enough keys to draw each with its token
    rows, _ = figures(at)
    assert array(rows["data"][0]["z"]).shape == (2, 301) and rows["data"][0]["x"][1] == f"1: {long.tokens.labels[1]}"


def test_compare_on_a_long_text_draws_two_heads_of_the_whole_of_it(folders):
    model, text = f"hf:{folders / 'llama'}", long_text()
    at = app(view="compare", model=model, text=text)
    assert problems(at) == [] and not at.warning
    assert any("two heads side by side" in info.value for info in at.info)
    maps = level_maps(at)
    assert [header["title"] for header, _, _ in maps] == ["layer 0, head 0", "layer 1, head 0"]
    at.select_slider(key="compare_b_head").set_value(3).run()
    assert problems(at) == []
    (_, _, a), (header, _, b) = level_maps(at)
    backend = load_backend(model)
    long = backend.long_input(*backend.long_tokens(text))
    everything = range(long.length)
    expected = long_heatmap(long, 1, 3, long.overview(1, 3, means=False), everything, everything, "max", colours="log")
    assert header["title"] == "layer 1, head 3" and np.array_equal(b, expected.codes) and a.shape == b.shape
    assert link(at).get("b_head") == "3"
