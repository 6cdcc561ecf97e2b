"""Performance invariants (no timings: those are measured side by side by `python -m benchmarks.run`).

* What the browser receives at the model's full length stays small: every chart ≤ 3 MB, values as
  binary typed arrays, at most 64 tick labels.
* Moving any control or switching views never runs the model again.
* The cheaper attention path (the pattern written over the scores when nobody captures them) gives
  the same numbers as the plain one, keeps ``scores`` capturable, and still trains.
"""

import sys
import threading
from pathlib import Path

import pytest
import torch
from streamlit.testing.v1 import AppTest

from attention_viz.core.attention import scaled_dot_product_attention
from attention_viz.backends.registry import load_backend
from attention_viz.backends.scratch import ScratchEncoderBackend
from attention_viz.figures.axes import MAX_TICKS
from attention_viz.core.hooks import capture
from attention_viz.core.model import Transformer, TransformerConfig

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the benchmark's texts of an exact token count, from any working directory
from benchmarks.texts import text_of_tokens  # noqa: E402
from apphelpers import level_maps, switch_view  # noqa: E402

APP = str(ROOT / "app.py")
MB = 1_000_000
FULL_LENGTH = 512  # all-MiniLM-L6-v2's maximum, special tokens included


def app(**params: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=180)
    for key, value in params.items():
        at.query_params[key] = value
    return at.run()


def specs(at: AppTest) -> dict[str, str]:
    """Every chart on the page: its key → the JSON Streamlit sends to the browser."""
    return {chart.proto.id: chart.proto.spec for chart in at.get("plotly_chart")}


@pytest.fixture
def forwards(monkeypatch):
    """Every model forward during a test: backend runs and any direct call of our Transformer."""
    calls = []
    run, forward = ScratchEncoderBackend.run, Transformer.forward

    def counting_run(self, *args, **kwargs):
        calls.append("run")
        return run(self, *args, **kwargs)

    def counting_forward(self, *args, **kwargs):
        calls.append("forward")
        return forward(self, *args, **kwargs)

    monkeypatch.setattr(ScratchEncoderBackend, "run", counting_run)
    monkeypatch.setattr(Transformer, "forward", counting_forward)
    return calls


@pytest.fixture(scope="module")
def long_text() -> str:
    return text_of_tokens(load_backend("minilm"), FULL_LENGTH)


def elements(at: AppTest) -> list[int]:
    """Bytes of each of our own elements' messages on the page: its data, script and style."""
    return [len(e.proto.bytes) + len(e.proto.js_content) + len(e.proto.css_content) for e in at.get("bidi_component")]


def test_what_the_browser_receives_at_512_tokens_stays_under_3_mb(long_text):
    at = app(text=long_text, view="head")
    assert not at.exception and not at.warning  # exactly 512 tokens: nothing dropped
    assert specs(at) == {}  # the head view sends every position as levels on our element (test_head_levels.py)
    [head] = elements(at)
    assert head <= 0.5 * MB
    [(header, _, _)] = level_maps(at)
    assert len(header["query_names"]) == len(header["key_names"]) == FULL_LENGTH  # hover names every position
    assert len(header["x_ticks"]) <= MAX_TICKS and len(header["y_ticks"]) <= MAX_TICKS
    switch_view(at, "grid")
    [grid] = specs(at).values()
    [enlarged] = elements(at)
    assert not at.exception and len(grid.encode()) + enlarged <= 3 * MB
    assert '"bdata"' in grid  # values as a binary typed array, not a JSON list of numbers
    [(header, _, codes)] = level_maps(at)
    assert codes.shape == (FULL_LENGTH, FULL_LENGTH) and len(header["key_names"]) == FULL_LENGTH
    assert len(header["x_ticks"]) <= MAX_TICKS and len(header["y_ticks"]) <= MAX_TICKS


def test_moving_every_control_and_switching_every_view_runs_no_forward(forwards):
    at = app(text="Another sentence of its own, so that the first run is a real one.")
    assert forwards.count("run") == 1
    before = len(forwards)
    at.slider(key="head_layer").set_value(5).run()
    for head in (11, "mean", "max", 3):
        at.select_slider(key="head_head").set_value(head).run()
    at.checkbox(key="head_hide_special").check().run()
    at.checkbox(key="head_words").check().run()
    at.slider(key="head_threshold").set_value(0.2).run()
    for weighting in ("norms", "weights", "norms"):  # norms from the captured values and W_O; views below show them
        at.radio(key="weighting").set_value(weighting).run()
        assert not at.exception and not [c for c in at.caption if "showing attention weights" in c.value]
    for view in ("grid", "compare", "focus", "layers", "head"):
        switch_view(at, view)
        assert not at.exception, view
        if view == "grid":
            at.slider(key="grid_layer").set_value(2).run()
            at.select_slider(key="grid_head").set_value(7).run()
        if view == "compare":
            at.slider(key="compare_a_layer").set_value(1).run()
            at.select_slider(key="compare_b_head").set_value(4).run()
    assert not at.exception
    assert forwards[before:] == []


# --- the attention path that lets the pattern overwrite the scores ----------------------------

def qkv(batch=2, heads=3, tq=6, tk=6, d=8, grad=False):
    torch.manual_seed(0)
    return [torch.randn(batch, heads, n, d, requires_grad=grad) for n in (tq, tk, tk)]


@pytest.mark.parametrize("mask", [None, "causal", "padding with an empty row"])
def test_overwriting_the_scores_changes_no_number(mask):
    q, k, v = qkv()
    if mask == "causal":
        mask = torch.ones(6, 6, dtype=torch.bool).tril()
    elif mask is not None:
        mask = torch.ones(2, 1, 6, 6, dtype=torch.bool)
        mask[1, :, :, 3:] = False
        mask[1, :, 2, :] = False  # one query may see nothing: a zero row, not NaN
    kept = scaled_dot_product_attention(q, k, v, mask)
    overwritten = scaled_dot_product_attention(q, k, v, mask, keep_scores=False)
    assert overwritten.scores is None and kept.scores is not None
    assert torch.equal(overwritten.pattern, kept.pattern)
    assert torch.equal(overwritten.context, kept.context)
    assert not torch.isnan(overwritten.pattern).any()


def test_scores_are_the_scaled_logits_whether_or_not_the_pattern_is_captured_too():
    config = TransformerConfig(shape="encoder-decoder", vocab_size=30, d_model=16, h=2, d_ff=32, N=2, dropout=0.0)
    torch.manual_seed(0)
    model = Transformer(config).eval()
    src, tgt = torch.randint(0, 30, (1, 7)), torch.randint(0, 30, (1, 5))
    with torch.inference_mode(), capture(kinds=None) as everything:
        model(src, tgt)
    with torch.inference_mode(), capture(kinds=("pattern",)) as patterns:
        model(src, tgt)
    with torch.inference_mode(), capture(kinds=("scores",)) as scores:
        model(src, tgt)
    for name in patterns.names_recorded():
        assert torch.equal(patterns[name], everything[name])
        logits = scores[name.replace(".pattern", ".scores")]
        torch.testing.assert_close(torch.softmax(logits, -1).nan_to_num(0.0), patterns[name])
        q, k = everything[name.replace(".pattern", ".q")], everything[name.replace(".pattern", ".k")]
        expected = q @ k.transpose(-2, -1) / config.d_k**0.5
        finite = torch.isfinite(logits)  # the decoder's causal mask puts -inf above the diagonal
        torch.testing.assert_close(logits[finite], expected[finite])


def test_training_still_gets_gradients_through_the_pattern():
    q, k, v = qkv(grad=True)
    out = scaled_dot_product_attention(q, k, v, torch.ones(6, 6, dtype=torch.bool).tril(), keep_scores=False)
    (out.context.sum() + out.pattern.pow(2).sum()).backward()
    assert all(t.grad is not None and torch.isfinite(t.grad).all() for t in (q, k, v))


def test_concurrent_captures_of_different_kinds_each_get_their_own():
    """One thread keeps the scores, the other lets the pattern overwrite them: neither disturbs the other."""
    backend = load_backend("minilm")
    ids = torch.tensor([backend.tokenize("The animal didn't cross the street because it was too tired.")[0].ids])
    expected = {}
    for kinds in (("pattern",), ("scores", "pattern")):
        with torch.inference_mode(), capture(kinds=kinds) as recorded:
            backend.model(ids)
        expected[kinds] = {n: recorded[n].clone() for n in recorded.names_recorded()}
    failures = []

    def worker(kinds):
        for _ in range(5):
            with torch.inference_mode(), capture(kinds=kinds) as recorded:
                backend.model(ids)
            if set(recorded.names_recorded()) != set(expected[kinds]) or not all(
                torch.equal(recorded[n], t) for n, t in expected[kinds].items()
            ):
                failures.append(kinds)

    threads = [threading.Thread(target=worker, args=(kinds,)) for kinds in expected for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
