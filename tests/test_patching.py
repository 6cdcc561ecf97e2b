"""Activation patching (attention_viz/backends/patching.py): every site of our runner against an
independent patching written with transformers' own modules and torch forward hooks, on a tiny
GPT-2 and a tiny grouped-query Llama; every site patched at once gives the clean run; the CLI's
JSON; bad inputs in one line."""

from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM
from transformers.models.gpt2 import modeling_gpt2
from transformers.models.llama import modeling_llama

from attention_viz import cli
from attention_viz.analysis.patching import PRESETS, Patching, gap_warning, restored_fraction
from attention_viz.backends.patching import Experiment, patch, run_from
from attention_viz.backends.registry import load_backend
from attention_viz.errors import ModelError
from test_hf_backend import save_gpt2
from attention_viz.core.hooks import capture
from test_ours_decoder import save, save_tokenizer

# (clean, corrupt, answer, wrong) each tokenizer reads as single tokens of its vocabulary
PAIRS = {
    "gpt2": ("the cat sat on the mat and the dog", "the dog sat on the mat and the cat", "cat", "dog"),
    "llama": ("the cat sat on the mat because it was", "the dog sat on the mat because it was", "tired", "park"),
}
SITES = ("heads", "resid", "head_positions", "patterns")


def save_llama(folder) -> None:
    torch.manual_seed(0)
    n = save_tokenizer(folder)
    config = LlamaConfig(vocab_size=n, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                         initializer_range=0.3)  # peaked patterns, a logit difference of order 1
    LlamaForCausalLM(config).save_pretrained(folder)


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, str]:
    out = {}
    for name, save in (("gpt2", save_gpt2), ("llama", save_llama)):
        folder = tmp_path_factory.mktemp(name)
        torch.manual_seed(0)
        save(folder)
        out[name] = str(folder)
    return out


# -- the independent patching: transformers' modules, torch forward hooks ---------------------------


class Theirs:
    """A transformers model patched with plain torch hooks: the input of the output projection
    (heads' outputs side by side), a decoder layer's input (the residual stream), and the eager
    attention function (the pattern, mixed again with the layer's own values)."""

    def __init__(self, folder: str, architecture: str) -> None:
        self.model = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()
        self.tokenizer = AutoTokenizer.from_pretrained(folder)
        config = self.model.config
        self.h, self.d_k = config.num_attention_heads, config.hidden_size // config.num_attention_heads
        if architecture == "gpt2":
            self.layers, self.module = list(self.model.transformer.h), modeling_gpt2
            self.projections = [layer.attn.c_proj for layer in self.layers]
        else:
            self.layers, self.module = list(self.model.model.layers), modeling_llama
            self.projections = [layer.self_attn.o_proj for layer in self.layers]

    def ids(self, text: str) -> torch.Tensor:
        return torch.tensor([self.tokenizer(text)["input_ids"]])

    def token(self, word: str, text: str) -> int:
        after, before = self.tokenizer(f"{text} {word}")["input_ids"], self.tokenizer(text)["input_ids"]
        assert after[: len(before)] == before and len(after) == len(before) + 1
        return after[-1]

    def cache(self, ids: torch.Tensor) -> dict:
        """The clean run's heads' outputs, layer inputs and patterns."""
        saved: dict = {"heads": {}, "resid": {}}
        handles = [p.register_forward_pre_hook(lambda m, args, i=i: saved["heads"].__setitem__(i, args[0].clone()))
                   for i, p in enumerate(self.projections)]
        handles += [layer.register_forward_pre_hook(
            lambda m, args, kwargs, i=i: saved["resid"].__setitem__(i, _hidden(args, kwargs).clone()), with_kwargs=True)
            for i, layer in enumerate(self.layers)]
        try:
            with torch.no_grad():
                saved["patterns"] = self.model(ids, output_attentions=True).attentions
        finally:
            for handle in handles:
                handle.remove()
        return saved

    def metric(self, ids: torch.Tensor, answer: int, wrong: int) -> float:
        with torch.no_grad():
            logits = self.model(ids).logits[0, -1]
        return float(logits[answer] - logits[wrong])

    @contextlib.contextmanager
    def patched(self, saved: dict, site: str, layer: int, head: int | None, position: int | None, monkeypatch):
        if site == "patterns":
            original = self.module.eager_attention_forward

            def eager(module, query, key, value, attention_mask, **kwargs):
                output, weights = original(module, query, key, value, attention_mask, **kwargs)
                if module.layer_idx != layer:
                    return output, weights
                weights = weights.clone()
                weights[:, head] = saved["patterns"][layer][:, head]
                values = modeling_llama.repeat_kv(value, self.h // value.size(1))
                return (weights @ values).transpose(1, 2), weights

            monkeypatch.setattr(self.module, "eager_attention_forward", eager)
            try:
                yield
            finally:
                monkeypatch.undo()
            return
        if site == "resid":
            def replace_input(module, args, kwargs):
                hidden = _hidden(args, kwargs).clone()
                hidden[:, position] = saved["resid"][layer][:, position]
                if args:
                    return (hidden, *args[1:]), kwargs
                return args, {**kwargs, "hidden_states": hidden}

            handle = self.layers[layer].register_forward_pre_hook(replace_input, with_kwargs=True)
        else:
            columns = slice(head * self.d_k, (head + 1) * self.d_k)
            rows = slice(None) if position is None else position

            def replace_heads(module, args):
                merged = args[0].clone()
                merged[:, rows, columns] = saved["heads"][layer][:, rows, columns]
                return (merged, *args[1:])

            handle = self.projections[layer].register_forward_pre_hook(replace_heads)
        try:
            yield
        finally:
            handle.remove()


def _hidden(args: tuple, kwargs: dict) -> torch.Tensor:
    return args[0] if args else kwargs["hidden_states"]


def cells(grid: tuple[int, ...]) -> list[tuple[int, ...]]:
    return [tuple(int(i) for i in cell) for cell in np.ndindex(*grid)]


@pytest.mark.parametrize("architecture", ["gpt2", "llama"])
def test_every_site_equals_patching_with_transformers_hooks(folders, architecture, monkeypatch):
    folder = folders[architecture]
    clean, corrupt, answer, wrong = PAIRS[architecture]
    backend = load_backend(f"hf:{folder}")
    theirs = Theirs(folder, architecture)
    clean_ids, corrupt_ids = theirs.ids(clean), theirs.ids(corrupt)
    a, w = theirs.token(answer, clean), theirs.token(wrong, clean)
    saved = theirs.cache(clean_ids)
    their_clean, their_corrupt = theirs.metric(clean_ids, a, w), theirs.metric(corrupt_ids, a, w)
    assert abs(their_clean - their_corrupt) > 0.1  # fractions well defined, so comparing them means something
    for site in SITES:
        ours = patch(backend, clean, corrupt, answer, wrong, site)
        assert len(ours.tokens) == clean_ids.size(1)  # the same ids read by both
        assert ours.clean == pytest.approx(their_clean, abs=1e-4) and ours.corrupt == pytest.approx(their_corrupt, abs=1e-4)
        expected = np.full(ours.patched.shape, np.nan)
        for cell in cells(ours.patched.shape):
            layer, head, position = cell[0], None, None
            if site == "resid":
                position = cell[1]
            else:
                head = cell[1]
                position = cell[2] if site == "head_positions" else None
            with theirs.patched(saved, site, layer, head, position, monkeypatch):
                expected[cell] = theirs.metric(corrupt_ids, a, w)
        np.testing.assert_allclose(ours.patched, expected, rtol=0, atol=1e-4, err_msg=site)
        np.testing.assert_allclose(ours.restored, restored_fraction(expected, their_clean, their_corrupt),
                                   rtol=0, atol=1e-4, err_msg=site)
        assert np.abs(ours.restored).max() > 0.05  # some site matters: the comparison is not of zeros


@pytest.mark.parametrize("architecture", ["gpt2", "llama"])
def test_noising_patches_the_corrupt_value_into_the_clean_run(folders, architecture, monkeypatch):
    folder = folders[architecture]
    clean, corrupt, answer, wrong = PAIRS[architecture]
    theirs = Theirs(folder, architecture)
    clean_ids, corrupt_ids = theirs.ids(clean), theirs.ids(corrupt)
    a, w = theirs.token(answer, clean), theirs.token(wrong, clean)
    saved = theirs.cache(corrupt_ids)
    ours = patch(load_backend(f"hf:{folder}"), clean, corrupt, answer, wrong, "heads", noising=True)
    assert ours.noising and ours.clean == pytest.approx(theirs.metric(clean_ids, a, w), abs=1e-4)
    expected = np.empty(ours.patched.shape)
    for layer, head in cells(ours.patched.shape):
        with theirs.patched(saved, "heads", layer, head, None, monkeypatch):
            expected[layer, head] = theirs.metric(clean_ids, a, w)
    np.testing.assert_allclose(ours.patched, expected, rtol=0, atol=1e-4)


# -- patching everything, and one head at every position ------------------------------------------


@pytest.mark.parametrize("model", ["gpt2", "llama", "minilm", "toy-translate"])
def test_patching_every_residual_site_at_once_restores_the_clean_metric(folders, model):
    name = f"hf:{folders[model]}" if model in folders else model
    clean, corrupt, answer, wrong = PAIRS[model] if model in folders else PRESETS[model].inputs
    experiment = Experiment(load_backend(name), clean, corrupt, answer, wrong, "resid")
    assert experiment.clean != pytest.approx(experiment.corrupt, abs=1e-3)
    everything = experiment.together(experiment.sites)
    first_layer = experiment.together([s for s in experiment.sites if s.cell[0] == 0])
    assert everything == pytest.approx(experiment.clean, abs=1e-4)
    if model != "toy-translate":  # there the decoder's first layer reads a target of its own
        assert first_layer == pytest.approx(experiment.clean, abs=1e-4)
    # one position alone at the first layer, other than where the texts differ, restores nothing
    same = next(i for i, (x, y) in enumerate(zip(experiment.clean_side.tokens.ids, experiment.corrupt_side.tokens.ids))
                if x == y)
    assert experiment.together([s for s in experiment.sites if s.cell == (0, same)]) == pytest.approx(
        experiment.corrupt, abs=1e-4)


def test_every_head_at_once_restores_an_attention_only_model():
    """The induction model has no MLPs: what reaches the last position's output is its own embedding
    (the same token at the same place in both inputs) plus the heads' outputs."""
    backend = load_backend("induction")
    if backend.model.config.feed_forward:
        pytest.skip("the induction model was retrained with MLPs")
    experiment = Experiment(backend, *PRESETS["induction"].inputs, "heads")
    assert experiment.together(experiment.sites) == pytest.approx(experiment.clean, abs=1e-4)


def test_one_head_at_every_position_is_the_head_site(folders):
    clean, corrupt, answer, wrong = PAIRS["llama"]
    backend = load_backend(f"hf:{folders['llama']}")
    heads = patch(backend, clean, corrupt, answer, wrong, "heads")
    by_position = Experiment(backend, clean, corrupt, answer, wrong, "head_positions")
    for layer, head in [(0, 1), (1, 3)]:
        sites = [s for s in by_position.sites if s.cell[:2] == (layer, head)]
        assert len(sites) == len(heads.tokens)
        assert by_position.together(sites) == pytest.approx(heads.patched[layer, head], abs=1e-5)


@pytest.mark.parametrize("model", ["mistral", "minilm"])
def test_a_run_resumed_at_any_layer_is_the_whole_run(tmp_path, model):
    """Patched runs start at their site's layer from the receiver's residual stream there; with
    sliding-window layers (Mistral, window 4 < 9 tokens) and in an encoder."""
    backend = load_backend(f"hf:{save(tmp_path, 'mistral')}" if model == "mistral" else "minilm")
    ids = torch.tensor([backend.tokenize("the cat sat on the mat because it was tired")[0].ids])
    with torch.inference_mode(), capture(kinds=("resid_pre",)) as states:
        whole = backend.model(ids)
    names = states.names_recorded()
    assert len(names) == backend.model.config.N >= 2  # one resid_pre per layer
    with torch.inference_mode():
        for layer, name in enumerate(names):
            torch.testing.assert_close(run_from(backend.model, layer, states[name]), whole, rtol=0, atol=1e-5)


def test_batched_sites_equal_sites_run_one_by_one(folders, monkeypatch):
    """The batch of patched runs (one site per batch item) gives what one run per site gives."""
    import attention_viz.backends.patching as runner

    clean, corrupt, answer, wrong = PAIRS["gpt2"]
    backend = load_backend(f"hf:{folders['gpt2']}")
    batched = patch(backend, clean, corrupt, answer, wrong, "head_positions")
    monkeypatch.setattr(runner, "BUDGET", 1)  # one site per forward
    alone = patch(backend, clean, corrupt, answer, wrong, "head_positions")
    np.testing.assert_allclose(batched.patched, alone.patched, rtol=0, atol=1e-5)


# -- the three kinds of model, on their presets ---------------------------------------------------


def test_minilm_coreference_flows_from_the_changed_word_to_the_pronoun():
    result = patch(load_backend("minilm"), *PRESETS["minilm"].inputs, site="resid")
    assert result.metric.startswith("cos(it, animal) − cos(it, street)") and result.clean > result.corrupt
    changed = result.tokens.index("tired")
    pronoun = result.tokens.index("it")
    assert result.restored[0, changed] == pytest.approx(1.0, abs=1e-4)  # the only difference at layer 0
    assert result.restored[-1, pronoun] > 0.8  # by the last layer the pronoun carries it


def test_toy_translate_measures_the_participle_after_its_own_translation():
    result = patch(load_backend("toy-translate"), *PRESETS["toy-translate"].inputs, site="heads")
    assert result.target_tokens == ("<bos>", "la", "loi", "que", "le", "conseil", "a")
    assert result.corrupt_target_tokens == ("<bos>", "le", "traité", "que", "le", "conseil", "a")
    assert result.clean > 0 > result.corrupt  # signée after the law, signé after the treaty
    assert result.rows[:3] == ("encoder 0", "encoder 1", "encoder 2") and result.rows[-1] == "cross 2"
    assert result.restored.shape == (9, 4)
    data = result.to_dict()
    assert data["rows"] == list(result.rows) and len(data["heads"]) == 9


# -- the command line ----------------------------------------------------------------------------


def run_cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["patch", *args])
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("site", SITES)
def test_cli_json_has_exactly_the_issue_keys(folders, site):
    clean, corrupt, answer, wrong = PAIRS["llama"]
    code, out, err = run_cli("--model", f"hf:{folders['llama']}", "--clean", clean, "--corrupt", corrupt,
                             "--answer", answer, "--wrong", wrong, "--site", site, "--json")
    assert code == 0, err
    data = json.loads(out)
    assert list(data) == ["tokens", "corrupt_tokens", "metric", "clean", "corrupt", site]
    assert data["tokens"][0] == "<s>" and "cat" in data["tokens"] and "dog" in data["corrupt_tokens"]
    assert data["metric"] == "logit(tired) − logit(park) at the last position"
    rows = data[site]
    assert len(rows) == 2  # one per layer
    width = {"heads": 4, "patterns": 4, "resid": len(data["tokens"]), "head_positions": 4}[site]
    assert all(len(row) == width for row in rows)
    if site == "head_positions":
        assert all(len(cell) == len(data["tokens"]) for row in rows for cell in row)
    expected = patch(load_backend(f"hf:{folders['llama']}"), clean, corrupt, answer, wrong, site).restored
    np.testing.assert_allclose(np.array(rows, dtype=float), expected, atol=1e-6)


def test_cli_table_and_preset(folders):
    code, out, err = run_cli("--model", "induction")
    assert code == 0, err
    assert "metric: logit(a) − logit(x) at the last position" in out and "top: layer" in out


@pytest.mark.parametrize("args, message", [
    (("--clean", "the cat sat on the mat", "--corrupt", "the cat sat on the mat and", "--answer", "cat", "--wrong", "dog"),
     "the clean text has 7 tokens and the corrupt 8; patching needs the same number (one ends at token 7)"),
    (("--clean", "the cat sat on the mat", "--corrupt", "the dog ran to park and", "--answer", "cat", "--wrong", "zebra"),
     "'zebra' is not in"),
    (("--clean", "the cat sat on the mat", "--corrupt", "the cat sat on the mat", "--answer", "cat", "--wrong", "dog"),
     "nothing to restore"),
    (("--clean", "the cat sat", "--answer", "cat", "--wrong", "dog"), "give the clean and corrupt texts"),
])
def test_bad_inputs_are_one_line_errors(folders, args, message):
    code, out, err = run_cli("--model", f"hf:{folders['llama']}", *args)
    assert code == 2 and not out
    assert err.count("\n") == 1 and message in err, err


def test_different_lengths_name_where_they_differ():
    with pytest.raises(ModelError, match=r"clean text has 16 tokens and the corrupt 17.*first differ at token 13 "
                                         r"\('tired' vs 'very'\)"):
        patch(load_backend("minilm"), "The animal didn't cross the street because it was too tired.",
              "The animal didn't cross the street because it was too very wide.", "animal", "street")


def test_words_of_several_tokens_are_named(folders):
    clean, corrupt = PAIRS["gpt2"][:2]
    with pytest.raises(ModelError, match=r"^'hello world' is 3 tokens in hf:\S+ \('Ġ', 'hello', 'Ġworld'\): the answer and the wrong word "
                                            r"must be one token each$"):
        patch(load_backend(f"hf:{folders['gpt2']}"), clean, corrupt, "hello world", "dog")
    with pytest.raises(ModelError, match=r"'unbelievably' is \d tokens in minilm \('un"):
        patch(load_backend("minilm"), *PRESETS["minilm"].inputs[:2], "unbelievably", "street")
    with pytest.raises(ModelError, match="'elephant' is not a token of the clean text"):
        patch(load_backend("minilm"), *PRESETS["minilm"].inputs[:2], "elephant", "street")


def test_models_that_cannot_be_patched_say_why(tmp_path):
    from benchmarks.families import save_family  # a tiny DeBERTa-v2: its attention bypasses transformers' registry

    save_family(tmp_path, "deberta-v2")
    with pytest.raises(ModelError, match="cannot be patched: its attention does not go through transformers' attention "
                                         "registry"):
        patch(load_backend(f"hf:{tmp_path}"), "the cat sat", "the dog sat", "cat", "dog")
    with pytest.raises(ModelError, match="toy-translate-rnn cannot be patched: it has no multi-head attention"):
        patch(load_backend("toy-translate-rnn"), *PRESETS["toy-translate"].inputs)
    with pytest.raises(ModelError, match="unknown site 'neurons'"):
        patch(load_backend("induction"), *PRESETS["induction"].inputs, site="neurons")


def test_the_result_reads_like_the_json():
    result = Patching(model="m", site="resid", metric="d", tokens=("a", "b"), corrupt_tokens=("a", "c"),
                      clean=2.0, corrupt=-2.0, patched=np.array([[0.0, 2.0], [np.nan, -2.0]]), rows=("layer 0", "layer 1"))
    np.testing.assert_allclose(result["resid"], [[0.5, 1.0], [np.nan, 0.0]])
    assert result.to_dict()["resid"] == [[0.5, 1.0], [None, 0.0]]
    assert result["clean"] == 2.0 and result.keys() == ["tokens", "corrupt_tokens", "metric", "clean", "corrupt", "resid"]
    with pytest.raises(ModelError, match="nothing to restore"):
        Patching(**{**result.__dict__, "corrupt": 2.0}).restored


def test_an_empty_answer_is_refused():
    with pytest.raises(ModelError, match="give the answer and the wrong word"):
        patch(load_backend("induction"), *PRESETS["induction"].inputs[:2], " ", "x")


TROPHY = ("The trophy didn't fit in the suitcase because it was too big.",
          "The trophy didn't fit in the suitcase because it was too small.", "trophy", "suitcase")


def test_a_gap_too_small_to_read_the_map_by_warns_and_the_presets_do_not():
    """The rule written out: warn when |clean − corrupt| < 0.02 or < 5 % of the larger |metric|."""
    def warned(clean: float, corrupt: float) -> bool:
        data = Patching("m", "heads", "x", ("a",), ("b",), clean, corrupt, np.array([[clean]]), ("layer 0",)).to_dict()
        assert ("warning" in data) == (gap_warning(clean, corrupt) is not None)
        return "warning" in data
    assert warned(0.5, 0.4996)  # a few ten-thousandths
    assert warned(-0.0725, -0.0814)  # the issue's trophy pair on minilm: under the floor
    assert warned(10.0, 9.8)  # 0.2 over 0.02, but 2 % of the metric's size
    assert not warned(0.41, 0.25) and not warned(4.5, -5.0)
    for model, preset in PRESETS.items():  # measured, not assumed
        result = patch(load_backend(model), *preset.inputs, site="resid")
        assert result.warning is None, (model, result.clean, result.corrupt)


def test_cli_json_warns_on_the_trophy_pair_and_the_table_says_so_too():
    clean, corrupt, answer, wrong = TROPHY
    code, out, err = run_cli("--model", "minilm", "--clean", clean, "--corrupt", corrupt, "--answer", answer,
                             "--wrong", wrong, "--site", "resid", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert abs(data["clean"] - data["corrupt"]) < 0.02
    assert data["warning"].startswith("The clean and corrupt inputs differ by only")
    code, out, err = run_cli("--model", "minilm", "--clean", clean, "--corrupt", corrupt, "--answer", answer,
                             "--wrong", wrong, "--site", "resid")
    assert code == 0 and "warning: The clean and corrupt inputs differ by only" in out
