"""The atlas end to end on Ray (started once for this module): a probes build checked against a
direct computation, bad lines skipped, an empty corpus refused, a killed build resumed to the same
atlas, ``atlas show --json``'s contract."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from attention_viz.runtime.access import ATLAS_ROOT_ENV
from attention_viz.atlas import layout
from attention_viz.atlas.embedding import joint_embedding
from attention_viz.atlas.neighbors import Neighbors
from attention_viz.atlas.pipeline import build_atlas
from attention_viz.atlas.sources import Source
from attention_viz.atlas.stats import STATS, relation_predictions, sentence_stats, token_kinds
from attention_viz.atlas.store import Atlas, read_sample, truncation_note, vectors
from attention_viz.backends.registry import load_backend
from attention_viz.cli import main
from attention_viz.errors import ModelError
from attention_viz.ui.views import atlas as atlas_view

ROOT = Path(__file__).resolve().parent.parent
# 48 probes hold every relation (the rarest, repeated_token, 7 times) and ~550 tokens, more than the sample cap
PROBES = 48
CORPUS = f"probes:{PROBES}"
SMALL = dict(rows_per_file=8, sample_tokens=400, js_sentences=40, progress=False)


@pytest.fixture(scope="module")
def ray_address():
    ray = pytest.importorskip("ray")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    context = ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING")
    yield context.address_info["gcs_address"]
    ray.shutdown()


@pytest.fixture(scope="module")
def reference(ray_address, tmp_path_factory) -> Path:
    """An uninterrupted probes build."""
    out = tmp_path_factory.mktemp("atlas") / "reference"
    build_atlas("minilm", CORPUS, out, workers=2, **SMALL)  # two model actors share the pending files
    return out


def show_json(folder: Path, capsys) -> dict:
    assert main(["atlas", "show", str(folder), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_show_json_contract_and_values(reference, capsys):
    document = show_json(reference, capsys)
    assert set(document) == {"sentences", "skipped", "truncated", "stats", "relations"}
    assert document["sentences"] == PROBES and document["skipped"] == [] and document["truncated"] == []
    assert list(document["stats"]) == list(STATS)
    for name, grid in document["stats"].items():
        values = np.asarray(grid)
        assert values.shape == (6, 12)
        if name not in ("entropy", "distance"):
            assert values.min() >= 0 and values.max() <= 1 + 1e-6
    stats = {k: np.asarray(v) for k, v in document["stats"].items()}
    assert np.all(stats["special"] >= stats["first"] - 1e-6)  # [CLS] is token 0 and a special token
    relations = document["relations"]
    assert set(relations) == {"pronoun_antecedent", "determiner_noun", "adjective_noun", "subject_verb",
                              "verb_subject", "verb_object", "preposition_object", "repeated_token", "previous_token"}
    for relation in relations.values():
        assert relation["count"] > 0 and 0 <= relation["baseline"]["accuracy"] <= 1
        best = relation["best"]
        assert best["accuracy"] == pytest.approx(np.max(relation["accuracy"]), abs=1e-6)
    assert relations["previous_token"]["best"]["accuracy"] > 0.9  # minilm has previous-token heads
    assert relations["previous_token"]["baseline"] == {"offset": -1, "accuracy": 1.0}


def test_the_workers_progress_counts_every_record_once(reference):
    # two actors appended a line per batch to one log: none lost, none counted twice
    assert layout.progress_rows(reference) == PROBES
    assert layout.read_manifest(reference)["corpus"]["pending"] == PROBES


def test_corpus_statistics_equal_a_direct_computation(reference):
    """Token-weighted means over every query row, and relation accuracies, recomputed here sentence by sentence."""
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)  # on a busy 2-core machine two OpenMP threads wait on each other
    backend = load_backend("minilm")
    sums = {name: np.zeros((6, 12)) for name in STATS}
    hits, counts, tokens = {}, {}, 0
    for record in Source(CORPUS).records():
        result = backend.run(record.text)
        P = result.stack("pattern")
        n = P.shape[-1]
        for name, value in sentence_stats(P, token_kinds(result.tokens.labels, result.tokens.special)).items():
            sums[name] += n * value
        tokens += n
        predicted = relation_predictions(P, result.tokens.word_ids, [r[1] for r in record.relations])
        for (name, _, gold), row in zip(record.relations, predicted):
            hits[name] = hits.get(name, 0) + (row == gold)
            counts[name] = counts.get(name, 0) + 1
    summary = Atlas.open(reference).summary()
    for name in STATS:
        assert np.allclose(summary["stats"][name], sums[name] / tokens, atol=2e-6), name
    for name, relation in summary["relations"].items():
        assert relation["count"] == counts[name]
        assert np.allclose(np.asarray(relation["accuracy"]).ravel(), hits[name] / counts[name], atol=1e-6), name


def test_js_sample_and_similar_contexts(reference):
    atlas = Atlas.open(reference)
    js = atlas.js_matrix()
    assert js.shape == (72, 72) and np.allclose(js, js.T) and np.all(np.diag(js) == 0) and js.max() <= 1
    assert 0 < atlas.summary()["js"]["sentences"] <= PROBES
    manifest = atlas.manifest
    assert manifest["complete"] and 0 < manifest["counts"]["sample_tokens"] <= 400
    sample = read_sample(reference, ["q_2", "k_2", "h_3"])
    assert sample.num_rows == manifest["counts"]["sample_tokens"]
    assert vectors(sample, "q_2").shape == (sample.num_rows, 12 * 32) and vectors(sample, "h_3").shape[1] == 384
    # the sample's vectors are the model's: recompute one sentence
    line = int(sample.column("line")[0].as_py())
    text = Atlas.open(reference).sentences([line])[line]["text"]
    result, states = load_backend("minilm").layer_states(text, kinds=("pattern", "q"))
    rows = np.flatnonzero(sample.column("line").to_numpy() == line)
    q = result.array(("encoder", "self_attn"), 2, "q").transpose(1, 0, 2).reshape(len(rows), -1)
    assert np.allclose(vectors(sample, "q_2")[rows], q, atol=2e-2, rtol=1e-2)  # stored as float16
    # a word's nearest contexts at layer 3 include itself, at similarity 1 ([CLS] and [SEP] look
    # alike in every sentence, so they are left out)
    found = Neighbors(reference, 3).search(states[3][1:-1], k=20)
    for position, hits in enumerate(found, start=1):
        assert hits[0].similarity == pytest.approx(1.0, abs=2e-3)
        assert (line, position) in [(h.line, h.position) for h in hits if h.similarity > 0.998]


def test_bad_lines_are_skipped_with_their_reason(ray_address, tmp_path, capsys):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("\n".join([
        '{"text": "The cat sat on the mat."}', "{not json", "", '{"text": "\\u200b\\u200b"}',
        '{"title": "no text"}', '{"text": "It was too tired."}',
    ]) + "\n", encoding="utf-8")
    out = tmp_path / "atlas"
    assert main(["atlas", "build", "--corpus", str(corpus), "--out", str(out), "--workers", "1", "--no-progress"]) == 0
    assert "2 sentences, 4 skipped" in capsys.readouterr().out
    document = show_json(out, capsys)
    assert set(document) == {"sentences", "skipped", "truncated", "stats"}  # no relations: not the probes
    assert document["sentences"] == 2
    assert [s["line"] for s in document["skipped"]] == [2, 3, 4, 5]
    reasons = [s["reason"] for s in document["skipped"]]
    assert reasons[0].startswith("not JSON") and reasons[1] == "empty line"
    assert "nothing the model can read" in reasons[2] and reasons[3] == "no 'text' field"


def test_empty_or_unreadable_corpus_is_one_clear_error(tmp_path, capsys):
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "latin1.txt").write_bytes("café\n".encode("latin-1"))
    for name, message in (("empty.txt", "is empty: nothing to build"), ("latin1.txt", "is not UTF-8 (line 1, byte 4)")):
        code = main(["atlas", "build", "--corpus", str(tmp_path / name), "--out", str(tmp_path / name) + ".atlas"])
        err = capsys.readouterr().err
        last = err.splitlines()[-1]  # after the progress bar, one line
        assert code == 2 and last.startswith("error: ") and message in last
        assert "Traceback" not in err and not (tmp_path / (name + ".atlas")).exists()


def test_grouped_query_hf_model_over_a_folder_corpus_with_a_long_line(ray_address, tmp_path, capsys, monkeypatch):
    """A tiny random Llama folder with 4 query heads and 2 KV heads (keys are stored per KV head), a
    corpus folder of two files, one line far past the model's limit (cut there, and said so)."""
    from test_ours_decoder import WORDS, save

    folder = save(tmp_path / "llama", "llama")
    model = f"hf:{folder}"
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text("the cat sat on the mat\nit was tired because the dog ran to the park\n")
    long = " ".join(WORDS * 400)  # 6,000 words, one token each
    (corpus / "b.jsonl").write_text(json.dumps({"text": long}) + "\n")
    out = tmp_path / "atlas"
    assert main(["atlas", "build", "--model", model, "--corpus", str(corpus), "--out", str(out), "--workers", "1",
                 "--sample-tokens", "400", "--no-progress"]) == 0
    capsys.readouterr()
    backend = load_backend(model)
    document = show_json(out, capsys)
    assert document["sentences"] == 3 and document["skipped"] == []
    assert document["truncated"] == [{"line": 3, "tokens_dropped": 1 + len(long.split()) - backend.max_tokens}]
    assert np.asarray(document["stats"]["entropy"]).shape == (2, 4)
    assert main(["atlas", "show", str(out)]) == 0
    assert "1 line was longer than the model reads" in capsys.readouterr().out
    atlas = Atlas.open(out)
    assert (atlas.manifest["heads"], atlas.manifest["kv_heads"], atlas.manifest["d_k"]) == (4, 2, 8)
    sample = read_sample(out, ["q_1", "k_1"])
    line = int(sample.column("line")[0].as_py())
    rows = np.flatnonzero(sample.column("line").to_numpy() == line)
    result = backend.run(atlas.sentences([line])[line]["text"], kinds=("pattern", "k"))
    k = result.array(("decoder", "self_attn"), 1, "k")  # (kv_heads, n, d_k)
    assert k.shape[0] == 2
    assert np.allclose(vectors(sample, "k_1")[rows], k.transpose(1, 0, 2).reshape(len(rows), -1), atol=2e-2, rtol=1e-2)
    assert vectors(sample, "q_1").shape[1] == 4 * 8
    assert joint_embedding(out, 1, 3, "pca").n == sample.num_rows  # query head 3 reads KV head 1
    # the atlas page says it in one sentence
    from apphelpers import plain
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv(ATLAS_ROOT_ENV, str(out.parent))
    at = AppTest.from_function(_page, args=(out.name,), default_timeout=180).run()
    assert not at.exception, at.exception
    assert [plain(c.value) for c in at.caption if "longer than the model reads" in c.value] == [
        truncation_note(document["truncated"])]


def test_a_worker_failure_says_the_workers_own_error(ray_address, tmp_path, capsys):
    """A model folder that loads in no worker: the user reads why, not Ray's wrapping and advice."""
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "config.json").write_text('{"model_type": "llama"}')
    code = main(["atlas", "build", "--model", f"hf:{bad}", "--corpus", "probes:4", "--out", str(tmp_path / "atlas"),
                 "--workers", "1", "--no-progress"])
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]
    assert code == 2 and len(errors) == 1
    assert errors[0].startswith(f"error: a Ray worker failed: {bad} has no model.safetensors"), errors


def readable_shards(out: Path) -> list[Path]:
    """Shards with a footer (one being written when the build is killed has none: resume drops it)."""
    readable = []
    for path in layout.shard_files(out):
        try:
            pq.read_metadata(path)
            readable.append(path)
        except (OSError, ValueError):
            pass
    return readable


def test_killed_build_resumes_to_the_same_atlas(ray_address, reference, tmp_path):
    out = tmp_path / "killed"
    command = [sys.executable, "-m", "attention_viz", "atlas", "build", "--corpus", CORPUS, "--out", str(out),
               "--address", ray_address, "--workers", "1", "--rows-per-file", "8", "--sample-tokens", "400",
               "--js-sentences", "40", "--no-progress"]
    build = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    try:
        deadline = time.monotonic() + 240
        while not readable_shards(out) and build.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        os.killpg(build.pid, signal.SIGKILL)
        build.wait()
    assert not layout.read_manifest(out)["complete"], "the build finished before it could be killed"
    written = sum(pq.read_metadata(p).num_rows for p in readable_shards(out))
    assert 0 < written < PROBES, written
    with pytest.raises(ModelError, match="--resume"):
        build_atlas("minilm", CORPUS, out, workers=1, **SMALL)
    with pytest.raises(ModelError, match="another corpus"):
        build_atlas("minilm", f"probes:{PROBES + 1}", out, resume=True, workers=1, **SMALL)
    build_atlas("minilm", CORPUS, out, resume=True, workers=1, **SMALL)  # split unlike the reference's two workers

    resumed, whole = Atlas.open(out), Atlas.open(reference)
    assert resumed.manifest["counts"] == whole.manifest["counts"]
    assert resumed.manifest["sampling"] == whole.manifest["sampling"]
    a, b = resumed.summary(), whole.summary()
    assert a["sentences"] == b["sentences"] and a["skipped"] == b["skipped"]
    for name in STATS:
        assert np.allclose(a["stats"][name], b["stats"][name], atol=1e-6)
    assert a["relations"] == b["relations"]
    assert np.allclose(a["js"]["divergence"], b["js"]["divergence"], atol=1e-6)
    assert pq.read_table(out / layout.SAMPLE).equals(pq.read_table(reference / layout.SAMPLE))
    # sentence by sentence, the shards hold identical values
    columns = ["line", "entropy", "previous", "rel_pred", "q_0"]
    rows = [pq.read_table(folder / layout.SHARDS, columns=columns).sort_by("line") for folder in (out, reference)]
    assert rows[0].equals(rows[1])


def _page(name: str) -> None:
    import streamlit as st

    from attention_viz.ui import cache
    from attention_viz.ui.export import drawn_from
    from attention_viz.ui.state import seed_from_url
    from attention_viz.ui.views import atlas

    seed_from_url()  # as app.py does before any page
    if "atlas_atlas" not in st.session_state:
        st.session_state["atlas_atlas"] = name
    result = cache.run("minilm", "The animal didn't cross the street because it was too tired.")
    with drawn_from(result.provenance):  # as app.py does around every view
        atlas.render(result)


def test_atlas_page(reference, monkeypatch):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv(ATLAS_ROOT_ENV, str(reference.parent))  # the page names atlases inside the root
    at = AppTest.from_function(_page, args=(reference.name,), default_timeout=180).run()
    assert not at.exception, at.exception
    specs = [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]
    kinds = [trace["type"] for spec in specs for trace in spec["data"]]
    assert kinds.count("heatmap") >= 4 and "histogram" in kinds  # grid, 3 top sentences; this sentence vs corpus
    assert len(at.dataframe) == 1 and len(at.dataframe[0].value) == 8  # similar contexts
    for _ in range(20):  # PCA runs off the page's thread; the fragment shows it once ready
        if "scattergl" in kinds:
            break
        time.sleep(1)
        at.run()
        kinds = [t["type"] for chart in at.get("plotly_chart") for t in json.loads(chart.proto.spec)["data"]]
    assert kinds.count("scattergl") == 2  # queries and keys
    # a click on the grid or the map stores the head (atlas.choose_clicked); the rerun chooses it
    at.session_state[atlas_view.CLICKED] = (3, 5)
    at.run()
    assert (at.slider(key="atlas_layer").value, at.slider(key="atlas_head").value) == (3, 5)
    grid = json.loads(at.get("plotly_chart")[0].proto.spec)
    [outline] = grid["layout"]["shapes"]
    assert (outline["x0"] + 0.5, outline["y0"] + 0.5) == (5, 3)  # the chosen head outlined
    assert any("layer 3, head 5" in h.value for h in at.subheader)
    # no atlas yet: the page offers to build one and shows no traceback
    empty = AppTest.from_function(_page, args=("none",), default_timeout=60).run()
    assert not empty.exception and [b.label for b in empty.button] == ["Build the probes atlas of minilm"]
