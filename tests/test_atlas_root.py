"""Atlases live under one root: a link names an atlas, never a folder; a build writes, and removes,
only inside a folder it made (the marker). Also without Ray: broken atlas folders in one sentence,
a folder as a corpus, the worker's own exception out of Ray's wrappers, the truncation sentence."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from apphelpers import app, messages

from attention_viz.runtime.access import ATLAS_ROOT_ENV, atlas_folder, atlas_name, atlas_names, atlas_root
from attention_viz.atlas import layout
from attention_viz.atlas.pipeline import build_atlas, worker_failure
from attention_viz.atlas.sources import Source
from attention_viz.atlas.store import Atlas, truncation_note
from attention_viz.cli import main
from attention_viz.errors import ModelError


@pytest.fixture
def root(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "root"
    folder.mkdir()
    monkeypatch.setenv(ATLAS_ROOT_ENV, str(folder))
    return folder


@pytest.fixture
def outside(tmp_path) -> Path:
    """Someone's folder outside the root, as the hostile tester aimed at: pending/ with a file in it,
    and a sibling ``.log`` file that the old build overwrote."""
    folder = tmp_path / "outside" / "some-folder"
    (folder / "pending").mkdir(parents=True)
    (folder / "pending" / "keep.txt").write_text("precious")
    (folder.parent / "some-folder.log").write_text("my log")
    return folder


def assert_intact(folder: Path) -> None:
    assert (folder / "pending" / "keep.txt").read_text() == "precious"
    assert (folder.parent / "some-folder.log").read_text() == "my log"
    assert sorted(p.name for p in folder.iterdir()) == ["pending"]  # no manifest.json, shards/, build.log
    assert sorted(p.name for p in folder.parent.iterdir()) == ["some-folder", "some-folder.log"]


# -- names and the root --------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["../outside", "..", ".", "a/b", "/etc", "a..b", ".hidden", "", "x" * 101,
                                  "a\\b", "a\0b", "~root"])
def test_an_atlas_name_with_a_slash_or_dots_is_refused(root, name):
    with pytest.raises(ModelError, match="plain name") as error:
        atlas_folder(name)
    assert "\n" not in str(error.value)


def test_a_plain_name_is_a_folder_inside_the_root(root):
    assert atlas_folder("minilm-probes") == root / "minilm-probes"
    assert atlas_folder("v1.2_test") == root / "v1.2_test"


def test_a_symlink_out_of_the_root_is_refused(root, outside):
    (root / "escape").symlink_to(outside)
    with pytest.raises(ModelError, match="leads outside"):
        atlas_folder("escape")


def test_the_root_defaults_to_the_cache_folder(tmp_path, monkeypatch):
    monkeypatch.delenv(ATLAS_ROOT_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert atlas_root() == tmp_path / "cache" / "attention-viz" / "atlas"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert atlas_root() == tmp_path / "home" / ".cache" / "attention-viz" / "atlas"


def test_default_names_are_valid_names(root):
    assert atlas_name("minilm", "probes") == "minilm-probes"
    long = atlas_name("hf:/models/../very/long/" + "x" * 200 + "/llama", "probes")
    assert len(long) <= 100 and long.endswith("_llama-probes") and atlas_folder(long).parent == root
    assert atlas_folder(atlas_name("hf:../..", "probes")).parent == root


def test_names_lists_only_atlases(root):
    (root / "b-atlas").mkdir()
    (root / "b-atlas" / layout.MANIFEST).write_text("{}")
    (root / "a-atlas").mkdir()
    (root / "a-atlas" / layout.MANIFEST).write_text("{}")
    (root / "not-one").mkdir()
    assert atlas_names() == ["a-atlas", "b-atlas"]


# -- a link on the atlas page ---------------------------------------------------------------------


def no_server_path_in_a_box(at) -> None:
    for box in at.text_input:
        assert "/" not in str(box.value), (box.label, box.value)


def test_a_link_with_a_folder_outside_the_root_builds_and_removes_nothing(root, outside):
    # the old parameter is ignored; the page offers the default atlas in the root
    at = app(model="minilm", view="atlas", dir=str(outside))
    assert not at.exception
    no_server_path_in_a_box(at)
    assert at.text_input(key="atlas_atlas").value == "minilm-probes"
    assert not any(str(outside) in m for m in messages(at))
    # a path given as the name is refused in one sentence; there is nothing to build
    for name in (f"../outside/{outside.name}", str(outside), f"..%2F{outside.name}"):
        at = app(model="minilm", view="atlas", atlas=name)
        assert not at.exception
        assert any("plain name" in m for m in messages(at)), messages(at)
        assert not [b for b in at.button if b.key == "atlas_build"]
    # a symlink inside the root that leads out is refused the same way
    (root / "escape").symlink_to(outside)
    at = app(model="minilm", view="atlas", atlas="escape")
    assert any("leads outside" in m for m in messages(at)) and not [b for b in at.button if b.key == "atlas_build"]
    assert_intact(outside)


def test_the_build_button_leaves_a_folder_it_did_not_make_alone(root):
    """A folder in the root that a build did not make (no marker): the build is refused before a
    process starts, and nothing in it is removed or written."""
    foreign = root / "foreign"
    (foreign / "pending").mkdir(parents=True)
    (foreign / "pending" / "keep.txt").write_text("precious")
    at = app(model="minilm", view="atlas", atlas="foreign")
    at = at.button(key="atlas_build").click().run()
    assert not at.exception
    assert messages(at) == [  # errors first, then information; the atlas named, never its server path
        "foreign is not empty and was not made by `atlas build`: choose a new or empty folder",
        "No finished atlas named foreign yet. Build one here from the probes (the page shows its progress and opens "
        "the atlas when it is done) or with `python -m attention_viz atlas build`."]
    assert (foreign / "pending" / "keep.txt").read_text() == "precious"
    assert sorted(p.name for p in foreign.iterdir()) == ["pending"]  # no log, no marker, no manifest


def test_a_broken_atlas_is_one_sentence_on_the_page(root):
    (root / "broken").mkdir()
    (root / "broken" / layout.MANIFEST).write_text("{not json")
    at = app(model="minilm", view="atlas", atlas="broken")
    assert not at.exception
    assert messages(at) == ["broken is not an atlas: its manifest.json is not a JSON object; rebuild it"]


# -- the command line: paths, but never someone else's folder -------------------------------------


def test_a_build_into_a_folder_it_did_not_make_removes_nothing(outside, capsys):
    with pytest.raises(ModelError, match="not empty and was not made by `atlas build`"):
        build_atlas("minilm", "probes:2", outside, progress=False)
    assert_intact(outside)
    assert main(["atlas", "build", "--corpus", "probes:2", "--out", str(outside), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and "Traceback" not in err
    assert_intact(outside)
    with pytest.raises(ModelError, match="was not made by `atlas build`"):
        layout.remove(outside, layout.PENDING)
    assert_intact(outside)


def test_a_folder_is_claimed_only_when_new_or_empty(tmp_path):
    new, empty = tmp_path / "a" / "new", tmp_path / "empty"
    empty.mkdir()
    for folder in (new, empty):
        layout.claim(folder)
        assert (folder / layout.MARKER).is_file()
        layout.claim(folder)  # ours already
        (folder / layout.PENDING).mkdir()
        layout.remove(folder, layout.PENDING)
        assert not (folder / layout.PENDING).exists()
    (tmp_path / "file").write_text("x")
    with pytest.raises(ModelError, match="is a file"):
        layout.claim(tmp_path / "file")


def write_manifest(folder: Path, manifest: dict | str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    text = manifest if isinstance(manifest, str) else json.dumps(manifest)
    (folder / layout.MANIFEST).write_text(text)
    return folder


GOOD = {"schema_version": layout.SCHEMA_VERSION, "model": "minilm", "complete": True,
        "corpus": {"source": "probes"}, "layers": 6, "heads": 12, "counts": {}}


@pytest.mark.parametrize("manifest, message", [
    ("{not json", "its manifest.json is not a JSON object"),
    ("[1, 2]", "its manifest.json is not a JSON object"),
    (b"\xff\xfe", "its manifest.json is not a JSON object"),
    ({"hello": 1}, "was built with atlas schema None"),
    ({**GOOD, "model": 3, "layers": "six"}, "lacks model, layers"),
    ({**GOOD, "corpus": "probes"}, "lacks corpus.source"),
    (GOOD, "has lost its shards"),
])
def test_a_broken_or_foreign_atlas_folder_is_one_line(tmp_path, capsys, manifest, message):
    folder = tmp_path / "atlas"
    folder.mkdir()
    if isinstance(manifest, bytes):
        (folder / layout.MANIFEST).write_bytes(manifest)
    else:
        write_manifest(folder, manifest)
    with pytest.raises(ModelError, match="rebuild it") as error:
        Atlas.open(folder)
    assert message in str(error.value)
    assert main(["atlas", "show", str(folder), "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and message in captured.err
    assert "Traceback" not in captured.err


def test_an_unreadable_shard_is_one_line(tmp_path):
    folder = write_manifest(tmp_path / "atlas", GOOD)
    (folder / layout.SHARDS).mkdir()
    (folder / layout.SHARDS / "0.parquet").write_text("not parquet")
    with pytest.raises(ModelError, match="the shard 0.parquet cannot be read") as error:
        Atlas.open(folder).aggregate()
    assert "\n" not in str(error.value)


# -- a folder as the corpus -----------------------------------------------------------------------


def test_a_folder_corpus_reads_its_text_files_in_name_order(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "b.jsonl").write_text('{"text": "Third."}\n{"other": 1}\n')
    (corpus / "a.txt").write_text("First.\n\nSecond.\n")
    (corpus / "notes.md").write_text("not read")
    (corpus / "c.txt").mkdir()  # a folder with a corpus-like name is not a file
    source = Source(str(corpus))
    source.check()
    got = [(r.line, r.text, r.reason) for r in source.records()]
    assert got == [(1, "First.", None), (2, "", "empty line"), (3, "Second.", None),
                   (4, "Third.", None), (5, "", "no 'text' field")]
    first = source.sha256()
    (corpus / "a.txt").rename(corpus / "z.txt")  # the same bytes in another order: another corpus
    assert Source(str(corpus)).sha256() != first


def test_a_folder_without_text_files_names_the_accepted_formats(tmp_path):
    (tmp_path / "notes.md").write_text("x")
    with pytest.raises(ModelError) as error:
        Source(str(tmp_path)).check()
    assert str(error.value) == (f"the folder {tmp_path} holds no .txt or .jsonl files: a corpus is a .txt, .jsonl, "
                                ".csv or .parquet file, a folder of .txt/.jsonl files, or probes")


# -- the worker's own exception, out of Ray's wrappers ----------------------------------------------


def test_the_worker_exception_is_unwrapped_from_rays_chain():
    pytest.importorskip("ray")
    import pyarrow as pa
    from ray.data.exceptions import UserCodeException
    from ray.exceptions import ActorDiedError, RayTaskError

    try:
        try:
            raise pa.ArrowInvalid("values length (96) must be a multiple of the list_size (64)")
        except pa.ArrowInvalid as inner:
            raise UserCodeException("UDF failed to process a data block.") from inner
    except UserCodeException as wrapped:
        error = RayTaskError("MapBatches(AtlasWorker)", "Traceback (most recent call last): ...", wrapped)
    assert worker_failure(error.as_instanceof_cause()) == (
        "a Ray worker failed: ArrowInvalid: values length (96) must be a multiple of the list_size (64)")
    # an actor that died in its constructor: Ray keeps the traceback only as text
    died = ActorDiedError()
    died.error_msg = ("The actor died because of an error raised in its creation task, \x1b[36mray::MapWorker\x1b[39m\n"
                      "Traceback (most recent call last):\n  File \"x.py\", line 1\n"
                      "attention_viz.errors.ModelError: /models/x has no model.safetensors")
    assert worker_failure(died) == "a Ray worker failed: /models/x has no model.safetensors"
    assert "--resume" in worker_failure(ActorDiedError())  # killed: nothing raised, resuming is the fix


def test_the_truncation_sentence():
    assert truncation_note([{"line": 4, "tokens_dropped": 6000}]) == (
        "1 line was longer than the model reads: cut at its limit, 6,000 tokens in all not read "
        "(at most 6,000 from one line, line 4)")
    assert truncation_note([{"line": 2, "tokens_dropped": 3}, {"line": 9, "tokens_dropped": 10}]).startswith(
        "2 lines were longer than the model reads: cut at its limit, 13 tokens in all not read (at most 10 from one line, line 9)")


def test_the_atlas_name_box_follows_the_model_and_a_typed_name_stays(root):
    at = app(model="minilm", view="atlas")
    assert at.text_input(key="atlas_atlas").value == atlas_name("minilm", "probes")
    at.sidebar.selectbox(key="model_choice").set_value("toy-translate").run()
    assert not at.exception
    assert at.text_input(key="atlas_atlas").value == atlas_name("toy-translate", "probes")
    at.text_input(key="atlas_atlas").set_value("my-atlas").run()
    at.sidebar.selectbox(key="model_choice").set_value("minilm").run()
    assert at.text_input(key="atlas_atlas").value == "my-atlas"
