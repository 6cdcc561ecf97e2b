"""Which implementation runs: every model's results say "ours" or "transformers" in meta, the
same as the backend and the sidebar (before loading) say; result.npz written by the command line
(its ``main``, here in this process) carries it."""

from __future__ import annotations

import pytest
from transformers import ViTConfig, ViTModel

from apphelpers import app
from test_hf_backend import save_bert, save_t5
from test_ours_decoder import save as save_decoder

from attention_viz.analysis.ablation import Ablation
from attention_viz.backends.registry import MODELS, load_backend
from attention_viz.cli import main
from attention_viz.core.result import AttentionResult
from attention_viz.ui.inputs import IMPLEMENTATIONS

TEXTS = {  # something each shipped model reads
    "minilm": "the cat sat on the mat",
    "toy-translate": "the law was signed .",
    "toy-translate-rnn": "the law was signed .",
    "induction": "a b c d a b c",
    "show-attend-tell": "scene 3",
}


@pytest.fixture(scope="module")
def folders(tmp_path_factory, monkeypatch_module):
    root = tmp_path_factory.mktemp("implementation")
    save_bert(root / "bert")
    save_t5(root / "t5")
    save_decoder(root / "llama", "llama")
    save_decoder(root / "gpt2", "gpt2")
    ViTModel(ViTConfig(image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                       intermediate_size=64), add_pooling_layer=False).save_pretrained(root / "vit")
    monkeypatch_module.setenv("ATTENTION_VIZ_MODEL_ROOTS", str(root))  # the app's hf: may load from here
    return root


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


def test_the_shipped_models_run_in_ours_in_every_kind_of_call():
    assert set(TEXTS) == set(MODELS)
    for name, text in TEXTS.items():
        backend = load_backend(name)
        assert MODELS[name].implementation == backend.implementation == "ours"
        assert backend.run(text).meta["implementation"] == "ours", name
        if backend.can_ablate:  # the forward with heads removed says it too
            group = backend.run(text).attentions()[0]
            result, _ = backend.forward(text, ablation=Ablation(((group, 0, 0),)))
            assert result.meta["implementation"] == "ours", name
    minilm = load_backend("minilm")
    assert minilm.run_without_positions(TEXTS["minilm"]).meta["implementation"] == "ours"
    assert minilm.layer_states(TEXTS["minilm"])[0].meta["implementation"] == "ours"


@pytest.mark.parametrize("folder, expected", [
    ("llama", "ours"), ("gpt2", "ours"), ("bert", "transformers"), ("t5", "transformers"), ("vit", "transformers"),
])
def test_hf_folders_say_where_they_run(folders, folder, expected):
    backend = load_backend(f"hf:{folders / folder}")
    text = {"vit": "scene 3", "t5": "the cat sat"}.get(folder, "the cat sat on the mat")
    assert backend.implementation == expected
    assert backend.run(text).meta["implementation"] == expected


@pytest.mark.parametrize("model, expected", [("minilm", "ours"), ("hf:llama", "ours"), ("hf:bert", "transformers")])
def test_result_npz_from_the_command_line_records_it(folders, tmp_path, model, expected):
    if model.startswith("hf:"):
        model = f"hf:{folders / model[3:]}"
    out = tmp_path / "r.npz"
    assert main(["run", "--model", model, "--text", "the cat sat on the mat", "--out", str(out)]) == 0
    assert AttentionResult.load_npz(out).meta["implementation"] == expected


@pytest.mark.parametrize("model, expected", [("minilm", "ours"), ("hf:llama", "ours"), ("hf:bert", "transformers"),
                                             ("hf:deberta", "transformers eager")])
def test_the_sidebar_says_which_implementation_runs(folders, model, expected):
    from benchmarks.families import save_family  # DeBERTa-v2: its attention bypasses transformers' registry

    if model == "hf:deberta" and not (folders / "deberta").exists():
        save_family(folders / "deberta", "deberta-v2")
    if model.startswith("hf:"):
        model = f"hf:{folders / model[3:]}"
    at = app(view="head", model=model, text="the cat sat on the mat")
    assert not at.exception
    captions = [c.value for c in at.sidebar.caption]
    assert IMPLEMENTATIONS[expected] in captions
    assert all(note not in captions for key, note in IMPLEMENTATIONS.items() if key != expected)


def test_what_cannot_run_says_where_it_runs(folders, tmp_path, capsys):
    """hf: Llama runs in ours, so it removes heads and gives value norms; a folder in transformers
    is refused saying so; a model of ours without heads (the GRU) is refused without blaming transformers."""
    llama = load_backend(f"hf:{folders / 'llama'}")
    result, _ = llama.forward("the cat sat on the mat", ablation=Ablation(((("decoder", "self_attn"), 0, 1),)))
    assert result.meta["implementation"] == "ours" and llama.can_ablate
    out = tmp_path / "r.npz"
    assert main(["run", "--model", f"hf:{folders / 'llama'}", "--text", "the cat sat", "--value-norms", "--ablate", "1.0",
                 "--out", str(out)]) == 0
    assert AttentionResult.load_npz(out).meta["implementation"] == "ours"
    from benchmarks.families import save_family  # DeBERTa-v2: its attention bypasses transformers' registry

    bert = f"hf:{folders / 'bert'}"  # through the registry: heads removed and values read in transformers
    for flag in (["--ablate", "0.0"], ["--value-norms"]):
        assert main(["run", "--model", bert, "--text", "the cat sat", *flag, "--out", str(out)]) == 0
        assert AttentionResult.load_npz(out).meta["implementation"] == "transformers"
    deberta = f"hf:{save_family(folders / 'deberta', 'deberta-v2')}"
    for flag in (["--ablate", "0.0"], ["--value-norms"]):
        assert main(["run", "--model", deberta, "--text", "the cat sat", *flag, "--out", str(out)]) == 2
        assert "does not go through transformers' attention registry" in capsys.readouterr().err
    assert "attention registry" in str(load_backend(deberta).ablation_refusal())
    rnn = load_backend("toy-translate-rnn")
    assert rnn.implementation == "ours" and "transformers" not in str(rnn.ablation_refusal())
