"""The every-head offline page (``av.export(result, path, view="heads")``): what it stores, and the
page itself opened from disk in Debian's Chromium with every non-file request aborted — for an
encoder (minilm), a decoder (a tiny GPT-2 built offline) and an encoder–decoder (toy-translate, cross
attention included): it draws, switching head/layer/attention redraws with the stored values, hover
shows the stored value with both tokens, and hostile text stays text. The first paint is a canvas
preview of the opening head, painted before plotly.js runs, in the colours and plot area of the
Plotly heatmap that then replaces it."""

import dataclasses
import json
import re

import numpy as np
import pytest
import torch

import attention_viz as av
from attention_viz.figures.offline import dequantize, heads_payload, quantize, script_json
from attention_viz.core.names import CROSS, DECODER_SELF, ENCODER_SELF
from attention_viz.core.result import AttentionResult

HOSTILE = "<script>alert(1)</script> <img src=x onerror=alert(2)> The animal was tired because it slept."
HOSTILE_LABEL = "</script><img src=x onerror=alert(3)>"
HOSTILE_MODEL = "</script><script>alert(4)</script>"
SOURCE = "The european economic area was signed in august 1992 ."  # in toy-translate's vocabulary


def stored(result: AttentionResult, group, layer: int, head: int | str) -> np.ndarray:
    """What the page shows for one head (or the mean / max), computed as the page computes it."""
    weights = dequantize(*quantize(result.pattern(group, layer)))
    if head == "mean":
        return weights.mean(0)
    return weights.max(0) if head == "max" else weights[int(head)]


def colours(z: np.ndarray, colorscale: list, zmin: float = 0.0) -> np.ndarray:
    """[..., 3] RGB of ``z`` as plotly.js's heatmap colours it (linear per channel between the scale's
    stops over zmin … max(z), clamped; stored in a Uint8ClampedArray, which rounds half to even)."""
    stops = zmin + np.array([at for at, _ in colorscale]) * (z.max() - zmin)
    rgb = np.array([[float(v) for v in re.findall(r"[\d.]+", c)[:3]] for _, c in colorscale])
    return np.rint(np.stack([np.interp(z, stops, rgb[:, channel]) for channel in range(3)], axis=-1))


# --- what the file stores --------------------------------------------------------------------------


def test_quantization_keeps_row_maxima_and_zeros_exact_and_the_rest_within_half_a_step():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(4, 50, 50)) * 3
    logits[:, np.triu_indices(50, 1)[0], np.triu_indices(50, 1)[1]] = -np.inf  # causal
    weights = np.exp(logits - logits.max(-1, keepdims=True))
    weights = (weights / weights.sum(-1, keepdims=True)).astype(np.float32)
    weights[1, 7] = 0.0  # a fully masked row
    codes, scales = quantize(weights)
    assert codes.dtype == np.uint8 and scales.dtype == np.float32 and scales.shape == (4, 50)
    back = dequantize(codes, scales)
    assert np.all(np.abs(back - weights) <= scales[..., None].astype(np.float64) / 510 * (1 + 1e-6))
    assert np.array_equal(back.max(-1), weights.max(-1).astype(np.float64))
    assert np.all(back[weights == 0] == 0) and np.all(back[1, 7] == 0)
    with pytest.raises(ValueError, match="finite"):
        quantize(np.array([[np.nan, 1.0]]))


def test_json_in_the_page_cannot_close_its_script():
    data = {"labels": [HOSTILE_LABEL, "<!--", "]]>", "a&b", "\u2028"]}
    text = script_json(data)
    assert "<" not in text and ">" not in text and "&" not in text and json.loads(text) == data


@pytest.fixture(scope="module")
def minilm() -> AttentionResult:
    result = av.run("minilm", HOSTILE)
    labels = list(result.tokens.labels)
    labels[labels.index("it")] = HOSTILE_LABEL  # a token whose label is markup, as another tokenizer could make
    result.tokens = dataclasses.replace(result.tokens, labels=tuple(labels))
    result.model = HOSTILE_MODEL
    return result


def test_plotly_js_is_inert_text_after_the_page_script(minilm):
    page = av.show(minilm, "heads").page
    assert page.count("* plotly.js v") == 1
    inert = page.index('<script type="text/plain" id="plotly-js">')
    assert page.index("* plotly.js v") > inert > page.index("const AttentionPreview"), "the preview's script runs first"
    assert "interactive view loading…" in page


def test_512_tokens_of_minilm_fit_in_30_mb(tmp_path):
    from benchmarks.texts import text_of_tokens
    from attention_viz.backends.registry import load_backend

    result = av.run("minilm", text_of_tokens(load_backend("minilm"), 512))
    assert len(result.tokens) == 512
    size = av.export(result, tmp_path / "512.html").stat().st_size
    assert size <= 30e6, f"{size / 1e6:.1f} MB"


# --- the page in a browser -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def gpt2_folder(tmp_path_factory):
    from test_hf_backend import save_gpt2

    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("gpt2")
    save_gpt2(folder)
    return folder


class Opened:
    """One exported page opened from disk (in the test's tab), network blocked; what it asked for and
    what went wrong."""

    def __init__(self, page, listen, path):
        self.blocked, self.errors, self.dialogs = [], [], []
        self.page = page
        page.set_viewport_size({"width": 1200, "height": 1000})
        listen(page, "pageerror", lambda error: self.errors.append(str(error)))
        listen(page, "dialog", lambda dialog: (self.dialogs.append(dialog.message), dialog.dismiss()))
        self.page.route("**/*", self._only_files)
        self.page.goto(path.as_uri())
        self.page.wait_for_selector("body[data-drawn]", timeout=60_000)
        self.page.wait_for_selector("#chart .heatmaplayer image", timeout=60_000)
        self.previewed = self.page.get_attribute("#preview", "data-drawn")  # the head the canvas showed
        self.page.wait_for_function("performance.getEntriesByName('attention-viz:interactive').length", timeout=10_000)

    def _only_files(self, route):
        if route.request.url.startswith("file:"):
            route.continue_()
        else:
            self.blocked.append(route.request.url)
            route.abort()

    def choose(self, select: str, value: str, drawn: str) -> None:
        self.page.select_option(f"#{select}", value)
        self.wait_drawn(drawn)

    def wait_drawn(self, drawn: str) -> None:
        self.page.wait_for_function("d => document.body.dataset.drawn === d", arg=drawn, timeout=30_000)

    def z(self) -> np.ndarray:
        return np.array(self.page.evaluate("document.getElementById('chart').data[0].z.map(r => Array.from(r))"))

    def image(self) -> str:
        return self.page.get_attribute("#chart .heatmaplayer image", "href")

    def ticks(self, axis: str) -> list[str]:
        return self.page.locator(f"#chart .{axis}tick text").all_text_contents()

    def hover(self, q: int, k: int) -> tuple[str, str]:
        """Move the mouse over cell (query q, key k): (Plotly's hover label, the readout line)."""
        x, y = self.page.evaluate(
            """([q, k]) => { const gd = document.getElementById('chart'), box = gd.getBoundingClientRect();
                const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
                return [box.left + xa._offset + xa.l2p(k), box.top + ya._offset + ya.l2p(q)]; }""",
            [q, k],
        )
        self.page.mouse.move(1, 1)
        self.page.mouse.move(x, y)
        self.page.wait_for_function(
            "q => document.getElementById('readout').textContent.startsWith('query ' + q + ' ')", arg=q, timeout=10_000
        )
        label = self.page.locator(".hoverlayer .hovertext").first.text_content(timeout=10_000)
        return label, self.page.text_content("#readout")

    def marks(self) -> dict[str, float]:
        return dict(self.page.evaluate("performance.getEntriesByType('mark').map(m => [m.name, m.startTime])"))

    def preview_cells(self) -> np.ndarray:
        """[query, key, RGB] the canvas preview drew, one pixel per cell."""
        height, width, data = self.page.evaluate(
            "(() => { const c = document.getElementById('preview').cells; return [c.height, c.width, Array.from(c.data)]; })()")
        return np.array(data, dtype=np.float64).reshape(height, width, 4)[..., :3]

    def plotly_cells(self, nq: int, nk: int) -> np.ndarray:
        """[query, key, RGB] sampled at each cell's centre of the image Plotly drew."""
        data = self.page.evaluate(
            """async ([nq, nk]) => { const image = new Image();
                image.src = document.querySelector('#chart .heatmaplayer image').getAttribute('href');
                await image.decode();
                const canvas = document.createElement('canvas');
                canvas.width = image.naturalWidth; canvas.height = image.naturalHeight;
                const ctx = canvas.getContext('2d'); ctx.drawImage(image, 0, 0);
                const out = [];
                for (let q = 0; q < nq; q++) for (let k = 0; k < nk; k++) {
                  const p = ctx.getImageData(Math.floor((k + 0.5) * canvas.width / nk),
                                             Math.floor((q + 0.5) * canvas.height / nq), 1, 1).data;
                  out.push(p[0], p[1], p[2]); }
                return out; }""",
            [nq, nk],
        )
        return np.array(data, dtype=np.float64).reshape(nq, nk, 3)

    def clean(self) -> bool:
        return not (self.blocked or self.errors or self.dialogs)


def weight_in(label: str) -> str:
    return re.search(r"weight\s*([0-9.]+)", label).group(1)


def test_encoder_page_draws_switches_and_hovers_the_stored_values(disk_page, listen, minilm, tmp_path):
    path = av.export(minilm, tmp_path / "minilm.html")
    opened = Opened(disk_page, listen, path)
    labels = list(minilm.tokens.labels)
    assert opened.page.text_content("#heading") == HOSTILE_MODEL  # the model name, as text
    assert opened.page.title() == f"attention-viz: {HOSTILE_MODEL}, every head"
    assert np.allclose(opened.z(), stored(minilm, ENCODER_SELF, 0, 0), rtol=0, atol=1e-12)
    first = opened.image()

    # the canvas preview: painted before plotly.js ran, the opening head in Plotly's colours, replaced
    marks = opened.marks()
    assert marks["attention-viz:preview"] < marks["attention-viz:plotly"] < marks["attention-viz:interactive"]
    assert opened.previewed == "encoder:0:0"
    assert opened.page.is_hidden("#preview") and opened.page.is_hidden("#status")
    z = stored(minilm, ENCODER_SELF, 0, 0)
    scale = heads_payload(minilm)["attentions"][0]["figure"]["trace"]["colorscale"]
    drawn = opened.preview_cells()
    assert np.abs(drawn - colours(z, scale)).max() <= 1, "the canvas colours the stored weights as Plotly does"
    q, k = np.unravel_index(z.argmax(), z.shape)
    assert drawn[q, k].tolist() == colours(np.array([1.0]), scale)[0].tolist(), "the brightest cell has the top colour"
    assert np.abs(opened.plotly_cells(*z.shape) - drawn).max() <= 1, "Plotly's heatmap shows the same colours"
    plot = opened.page.evaluate("document.getElementById('preview').dataset.plot")
    size = opened.page.evaluate("(() => { const s = document.getElementById('chart')._fullLayout._size; "
                                "return [s.l, s.t, s.w, s.h]; })()")
    assert np.allclose([float(v) for v in plot.split(",")], size, atol=1), "the same plot area: no jump"
    assert opened.page.evaluate("document.getElementById('stage').getBoundingClientRect().top === "
                                "document.getElementById('chart').getBoundingClientRect().top")

    opened.choose("head", "5", "encoder:0:5")
    assert opened.image() != first, "switching head redraws the heatmap"
    assert np.array_equal(opened.z(), stored(minilm, ENCODER_SELF, 0, 5)), "bit for bit what the file stores"
    opened.choose("layer", "3", "encoder:3:5")
    expected = stored(minilm, ENCODER_SELF, 3, 5)
    assert np.allclose(opened.z(), expected, rtol=0, atol=1e-12)
    assert np.allclose(expected, minilm.pattern(ENCODER_SELF, 3, 5), atol=float(expected.max()) / 510 + 1e-7)
    opened.choose("head", "mean", "encoder:3:mean")
    assert np.allclose(opened.z(), stored(minilm, ENCODER_SELF, 3, "mean"), rtol=0, atol=1e-12)
    opened.choose("head", "max", "encoder:3:max")
    assert np.allclose(opened.z(), stored(minilm, ENCODER_SELF, 3, "max"), rtol=0, atol=1e-12)
    assert "no longer sum to 1" in opened.page.text_content("#reduction-note")
    opened.choose("head", "1", "encoder:3:1")

    q = labels.index(HOSTILE_LABEL)
    z = stored(minilm, ENCODER_SELF, 3, 1)
    k = int(z[q].argmax())
    label, readout = opened.hover(q, k)
    assert weight_in(label) == f"{z[q, k]:.6f}"
    assert readout == f"query {q} “{HOSTILE_LABEL}” → key {k} “{labels[k]}”: {z[q, k]:.6f}"
    opened.choose("head", "2", "encoder:3:2")  # the cursor stays: the readout follows the new head
    assert opened.page.text_content("#readout").endswith(f": {stored(minilm, ENCODER_SELF, 3, 2)[q, k]:.6f}")

    # user text stayed text: no dialog, nothing injected, the markup visible as characters; the scripts:
    # the data, the page's own, and plotly.js (its inert text executed as a new script, the text removed)
    assert opened.page.evaluate("[...document.querySelectorAll('script')].map(s => s.parentNode.tagName + ' ' + "
                                "(s.type || 'classic'))") == ["HEAD classic", "BODY application/json", "BODY classic"]
    assert opened.page.evaluate("document.querySelectorAll('img').length") == 0
    assert opened.page.evaluate("[...document.querySelectorAll('image')].every(i => "
                                "i.getAttribute('href').startsWith('data:image/png'))")
    assert "script" in opened.ticks("x") and "<" in opened.ticks("x")
    assert opened.clean(), (opened.blocked, opened.errors, opened.dialogs)


def test_decoder_page_is_causal_and_follows_the_keyboard(disk_page, listen, gpt2_folder, tmp_path):
    result = av.run(f"hf:{gpt2_folder}", "hello world, the lazy cat sat on the mat")
    assert result.attentions() == [DECODER_SELF]
    opened = Opened(disk_page, listen, av.export(result, tmp_path / "gpt2.html"))
    assert not opened.page.is_visible("#attention-label"), "one attention: no attention choice"
    assert opened.previewed == "decoder:0:0"
    opened.page.click("#readout")  # focus the page, not a select
    opened.page.keyboard.press("ArrowRight")
    opened.wait_drawn("decoder:0:1")
    opened.page.keyboard.press("ArrowDown")
    opened.wait_drawn("decoder:1:1")
    z = opened.z()
    assert np.allclose(z, stored(result, DECODER_SELF, 1, 1), rtol=0, atol=1e-12)
    assert np.all(z[np.triu_indices_from(z, 1)] == 0), "the causal mask's zeros stay exact"
    n = len(result.tokens)
    label, readout = opened.hover(2, n - 1)  # a masked cell
    assert weight_in(label) == "0.000000" and readout.endswith(": 0.000000")
    assert opened.clean(), (opened.blocked, opened.errors, opened.dialogs)


def test_encoder_decoder_page_switches_to_cross_attention(disk_page, listen, tmp_path):
    result = av.run("toy-translate", SOURCE)
    path = av.export(result, tmp_path / "translate.html", attention="decoder", layer=1, head=2)
    opened = Opened(disk_page, listen, path)
    assert opened.page.input_value("#attention") == "1" and opened.page.is_visible("#attention-label")
    assert opened.previewed == "decoder:1:2"
    assert np.allclose(opened.z(), stored(result, DECODER_SELF, 1, 2), rtol=0, atol=1e-12)
    opened.choose("attention", "2", "cross:1:2")
    source, target = list(result.tokens.labels), list(result.target_tokens.labels)
    z = opened.z()
    assert z.shape == (len(target), len(source))
    assert np.allclose(z, stored(result, CROSS, 1, 2), rtol=0, atol=1e-12)
    assert opened.ticks("x") == source and opened.ticks("y") == target
    q = target.index("économique")
    k = int(z[q].argmax())
    label, readout = opened.hover(q, k)
    assert readout == f"query {q} “économique” → key {k} “{source[k]}”: {z[q, k]:.6f}"
    assert weight_in(label) == f"{z[q, k]:.6f}"
    opened.choose("attention", "0", "encoder:1:2")
    assert opened.ticks("y") == source
    assert opened.clean(), (opened.blocked, opened.errors, opened.dialogs)


def test_without_plotly_the_preview_stays_with_the_right_head_and_says_so(disk_page, allowed_page_errors, tmp_path):
    """plotly.js failing (here: replaced by a throw) leaves the canvas showing the opening head, the
    controls disabled and a line saying the view is a still picture."""
    result = av.run("minilm", "The cat sat on the mat.")
    text = av.export(result, tmp_path / "cat.html", layer=2, head=7).read_text(encoding="utf-8")
    broken = re.sub(r'(<script type="text/plain" id="plotly-js">).*?(</script>)', r"\1throw 0\2", text, flags=re.S)
    (tmp_path / "broken.html").write_text(broken, encoding="utf-8")
    allowed_page_errors.append("0")  # the throw standing in for plotly.js; no other error
    page = disk_page
    page.set_viewport_size({"width": 1000, "height": 900})
    page.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file:") else route.abort())
    page.goto((tmp_path / "broken.html").as_uri())
    page.wait_for_selector("body[data-preview='encoder:2:7']", timeout=60_000)
    page.wait_for_function("document.getElementById('status').textContent.includes('still picture')", timeout=30_000)
    assert page.is_visible("#preview") and page.is_disabled("#head") and page.is_disabled("#layer")
    z = stored(result, ENCODER_SELF, 2, 7)
    scale = heads_payload(result)["attentions"][0]["figure"]["trace"]["colorscale"]
    ratio, plot = page.evaluate("[window.devicePixelRatio, document.getElementById('preview').dataset.plot]")
    left, top, width, height = (float(v) for v in plot.split(","))
    q, k = np.unravel_index(z.argmax(), z.shape)
    q0, k0 = np.unravel_index(z.argmin(), z.shape)
    for row, column in ((q, k), (q0, k0)):  # what is on screen at the cell's centre
        x, y = left + (column + 0.5) * width / z.shape[1], top + (row + 0.5) * height / z.shape[0]
        pixel = page.evaluate("([x, y]) => Array.from(document.getElementById('preview').getContext('2d')"
                              ".getImageData(x, y, 1, 1).data.slice(0, 3))", [int(x * ratio), int(y * ratio)])
        assert pixel == colours(z, scale)[row, column].tolist()
    assert page.evaluate("typeof Plotly") == "undefined" and not page.locator("#chart *").count()
