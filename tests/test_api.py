"""The notebook API (``import attention_viz as av``): run, show every view, export; what each view
draws equals the captured attention; the output is one offline page; bad choices say what exists."""

import base64
import html
import re
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

import attention_viz as av
from attention_viz.analysis import attention_flow, focus_matrix, rollout
from attention_viz.api import VIEWS, Shown
from attention_viz.cli import main as cli_main
from attention_viz.errors import ModelError
from attention_viz.figures.offline import dequantize, heads_payload
from attention_viz.core.names import CROSS, DECODER_SELF, ENCODER_SELF
from attention_viz.core.result import AttentionResult

ROOT = Path(__file__).resolve().parents[1]
TIRED = "The animal didn't cross the street because it was too tired."
WIDE = "The animal didn't cross the street because it was too wide."
SOURCE = "The european economic area was signed in august 1992 ."  # toy-translate's vocabulary
TARGET = "la zone économique européenne a été signée en août 1992 ."
PLOTLY_BANNER = "* plotly.js v"  # the first line of the bundled plotly.min.js


@pytest.fixture(scope="module")
def tired() -> AttentionResult:
    return av.run("minilm", TIRED)


@pytest.fixture(scope="module")
def pair() -> AttentionResult:
    return av.run("toy-translate", SOURCE)


def z_of(shown: Shown, figure: int = 0) -> np.ndarray:
    return np.asarray(shown.figures[figure].data[0].z, dtype=np.float64)


def test_importing_the_package_loads_neither_torch_nor_the_api():
    code = ("import sys, attention_viz as av; assert 'torch' not in sys.modules; "
            "assert 'attention_viz.api' not in sys.modules; av.show; assert 'torch' not in sys.modules; print('ok')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_show_and_export_work_on_a_saved_result_without_torch(tired, tmp_path):
    tired.save_npz(tmp_path / "r.npz")
    code = ("import sys, attention_viz as av; from attention_viz.core.result import AttentionResult; "
            f"r = AttentionResult.load_npz({str(tmp_path / 'r.npz')!r}); "
            "[av.show(r, v) for v in ('head', 'grid', 'focus', 'layers', 'rollout', 'compare')]; "
            f"av.export(r, {str(tmp_path / 'h.html')!r}); assert 'torch' not in sys.modules; print('ok')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
    assert (tmp_path / "h.html").stat().st_size > 1_000_000


def test_run_takes_the_app_model_names_and_a_target(tired, pair):
    assert tired.model == "minilm" and tired.attentions() == [ENCODER_SELF]
    assert tired.stack().shape == (6, 12, len(tired.tokens), len(tired.tokens))
    assert pair.attentions() == [ENCODER_SELF, DECODER_SELF, CROSS]
    forced = av.run("toy-translate", SOURCE, target=TARGET)
    assert pair.meta["translation"] == TARGET and forced.target_tokens.labels[1:] == pair.target_tokens.labels[1:]
    with pytest.raises(ModelError, match="unknown model"):
        av.run("no-such-model", "text")


@pytest.mark.parametrize("view", VIEWS)
def test_every_view_is_one_offline_page_a_notebook_draws_inline(tired, view):
    shown = av.show(tired, view)
    assert shown.page.count(PLOTLY_BANNER) == 1  # plotly.js inlined, once
    assert not re.search(r"<script[^>]+src=", shown.page), "nothing is fetched"
    bundle = shown._repr_mimebundle_()  # a notebook output: no frame; plotly.js with the session's first only
    output = bundle["text/html"]
    assert "<iframe" not in output and output.count(PLOTLY_BANNER) <= 1 and 'class="attention-viz"' in output
    assert PLOTLY_BANNER not in shown._repr_html_() and view in bundle["text/plain"]


def test_head_view_draws_the_captured_head_and_the_reductions(tired):
    for layer, head in ((0, 0), (3, 1), (5, 11)):
        assert np.array_equal(z_of(av.show(tired, layer=layer, head=head)), tired.pattern(ENCODER_SELF, layer, head))
    patterns = tired.pattern(ENCODER_SELF, 2)
    assert np.allclose(z_of(av.show(tired, layer=2, head="mean")), patterns.mean(0), atol=1e-6)
    assert np.allclose(z_of(av.show(tired, layer=2, head="max")), patterns.max(0), atol=1e-6)
    hidden = z_of(av.show(tired, layer=2, head=4, hide_special=True))
    assert hidden.shape == (len(tired.tokens) - 2,) * 2 and np.allclose(hidden.sum(1), 1, atol=1e-5)
    words = av.show(tired, layer=2, head=4, words=True)
    assert "didn't" in list(words.figures[0].layout.xaxis.ticktext)
    assert np.allclose(z_of(words).sum(1), 1, atol=1e-5)


def test_compare_view_two_heads_and_two_sentences(tired):
    shown = av.show(tired, "compare", layer=1, head=2, other=(4, 7))
    assert np.array_equal(z_of(shown, 0), tired.pattern(ENCODER_SELF, 1, 2))
    assert np.array_equal(z_of(shown, 1), tired.pattern(ENCODER_SELF, 4, 7))
    default = av.show(tired, "compare", layer=1, head=2)  # B: the same head in the last layer
    assert np.array_equal(z_of(default, 1), tired.pattern(ENCODER_SELF, 5, 2))
    wide = av.run("minilm", WIDE)
    sentences = av.show(tired, "compare", layer=3, head=5, other=wide)
    a, b = tired.pattern(ENCODER_SELF, 3, 5), wide.pattern(ENCODER_SELF, 3, 5)
    assert len(sentences.figures) == 3
    assert np.allclose(z_of(sentences, 2), a - b, atol=1e-7)
    assert "tired/wide" in sentences.figures[2].layout.xaxis.ticktext
    longer = av.show(tired, "compare", other=av.run("minilm", "A much shorter one."))
    assert len(longer.figures) == 2 and "same number of tokens" in longer.page


def test_focus_view_finds_tokens_by_text_or_position(tired):
    labels = list(tired.tokens.labels)
    it, animal = labels.index("it"), labels.index("animal")
    shown = av.show(tired, "focus", layer=3, head=1)  # defaults: "it" → "animal"
    assert np.array_equal(z_of(shown), focus_matrix(tired.stack(), it, animal))
    by_position = av.show(tired, "focus", query=it, key="street", layer=3, head=1)
    assert np.array_equal(z_of(by_position), focus_matrix(tired.stack(), it, labels.index("street")))
    weights = tired.pattern(ENCODER_SELF, 3, 1)[it]
    strongest = labels[int(weights.argmax())]
    assert f'title="{html.escape(strongest)}: {weights.max():.3f}"' in shown.page  # the row over the sentence
    with pytest.raises(ValueError, match="'zebra' is not a token"):
        av.show(tired, "focus", query="zebra")


def test_layers_and_rollout_views_compose_the_layers(tired):
    stack = tired.stack()
    it = list(tired.tokens.labels).index("it")
    layers = av.show(tired, "layers")
    assert np.allclose(z_of(layers, 0), stack.mean(1)[:, it, :], atol=1e-6)
    assert np.allclose(z_of(layers, 1), rollout(stack)[-1], atol=1e-6)
    short = av.run("minilm", "The cat sat.")
    flowed = av.show(short, "layers", query=1)
    assert np.allclose(z_of(flowed, 2), attention_flow(short.stack()), atol=1e-6)
    assert np.allclose(z_of(av.show(tired, "rollout")), rollout(stack)[-1], atol=1e-6)
    assert np.allclose(z_of(av.show(tired, "rollout", layer=2)), rollout(stack)[2], atol=1e-6)


def test_grid_view_has_a_tile_per_head(tired):
    shown = av.show(tired, "grid")
    assert [t for t in shown.figures[0].layout.xaxis.ticktext] == [f"head {h}" for h in range(12)]
    assert [t for t in shown.figures[0].layout.yaxis.ticktext] == [f"layer {i}" for i in range(6)]


def test_encoder_decoder_views_read_the_chosen_attention(pair):
    cross = av.show(pair, layer=1, head=2, attention="cross")
    assert np.array_equal(z_of(cross), pair.pattern(CROSS, 1, 2))
    assert [html.unescape(t) for t in cross.figures[0].layout.xaxis.ticktext] == list(pair.tokens.labels)
    assert [html.unescape(t) for t in cross.figures[0].layout.yaxis.ticktext] == list(pair.target_tokens.labels)
    causal = z_of(av.show(pair, attention="decoder", layer=0, head=0))
    assert np.all(causal[np.triu_indices_from(causal, 1)] == 0)
    focus = av.show(pair, "focus", attention="cross", query=1, key=1)
    assert np.array_equal(z_of(focus), focus_matrix(pair.stack("pattern", *CROSS), 1, 1))
    assert np.allclose(z_of(av.show(pair, "rollout", attention="decoder")),
                       rollout(pair.stack("pattern", *DECODER_SELF))[-1], atol=1e-6)


def test_heads_view_opens_on_the_chosen_head_and_holds_every_attention(pair):
    shown = av.show(pair, "heads", attention="cross", layer=1, head="max")
    payload = heads_payload(pair, (CROSS, 1, "max"))
    assert payload["start"] == {"attention": 2, "layer": 1, "head": "max"}
    assert [a["key"] for a in payload["attentions"]] == ["encoder", "decoder", "cross"]
    assert '"start":{"attention":2,"layer":1,"head":"max"}' in shown.page
    assert shown.figures == [] and shown.page.count(PLOTLY_BANNER) == 1


def test_choices_the_result_cannot_serve_say_what_it_has(tired, pair):
    with pytest.raises(ValueError, match="unknown view 'attention'; choose from head, heads, grid"):
        av.show(tired, "attention")
    with pytest.raises(ValueError, match=r"layer must be in 0\.\.5; got 6"):
        av.show(tired, layer=6)
    with pytest.raises(ValueError, match=r"head must be in 0\.\.11, 'mean' or 'max'; got 'median'"):
        av.show(tired, head="median")
    with pytest.raises(ValueError, match=r"has no cross attention \(it has: encoder\)"):
        av.show(tired, attention="cross")
    for view in ("rollout", "layers"):
        with pytest.raises(ValueError, match="choose attention='encoder' or 'decoder'"):
            av.show(pair, view, attention="cross")
    rnn = av.run("toy-translate-rnn", SOURCE)  # its one attention is cross-attention
    assert np.array_equal(z_of(av.show(rnn)), rnn.pattern(CROSS, 0, 0))
    with pytest.raises(ValueError, match="this result has only cross-attention"):
        av.show(rnn, "rollout")


def test_user_text_reaches_the_page_as_text(tmp_path):
    hostile = "<script>alert(1)</script> it"
    result = av.run("minilm", hostile)
    result.model = "<img src=x onerror=alert(2)>"
    for view in ("head", "focus", "layers", "heads"):
        page = av.show(result, view).page
        assert "<script>alert(1)" not in page and "<img src=x" not in page


def test_export_writes_the_page_and_the_cli_exports_heads(tired, tmp_path):
    written = av.export(tired, tmp_path / "heads.html")
    assert written == tmp_path / "heads.html"
    assert written.read_text(encoding="utf-8") == av.show(tired, "heads").page
    assert av.export(tired, tmp_path / "head.html", view="head", layer=2, head=3).stat().st_size > 1_000_000
    out = tmp_path / "cli.html"
    assert cli_main(["export", "--model", "toy-translate", "--text", SOURCE, "--view", "heads",
                     "--attention", "cross", "--layer", "2", "--head", "mean", "--out", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    assert '"start":{"attention":2,"layer":2,"head":"mean"}' in page and page.count(PLOTLY_BANNER) == 1


def test_stored_weights_in_the_page_are_the_captured_ones_to_8_bits(tired):
    attention = heads_payload(tired)["attentions"][0]
    n = len(tired.tokens)
    for layer, blob in enumerate(attention["data"]):
        codes = np.frombuffer(zlib.decompress(base64.b64decode(blob["codes"])), dtype=np.uint8).reshape(12, n, n)
        scales = np.frombuffer(base64.b64decode(blob["scales"]), dtype="<f4").reshape(12, n)
        stored = dequantize(codes, scales)
        captured = tired.pattern(ENCODER_SELF, layer)
        assert np.all(np.abs(stored - captured) <= scales[..., None] / 510 + 1e-7)
        assert np.array_equal(stored.max(-1), captured.max(-1).astype(np.float64))


def test_help_is_enough_to_use_it():
    for name in ("run", "show", "export"):
        assert getattr(av, name).__doc__
    for view in VIEWS:
        assert f'``"{view}"``' in av.show.__doc__
    with pytest.raises(AttributeError):
        av.no_such_function
