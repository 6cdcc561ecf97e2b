"""Nothing is cut or refused without a word (issue 40).

``patch`` reads the whole of both inputs or refuses, naming the model's limit: before, it cut them
to the limit silently, and two inputs that differ only past it gave "nothing to restore", hiding
why. An ``hf:`` name the file system cannot even look up (a 300-character relative path) is one
sentence on the page, not "Something went wrong", and the server log gets no traceback for it."""

from __future__ import annotations

import contextlib
import io
import logging

import pytest

import attention_viz as av
from attention_viz import cli
from attention_viz.backends import registry
from attention_viz.errors import ModelError
from test_patching import PAIRS, folders  # noqa: F401 - the fixture

LIMIT = 64  # the tiny Llama's max_position_embeddings


def long_pair() -> tuple[str, str, str, str]:
    """Two texts past the limit that differ only in their last word."""
    clean, _, answer, wrong = PAIRS["llama"]
    body = " ".join([clean] * 12)  # about 100 tokens
    return f"{body} the cat", f"{body} the dog", answer, wrong


def test_the_pair_is_past_the_limit_and_differs_only_past_it(folders):  # noqa: F811
    backend = registry.load_backend(f"hf:{folders['llama']}")
    clean, corrupt, _, _ = long_pair()
    (a, dropped_a), (b, dropped_b) = backend.tokenize(clean), backend.tokenize(corrupt)
    assert backend.max_tokens == LIMIT and dropped_a > 0 and dropped_b > 0
    assert a.ids == b.ids  # what a silent cut would patch: the same text twice


def test_the_api_refuses_a_long_input_naming_the_limit(folders):  # noqa: F811
    with pytest.raises(ModelError) as error:
        av.patch(f"hf:{folders['llama']}", *long_pair())
    message = str(error.value)
    assert "\n" not in message and f"{LIMIT} tokens" in message and "clean text" in message
    assert "nothing to restore" not in message


def test_the_command_line_refuses_it_in_one_line(folders):  # noqa: F811
    clean, corrupt, answer, wrong = long_pair()
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["patch", "--model", f"hf:{folders['llama']}", "--clean", clean, "--corrupt", corrupt,
                         "--answer", answer, "--wrong", wrong])
    assert code == 2 and not out.getvalue()
    assert err.getvalue().count("\n") == 1 and f"at most {LIMIT} tokens" in err.getvalue()


def test_a_pair_within_the_limit_still_patches(folders):  # noqa: F811
    result = av.patch(f"hf:{folders['llama']}", *PAIRS["llama"])
    assert result["heads"].shape == (2, 4)


LONG_NAME = "a" * 300


def test_an_unlookupable_hf_name_is_one_sentence():
    with pytest.raises(ModelError) as error:
        registry.load_backend(f"hf:{LONG_NAME}")
    assert "\n" not in str(error.value) and "too long" in str(error.value)


def test_the_page_says_it_in_one_sentence_and_the_log_has_no_traceback(caplog):
    from apphelpers import app, messages

    with caplog.at_level(logging.INFO):
        at = app(model=f"hf:{LONG_NAME}", text="the cat sat", view="head")
    assert not at.exception
    shown = [m for m in messages(at) if "too long" in m]
    assert shown and not any("Something went wrong" in m for m in messages(at))
    ours = [r for r in caplog.records if r.name.startswith("attention_viz")]
    assert not any(r.exc_info for r in ours) and len(ours) <= 1, [r.getMessage() for r in ours]
