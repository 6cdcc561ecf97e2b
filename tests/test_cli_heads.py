"""``run --value-norms``, ``run --ablate`` and ``heads``: the flags and the JSON shape are contracts.
``heads`` runs once as a real process; the rest call the CLI's ``main`` here (test_cli.py runs ``run``
as a process)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from attention_viz.analysis.detector import SCORES
from attention_viz.cli import main
from attention_viz.core.names import CROSS, ENCODER_SELF, hook_name
from attention_viz.core.result import AttentionResult

ROOT = Path(__file__).resolve().parents[1]
SENTENCE = "The animal didn't cross the street because it was too tired."


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "attention_viz", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})


def test_value_norms_beside_every_pattern(tmp_path):
    out = tmp_path / "r.npz"
    assert main(["run", "--model", "minilm", "--text", SENTENCE, "--value-norms", "--out", str(out)]) == 0
    data = np.load(out, allow_pickle=False)
    for layer in range(6):
        pattern = data[hook_name(ENCODER_SELF, layer, "pattern")]
        norms = data[hook_name(ENCODER_SELF, layer, "value_norm")]
        assert norms.shape == pattern.shape and norms.dtype == np.float32 and (norms >= 0).all()
    assert not any(name.endswith(".v") for name in data.files)  # values were only a means
    assert AttentionResult.load_npz(out).attentions() == [ENCODER_SELF]


def test_ablate_saves_the_context_w_o_received_and_the_output(tmp_path):
    plain, ablated = tmp_path / "plain.npz", tmp_path / "ablated.npz"
    assert main(["run", "--model", "minilm", "--text", SENTENCE, "--kinds", "pattern,context", "--out", str(plain)]) == 0
    assert main(["run", "--model", "minilm", "--text", SENTENCE, "--kinds", "pattern,context", "--ablate", "2.5,3.1",
                 "--out", str(ablated)]) == 0
    a, b = AttentionResult.load_npz(plain), AttentionResult.load_npz(ablated)
    assert not b.array(ENCODER_SELF, 2, "context")[5].any() and not b.array(ENCODER_SELF, 3, "context")[1].any()
    np.testing.assert_array_equal(a.array(ENCODER_SELF, 2, "context")[4], b.array(ENCODER_SELF, 2, "context")[4])
    np.testing.assert_array_equal(a.pattern(ENCODER_SELF, 2), b.pattern(ENCODER_SELF, 2))  # same layer: same weights
    assert not np.array_equal(a.pattern(ENCODER_SELF, 4), b.pattern(ENCODER_SELF, 4))  # later layers see the change
    assert b.meta["ablation"] == {"mode": "zero", "heads": ["encoder 2.5", "encoder 3.1"]}
    assert len(b.meta["output"]["sentence_embedding"]) == 384


def test_mean_ablation_on_the_translation_model(tmp_path):
    out = tmp_path / "t.npz"
    assert main(["run", "--model", "toy-translate", "--text", "the global public principle will be reduced .",
                 "--kinds", "context", "--ablate", "cross:2.1", "--ablation", "mean", "--out", str(out)]) == 0
    result = AttentionResult.load_npz(out)
    context = result.array(CROSS, 2, "context")[1]
    assert np.allclose(context, context[0])  # one mean row at every position
    assert result.meta["output"]["loss"] > 0 and len(result.meta["output"]["log_probs"]) == len(result.meta["predicted"])


@pytest.mark.parametrize(
    "args, message",
    [
        (["--ablate", "9.0"], "no head encoder 9.0"),
        (["--ablate", "two.five"], "layer.head pairs"),
        (["--ablation", "mean"], "--ablation needs --ablate"),
    ],
)
def test_bad_ablations_are_one_line_errors(tmp_path, capsys, args, message):
    assert main(["run", "--model", "minilm", "--text", SENTENCE, *args, "--out", str(tmp_path / "x.npz")]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_rnn_cannot_ablate_or_give_value_norms(tmp_path, capsys):
    base = ["run", "--model", "toy-translate-rnn", "--text", "the global public principle will be reduced .",
            "--out", str(tmp_path / "x.npz")]
    assert main([*base, "--ablate", "cross:0.0"]) == 2
    assert "no heads to remove" in capsys.readouterr().err
    assert main([*base, "--value-norms"]) == 2
    assert "value-weighted norms" in capsys.readouterr().err


def test_heads_json_shape():
    done = cli("heads", "--model", "minilm", "--probes", "4", "--text", SENTENCE, "--json")
    assert done.returncode == 0, done.stderr
    scores = json.loads(done.stdout)
    assert set(SCORES) <= set(scores) and list(SCORES) == ["previous_token", "duplicate_token", "induction", "sink", "self"]
    for name in SCORES:
        assert len(scores[name]) == 6 and all(len(row) == 12 for row in scores[name])
        assert all(0.0 <= v <= 1.0 for row in scores[name] for v in row)
    assert scores["previous_token"][0][2] > 0.9  # MiniLM's layer-0 previous-token head


def test_heads_table_and_options(capsys):
    assert main(["heads", "--model", "minilm", "--probes", "0", "--text", SENTENCE, "--offset", "2"]) == 0
    out = capsys.readouterr().out
    assert "over 1 inputs" in out and "offset_2" in out and "top: 0.2" in out
    assert main(["heads", "--model", "minilm", "--probes", "0"]) == 2
    assert "nothing to score" in capsys.readouterr().err
    assert main(["heads", "--model", "minilm", "--attention", "decoder"]) == 2
    assert "no decoder self-attention" in capsys.readouterr().err
