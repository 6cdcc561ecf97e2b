"""The atlas without Ray: corpus readers, the probes' gold relations, the per-sentence statistics."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from attention_viz.atlas import probes
from attention_viz.atlas.pipeline import priority
from attention_viz.atlas.sources import Source
from attention_viz.atlas.stats import (
    PUNCTUATION, SPECIAL, STATS, WORD, from_upper, js_divergences, offset_baseline, relation_predictions,
    sentence_stats, token_kinds, upper, word_attention,
)
from attention_viz.errors import ModelError

# -- probes ---------------------------------------------------------------------------------------


def test_probes_are_seeded_and_sized():
    assert probes.generate(50, 3) == probes.generate(50, 3)
    assert probes.generate(50, 3) != probes.generate(50, 4)
    assert len(probes.generate(7)) == 7


def test_probe_relations_point_at_the_words_they_name():
    for probe in probes.generate(400, 1):
        words = probe.text.split()
        names = {name for name, _, _ in probe.relations}
        assert names <= set(probes.RELATIONS)
        for name, dependent, head in probe.relations:
            assert 0 <= dependent < len(words) and 0 <= head < len(words) and dependent != head
            word, gold = words[dependent].rstrip("."), words[head].rstrip(".")
            if name == "determiner_noun":
                assert word.lower() in ("the", "a")
            if name == "pronoun_antecedent":
                assert word == "it" and gold in {n for group in probes.WINOGRAD for n in group[0] + group[2]}
            if name == "repeated_token":
                assert word == gold and head < dependent
            if name == "previous_token":
                assert head == dependent - 1


def test_winograd_pairs_flip_the_antecedent_with_one_adjective():
    rng = __import__("random").Random(5)
    first, second = probes.winograd_pair(rng)
    a, b = first.text.split(), second.text.split()
    assert a[:-1] == b[:-1] and a[-1] != b[-1]
    antecedent = {p.text: [h for n, _, h in p.relations if n == "pronoun_antecedent"] for p in (first, second)}
    assert antecedent[first.text] == [1] and antecedent[second.text] == [5]


def test_probe_words_are_the_words_minilm_groups_tokens_into():
    from attention_viz.backends.registry import load_backend

    backend = load_backend("minilm")
    for probe in probes.generate(40, 2):
        tokens, _ = backend.tokenize(probe.text)
        assert 1 + max(w for w in tokens.word_ids if w is not None) == len(probe.text.split())


# -- sources --------------------------------------------------------------------------------------


def records(tmp_path, name: str, content: bytes | str, column: str = "text"):
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    return list(Source(str(path), column).records())


def test_txt_lines_numbered_from_one_with_empty_lines_skipped(tmp_path):
    got = records(tmp_path, "c.txt", "\ufeffFirst one.\n\n   \nLast one.\r\n")
    assert [(r.line, r.text, r.reason) for r in got] == [
        (1, "First one.", None), (2, "", "empty line"), (3, "   ", "empty line"), (4, "Last one.", None)]


def test_jsonl_bad_lines_carry_their_reason(tmp_path):
    lines = ['{"text": "Good."}', "{broken", '{"other": 1}', '{"text": 3}', "[1, 2]", "", '{"text": "Also good."}']
    got = records(tmp_path, "c.jsonl", "\n".join(lines))
    reasons = [r.reason for r in got]
    assert reasons[0] is None and reasons[-1] is None
    assert reasons[1].startswith("not JSON") and reasons[2] == "no 'text' field"
    assert reasons[3] == "'text' is not a string" and reasons[4] == "no 'text' field" and reasons[5] == "empty line"
    assert [r.line for r in got] == list(range(1, 8))


def test_csv_named_column(tmp_path):
    got = records(tmp_path, "c.csv", 'id,sentence\n1,"Hello, world."\n2,\n', column="sentence")
    assert [(r.line, r.text, r.reason) for r in got] == [(1, "Hello, world.", None), (2, "", "empty line")]
    with pytest.raises(ModelError, match="no column 'text'.*id, sentence"):
        records(tmp_path, "c.csv", "id,sentence\n1,x\n")


def test_parquet_column_and_nulls(tmp_path):
    pq.write_table(pa.table({"text": ["One.", None, "Three."]}), tmp_path / "c.parquet")
    got = list(Source(str(tmp_path / "c.parquet")).records())
    assert [(r.line, r.text, r.reason) for r in got] == [(1, "One.", None), (2, "", "empty value"), (3, "Three.", None)]
    pq.write_table(pa.table({"text": [1, 2]}), tmp_path / "n.parquet")
    with pytest.raises(ModelError, match="not text"):
        list(Source(str(tmp_path / "n.parquet")).records())


@pytest.mark.parametrize("name", ["c.txt", "c.jsonl"])
def test_non_utf8_is_one_clear_error(tmp_path, name):
    with pytest.raises(ModelError, match=r"not UTF-8 \(line 2, byte 3\)") as error:
        records(tmp_path, name, b"fine\nab\xe9c\n")
    assert "\n" not in str(error.value)


def test_unsupported_or_missing_corpus(tmp_path):
    (tmp_path / "c.docx").write_text("x")
    with pytest.raises(ModelError, match="unsupported corpus format 'c.docx'"):
        Source(str(tmp_path / "c.docx")).check()
    with pytest.raises(ModelError, match="corpus not found"):
        Source(str(tmp_path / "missing.txt")).check()
    with pytest.raises(ModelError, match="probes:N"):
        Source("probes:many").check()


def test_corpus_hash_follows_the_bytes(tmp_path):
    path = tmp_path / "c.txt"
    path.write_text("a\nb\n")
    first = Source(str(path)).sha256()
    path.write_text("a\nc\n")
    assert Source(str(path)).sha256() != first
    assert Source("probes:10").sha256() == Source("probes:10:0").sha256() != Source("probes:11").sha256()


def test_priority_is_uniform_and_fixed_by_the_line():
    values = np.array([priority(i) for i in range(1, 20001)])
    assert values.min() >= 0 and values.max() < 1
    assert abs(values.mean() - 0.5) < 0.01 and abs((values < 0.1).mean() - 0.1) < 0.01
    assert priority(17) == priority(17)


# -- statistics -----------------------------------------------------------------------------------


def patterns(n: int = 5) -> np.ndarray:
    """Layer 0: head 0 previous token (row 0 on itself), head 1 self, head 2 uniform, head 3 all on token 0."""
    eye = np.eye(n)
    previous = np.roll(eye, -1, axis=1)
    previous[0] = eye[0]
    uniform = np.full((n, n), 1.0 / n)
    first = np.zeros((n, n))
    first[:, 0] = 1
    return np.stack([previous, eye, uniform, first])[None]  # (1, 4, n, n)


def test_sentence_stats_on_known_heads():
    n = 5
    kinds = np.array([SPECIAL, WORD, WORD, PUNCTUATION, SPECIAL], dtype=np.int8)
    s = {k: v[0] for k, v in sentence_stats(patterns(n), kinds).items()}
    assert s["previous"][0] == pytest.approx((n - 1) / n) and s["self"][1] == 1.0
    assert s["entropy"][0] == 0.0 and s["entropy"][2] == pytest.approx(np.log2(n))
    assert s["first"][3] == 1.0 and s["special"][3] == 1.0 and s["special"][2] == pytest.approx(2 / n)
    assert s["punctuation"][2] == pytest.approx(1 / n) and s["punctuation"][1] == pytest.approx(1 / n)
    # distance: self 0; uniform mean_q mean_k |q−k|; previous (n−1)/n
    pos = np.arange(n)
    assert s["distance"][1] == 0.0 and s["distance"][0] == pytest.approx((n - 1) / n)
    assert s["distance"][2] == pytest.approx(np.abs(pos[:, None] - pos[None]).mean())


def test_js_divergences_symmetric_bounded_and_zero_for_equal_heads():
    P = np.concatenate([patterns(), patterns()[:, :1]], axis=1)  # head 4 repeats head 0
    js = js_divergences(P)
    assert js.shape == (5, 5) and np.allclose(js, js.T) and np.all(np.diag(js) == 0)
    assert js[0, 4] == pytest.approx(0.0, abs=1e-12) and js.max() <= 1.0 + 1e-12
    assert js[1, 3] == pytest.approx(0.8)  # self vs first: disjoint except row 0 → 4 of 5 rows at 1 bit
    assert np.allclose(from_upper(upper(js), 5), js)


def test_token_kinds():
    kinds = token_kinds(["[CLS]", "Hi", ",", "there", "...", "'s", "[SEP]"], [True] + [False] * 5 + [True])
    assert kinds.tolist() == [SPECIAL, WORD, PUNCTUATION, WORD, PUNCTUATION, WORD, SPECIAL]


def test_word_attention_and_predictions():
    # tokens: [CLS] a b1 b2 c [SEP]; words a=0, b=1 (two pieces), c=2
    word_ids = [None, 0, 1, 1, 2, None]
    n = len(word_ids)
    P = np.zeros((1, 1, n, n))
    P[0, 0, :, 2] = 0.3
    P[0, 0, :, 3] = 0.3  # word b gets 0.6 in total
    P[0, 0, :, 0] = 0.4
    Pw = word_attention(P, word_ids)
    assert Pw.shape == (1, 1, 3, 3) and np.allclose(Pw[0, 0, :, 1], 0.6)
    # the dependent never predicts itself: word 1 (b) attends most to itself, so its answer is the next best
    P[0, 0, :, 1] = 0.2
    P[0, 0, :, 0] = 0.2
    assert relation_predictions(P, word_ids, [0, 1, 2])[:, 0].tolist() == [1, 0, 1]


def test_word_attention_is_the_mean_over_query_pieces_of_the_sum_over_key_pieces():
    rng = np.random.default_rng(3)
    word_ids = [None, 0, 0, 1, 2, 2, 2, 3, None]
    P = rng.random((2, 3, len(word_ids), len(word_ids)))
    expected = np.zeros((2, 3, 4, 4))
    for w in range(4):
        for u in range(4):
            queries = [t for t, i in enumerate(word_ids) if i == w]
            keys = [s for s, i in enumerate(word_ids) if i == u]
            expected[:, :, w, u] = P[:, :, queries][:, :, :, keys].sum(-1).mean(-1)
    np.testing.assert_allclose(word_attention(P, word_ids), expected, rtol=1e-12)


def test_offset_baseline():
    assert offset_baseline({1: 6, -2: 3, 0: 10}, 10) == (1, 0.6)
    assert offset_baseline({}, 0) == (0, 0.0)



# -- joint query–key view -------------------------------------------------------------------------


def test_key_translation_and_norm_scaling_keep_every_attention_pattern():
    from attention_viz.atlas.embedding import align_queries_and_keys

    rng = np.random.default_rng(0)
    q, k = rng.normal(size=(40, 16)), rng.normal(loc=2.0, scale=3.0, size=(30, 16))
    q2, k2 = align_queries_and_keys(q, k)

    def softmax(x):
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    assert np.allclose(softmax(q @ k.T), softmax(q2 @ k2.T))
    assert np.linalg.norm(q2, axis=1).mean() == pytest.approx(np.linalg.norm(k2, axis=1).mean(), rel=1e-9)


def test_qk_scatter_is_webgl_and_compact_at_50k_points():
    from attention_viz.figures.atlas import qk_scatter

    n = 25_000
    rng = np.random.default_rng(1)
    figure = qk_scatter(rng.normal(size=(2 * n, 2)).astype(np.float32), ["tok"] * n, np.arange(n) // 10,
                        np.arange(n) % 10, np.zeros(n, np.int8))
    assert [trace.type for trace in figure.data] == ["scattergl", "scattergl"]
    assert sum(len(trace.x) for trace in figure.data) == 2 * n
    assert len(figure.to_json()) < 4_000_000  # coordinates travel as binary arrays, not decimal text


def test_head_grid_outlines_the_chosen_head():
    from attention_viz.figures.atlas import head_grid

    figure = head_grid(np.arange(12.0).reshape(3, 4), "x", (2, 1))
    assert figure.data[0].type == "heatmap" and figure.layout.shapes[0].x0 == 0.5 and figure.layout.shapes[0].y0 == 1.5


def test_every_head_of_the_atlas_grid_and_map_can_be_clicked_as_itself():
    from attention_viz.figures.atlas import head_grid, head_map_figure
    from attention_viz.ui.tables import clicked_tile

    values = np.arange(12.0).reshape(3, 4)
    markers = head_grid(values, "x").data[1]  # the clickable layer: one marker per head
    for index, (x, y, data) in enumerate(zip(markers.x, markers.y, markers.customdata)):
        event = type("Event", (), {"selection": type("Selection", (), {"points": [
            {"curve_number": 1, "point_index": index}]})()})()
        assert clicked_tile(event, 4, curve=1) == (y, x) == (data[0], data[1])
        assert data[2] == values[y, x]  # hover shows the head's own value
    points = head_map_figure(np.random.default_rng(0).normal(size=(12, 2)), 4, (0, 0)).data[0]
    assert [tuple(c) for c in points.customdata] == [(i // 4, i % 4) for i in range(12)]  # point i = head i


# -- the worker on every kind of model the app runs (no Ray: the actor class called directly) ------

SENTENCES = ["the cat sat on the mat", "it was tired because the dog ran"]


def pending(texts: list[str]) -> pa.Table:
    from attention_viz.atlas.pipeline import PENDING_SCHEMA

    return pa.Table.from_pylist([{"line": i, "text": text, "reason": None, "priority": 0.0, "words": len(text.split()),
                                  "rel_names": [], "rel_from": [], "rel_to": []} for i, text in enumerate(texts, 1)],
                                schema=PENDING_SCHEMA)


@pytest.fixture(scope="module")
def hf_folders(tmp_path_factory):
    from test_hf_backend import save_bart, save_bert, save_gpt2, save_t5
    from test_ours_decoder import save

    base = tmp_path_factory.mktemp("worker-models")
    for name, saver in (("bert", save_bert), ("gpt2", save_gpt2), ("t5", save_t5), ("bart", save_bart)):
        saver(base / name)
    save(base / "llama", "llama")  # 4 query heads, 2 KV heads
    return base


# (model, layers, heads, KV heads (0: no q/k from transformers), the group read)
# transformers' BERT, T5 and BART run our attention function too: their queries and keys reach the atlas
KINDS = [("toy-translate", 3, 4, 4, "encoder"), ("bert", 2, 4, 4, "encoder"), ("gpt2", 2, 4, 4, "decoder"),
         ("t5", 2, 4, 4, "encoder"), ("bart", 2, 4, 4, "encoder"), ("llama", 2, 4, 2, "decoder")]


@pytest.mark.parametrize("name, layers, heads, kv_heads, part", KINDS, ids=[k[0] for k in KINDS])
def test_the_worker_reads_encoders_decoders_and_encoder_decoders(hf_folders, name, layers, heads, kv_heads, part):
    from attention_viz.atlas.worker import AtlasWorker

    model = name if name == "toy-translate" else f"hf:{hf_folders / name}"
    worker = AtlasWorker(model, sample_below=1.0, js_below=1.0)
    assert (worker.layers, worker.heads, worker.kv_heads, worker.group) == (layers, heads, kv_heads, (part, "self_attn"))
    table = worker(pending(SENTENCES))
    table.validate(full=True)
    assert table.column("reason").to_pylist() == [None, None]
    assert table.column("tokens_dropped").to_pylist() == [0, 0]
    for stat in STATS:
        assert len(table.column(stat)[0]) == layers * heads
    if kv_heads:  # q per query head, k per KV head, both d_k wide
        assert len(table.column("q_0")[0][0]) == heads * worker.d_k
        assert len(table.column("k_0")[0][0]) == kv_heads * worker.d_k


def test_a_model_without_self_attention_is_refused_in_one_line():
    from attention_viz.atlas.worker import AtlasWorker

    with pytest.raises(ModelError, match="has no self-attention heads") as error:
        AtlasWorker("toy-translate-rnn", sample_below=1.0, js_below=1.0)
    assert "\n" not in str(error.value)
