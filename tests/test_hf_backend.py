"""The hf: backend on tiny random models built offline (BERT, GPT-2, T5, BART): hook names and shapes,
attention invariants, equality with a direct ``transformers`` call, token labels, and the refusals
(unknown hub id, pickle-only folder, custom code, kinds other than pattern)."""

import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import huggingface_hub.constants
import numpy as np
import pytest
import torch
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import (
    AutoModel,
    AutoModelForSeq2SeqLM,
    AutoTokenizer,
    BartConfig,
    BartForConditionalGeneration,
    BertConfig,
    BertModel,
    BertTokenizer,
    GPT2Config,
    GPT2LMHeadModel,
    PreTrainedTokenizerFast,
    T5Config,
    T5ForConditionalGeneration,
)

from attention_viz.errors import ModelError
from attention_viz.backends.hf import HFBackend, model_shape
from attention_viz.core.names import KINDS

CORPUS = [
    "the cat sat on the mat",
    "a dog is in the house",
    "hello world, how are you?",
    "the quick brown fox jumps over the lazy dog",
] * 20
HEADS = 4


def byte_level_bpe(special_tokens: list[str]) -> Tokenizer:
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=320, special_tokens=special_tokens, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tokenizer.train_from_iterator(CORPUS, trainer)
    return tokenizer


def save_bert(folder) -> None:
    words = sorted({w for line in CORPUS for w in line.replace(",", " , ").replace("?", " ? ").split()})
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]
    # BertTokenizer(vocab=...): in transformers 5.x a vocab_file= argument is silently ignored.
    BertTokenizer(vocab={w: i for i, w in enumerate(vocab)}).save_pretrained(folder)
    config = BertConfig(
        vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=HEADS,
        intermediate_size=64, max_position_embeddings=64, initializer_range=0.5,
    )  # fmt: skip
    BertModel(config).save_pretrained(folder)


def save_gpt2(folder) -> None:
    tokenizer = byte_level_bpe(["<|endoftext|>"])
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    eos = "<|endoftext|>"
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token=eos, bos_token=eos, unk_token=eos).save_pretrained(
        folder
    )
    config = GPT2Config(
        vocab_size=tokenizer.get_vocab_size(), n_embd=32, n_layer=2, n_head=HEADS, n_positions=64,
        bos_token_id=0, eos_token_id=0, initializer_range=0.5,
    )  # fmt: skip
    GPT2LMHeadModel(config).save_pretrained(folder)


def save_t5(folder) -> None:
    # A hand-made SentencePiece-style Unigram: "▁word" pieces for the corpus, characters as fallback.
    words = sorted({w for line in CORPUS for w in line.replace(",", "").replace("?", "").split()})
    chars = sorted(set("".join(CORPUS)) - {" "})
    pieces = [("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0), ("▁", -8.0)]
    pieces += [(f"▁{w}", -2.0) for w in words] + [(c, -5.0) for c in chars]
    tokenizer = Tokenizer(models.Unigram(pieces, unk_id=2))
    tokenizer.normalizer = normalizers.NFKC()
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    tokenizer.decoder = decoders.Metaspace()
    tokenizer.add_special_tokens(["<pad>", "</s>", "<unk>"])
    tokenizer.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 1)])
    PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, pad_token="<pad>", eos_token="</s>", unk_token="<unk>", model_max_length=48
    ).save_pretrained(folder)
    # A decoder deeper than the encoder: exercises the generation-cache quirk (see HFBackend._generate).
    config = T5Config(
        vocab_size=tokenizer.get_vocab_size(), d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=3,
        num_heads=HEADS, decoder_start_token_id=0, pad_token_id=0, eos_token_id=1,
    )  # fmt: skip
    T5ForConditionalGeneration(config).save_pretrained(folder)


def save_bart(folder) -> None:
    tokenizer = byte_level_bpe(["<s>", "<pad>", "</s>", "<unk>"])
    # As BART's and RoBERTa's own tokenizer.json: spans trimmed of the leading space.
    tokenizer.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0), trim_offsets=True)
    PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>", pad_token="<pad>", unk_token="<unk>"
    ).save_pretrained(folder)
    config = BartConfig(
        vocab_size=tokenizer.get_vocab_size(), d_model=32, encoder_layers=2, decoder_layers=2,
        encoder_attention_heads=HEADS, decoder_attention_heads=HEADS, encoder_ffn_dim=64, decoder_ffn_dim=64,
        max_position_embeddings=64, init_std=0.5,
    )  # fmt: skip
    BartForConditionalGeneration(config).save_pretrained(folder)


BUILDERS = {"bert": save_bert, "gpt2": save_gpt2, "t5": save_t5, "bart": save_bart}
DECODER_LAYERS = {"t5": 3, "bart": 2}


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    out = {}
    for name, save in BUILDERS.items():
        torch.manual_seed(0)
        out[name] = tmp_path_factory.mktemp(name)
        save(out[name])
    return out


@pytest.fixture(scope="module")
def backends(folders):
    return {name: HFBackend(str(folder)) for name, folder in folders.items()}


def assert_distributions(pattern: np.ndarray) -> None:
    assert pattern.dtype == np.float32 and pattern.ndim == 3 and pattern.shape[0] == HEADS
    assert np.allclose(pattern.sum(-1), 1.0, atol=1e-5)


def assert_causal(pattern: np.ndarray) -> None:
    assert np.all(np.triu(pattern, k=1) == 0.0)


def assert_labels_spell(tokens, text: str) -> None:
    """Every text token's label is its span of the text, and together they cover all of it.
    (Whitespace-only pieces, like T5's lone "▁", show as a symbol: tokens.py's rule.)"""
    pieces = []
    for label, span, special in zip(tokens.labels, tokens.offsets, tokens.special):
        if not special:
            assert span is not None
            if text[span[0] : span[1]].strip():
                assert label == text[span[0] : span[1]]
                pieces.append(label)
    assert "".join(pieces) == "".join(text.split())


def direct(folder, model_class, text: str, **inputs):
    """The same forward done straight through transformers, for comparison."""
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = model_class.from_pretrained(folder, attn_implementation="eager").eval()
    ids = tokenizer(text, return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        return ids[0].tolist(), model(input_ids=ids, output_attentions=True, **inputs)


def test_shapes_are_read_from_the_config():
    assert model_shape(BertConfig()) == "encoder-only"
    assert model_shape(BertConfig(is_decoder=True)) == "decoder-only"
    assert model_shape(GPT2Config()) == "decoder-only"
    assert model_shape(T5Config()) == "encoder-decoder"
    assert model_shape(BartConfig()) == "encoder-decoder"


def test_bert_encoder_self_attention(backends, folders):
    backend, text = backends["bert"], "The cat sat on the zebra mat"
    assert (backend.shape, backend.max_tokens, backend.kinds) == ("encoder-only", 64, KINDS)
    result = backend.run(text)
    n = len(result.tokens)
    assert sorted(result.arrays) == [f"encoder.layers.{i}.self_attn.pattern" for i in range(2)]
    assert result.tokens.labels == ("[CLS]", "The", "cat", "sat", "on", "the", "zebra", "mat", "[SEP]")
    assert result.tokens.unknown[6] and result.meta["dropped"] == 0
    ids, expected = direct(folders["bert"], AutoModel, text)
    assert list(result.tokens.ids) == ids
    for i, weights in enumerate(expected.attentions):
        pattern = result.arrays[f"encoder.layers.{i}.self_attn.pattern"]
        assert pattern.shape == (HEADS, n, n)
        assert_distributions(pattern)
        assert np.array_equal(pattern, weights[0].numpy())
    assert pattern.max() > 0.5  # the large init makes heads peaked, so equality is meaningful


def test_truncation_is_reported(backends):
    result = backends["bert"].run("the cat " * 50)
    assert result.meta["dropped"] == 100 - 62
    assert result.arrays["encoder.layers.0.self_attn.pattern"].shape == (HEADS, 64, 64)


def test_gpt2_decoder_self_attention_is_causal(backends, folders):
    backend, text = backends["gpt2"], "hello world, the lazy cat"
    assert backend.shape == "decoder-only"
    result = backend.run(text)
    assert sorted(result.arrays) == [f"decoder.layers.{i}.self_attn.pattern" for i in range(2)]
    assert_labels_spell(result.tokens, text)
    ids, expected = direct(folders["gpt2"], AutoModel, text)
    assert list(result.tokens.ids) == ids
    for i, weights in enumerate(expected.attentions):
        pattern = result.arrays[f"decoder.layers.{i}.self_attn.pattern"]
        assert pattern.shape == (HEADS, len(ids), len(ids))
        assert_distributions(pattern)
        assert_causal(pattern)
        assert np.array_equal(pattern, weights[0].numpy())


@pytest.mark.parametrize("name", ["t5", "bart"])
def test_encoder_decoder_teacher_forced(backends, folders, name):
    backend, text, target = backends[name], "the cat sat on the mat", "a dog is in the house"
    assert backend.shape == "encoder-decoder"
    result = backend.run(text, target=target)
    source, decoder = len(result.tokens), len(result.target_tokens)
    assert (result.meta["dropped"], result.meta["target_dropped"]) == (0, 0)
    assert set(result.arrays) == {
        *(f"encoder.layers.{i}.self_attn.pattern" for i in range(2)),
        *(f"decoder.layers.{i}.self_attn.pattern" for i in range(DECODER_LAYERS[name])),
        *(f"decoder.layers.{i}.cross_attn.pattern" for i in range(DECODER_LAYERS[name])),
    }
    assert_labels_spell(result.tokens, text)
    assert_labels_spell(result.target_tokens, target)
    target_ids = AutoTokenizer.from_pretrained(folders[name])(text_target=target)["input_ids"]
    decoder_ids = [backend.decoder_start_id, *target_ids]
    assert list(result.target_tokens.ids) == decoder_ids and result.target_tokens.special[0]
    ids, expected = direct(
        folders[name], AutoModelForSeq2SeqLM, text, decoder_input_ids=torch.tensor([decoder_ids]), use_cache=False
    )
    assert list(result.tokens.ids) == ids
    for part, attn, weights_list, shape in (
        ("encoder", "self_attn", expected.encoder_attentions, (HEADS, source, source)),
        ("decoder", "self_attn", expected.decoder_attentions, (HEADS, decoder, decoder)),
        ("decoder", "cross_attn", expected.cross_attentions, (HEADS, decoder, source)),
    ):
        for i, weights in enumerate(weights_list):
            pattern = result.arrays[f"{part}.layers.{i}.{attn}.pattern"]
            assert pattern.shape == shape
            assert_distributions(pattern)
            assert np.array_equal(pattern, weights[0].numpy())
            if (part, attn) == ("decoder", "self_attn"):
                assert_causal(pattern)


def test_encoder_decoder_generates_without_target(backends, folders):
    backend, text = backends["t5"], "hello world, how are you?"
    assert backend.max_tokens == 48  # the tokenizer's model_max_length: T5 states no position limit
    result = backend.run(text)
    tokenizer = AutoTokenizer.from_pretrained(folders["t5"])
    model = AutoModelForSeq2SeqLM.from_pretrained(folders["t5"], attn_implementation="eager").eval()
    with torch.inference_mode():
        inputs = tokenizer(text, return_tensors="pt")
        generated = model.generate(**inputs, max_new_tokens=47, num_beams=1, do_sample=False, use_cache=False)
    assert list(result.target_tokens.ids) == generated[0].tolist()
    assert result.meta["generated_text"] == tokenizer.decode(generated[0], skip_special_tokens=True)
    decoder, source = len(result.target_tokens), len(result.tokens)
    assert result.arrays["decoder.layers.2.cross_attn.pattern"].shape == (HEADS, decoder, source)
    assert_causal(result.arrays["decoder.layers.2.self_attn.pattern"])
    assert_labels_spell(result.target_tokens, result.meta["generated_text"])


def test_other_kinds_are_captured_and_misplaced_targets_refused(backends):
    # BERT's attention goes through transformers' registry, so q (after the projection) is ours to read
    result = backends["bert"].run("the cat", kinds=("q",))
    assert set(result.arrays) == {f"encoder.layers.{i}.self_attn.q" for i in range(2)}
    assert result.arrays["encoder.layers.0.self_attn.q"].shape == (HEADS, len(result.tokens), 32 // HEADS)
    with pytest.raises(ModelError, match="takes no target"):
        backends["gpt2"].run("the cat", target="a dog")


def test_unknown_hub_id_fails_without_touching_the_network():
    # The real-world case: no HF_HUB_OFFLINE in the environment. A fresh interpreter, because
    # huggingface_hub reads that variable at import; an audit hook records every network attempt.
    script = (
        "import sys\n"
        "attempts = []\n"
        "sys.addaudithook(lambda event, args: event.startswith(('socket.getaddrinfo', 'socket.connect'))"
        " and attempts.append(event))\n"
        "from attention_viz.backends.hf import HFBackend\n"
        "from attention_viz.errors import ModelError\n"
        "try:\n"
        "    HFBackend('attention-viz-tests/no-such-model')\n"
        "except ModelError as error:\n"
        "    print(len(attempts), error)\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "ATTENTION_VIZ_ALLOW_DOWNLOAD")}
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=root, env=env, capture_output=True, text=True, timeout=120
    )
    attempts, message = done.stdout.strip().split(" ", 1)
    assert attempts == "0"
    assert "\n" not in message
    assert message.startswith("hf:attention-viz-tests/no-such-model is not available offline")
    assert "ATTENTION_VIZ_ALLOW_DOWNLOAD=1" in message


def test_missing_local_folder_is_refused(tmp_path):
    with pytest.raises(ModelError, match="does not exist"):
        HFBackend(str(tmp_path / "nowhere"))


def test_pickle_only_folder_is_refused(tmp_path, folders):
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        shutil.copy(folders["gpt2"] / name, tmp_path / name)
    (tmp_path / "pytorch_model.bin").write_bytes(b"never unpickled")
    with pytest.raises(ModelError, match=r"holds only a pickle checkpoint \(pytorch_model.bin\)"):
        HFBackend(str(tmp_path))


def test_folder_without_tokenizer_is_refused(tmp_path, folders):
    for name in ("config.json", "model.safetensors"):
        shutil.copy(folders["gpt2"] / name, tmp_path / name)
    with pytest.raises(ModelError, match="has no tokenizer files"):
        HFBackend(str(tmp_path))


def test_custom_code_is_never_run_unless_the_operator_allows_it(tmp_path, folders, monkeypatch):
    for name in ("model.safetensors", "tokenizer.json"):
        shutil.copy(folders["gpt2"] / name, tmp_path)
    config = {"model_type": "my-custom", "auto_map": {"AutoConfig": "custom.Config", "AutoModel": "custom.Model"}}
    (tmp_path / "config.json").write_text(json.dumps(config))
    # the checkpoint's own Python: it must not run, and a marker file shows whether it did
    (tmp_path / "custom.py").write_text(f"open({str(tmp_path / 'ran')!r}, 'w').close()\nraise SystemExit\n")
    monkeypatch.delenv("ATTENTION_VIZ_ALLOW_REMOTE_CODE", raising=False)
    with pytest.raises(ModelError, match=r"custom model code, which runs only where the operator allows it "
                                         r"\(ATTENTION_VIZ_ALLOW_REMOTE_CODE=1\)"):
        HFBackend(str(tmp_path))
    assert not (tmp_path / "ran").exists()


def test_cached_hub_id_loads_from_the_snapshot_offline(tmp_path, folders, monkeypatch):
    # The Hugging Face cache layout: models--{org}--{name}/refs/main names the snapshot folder.
    repo = tmp_path / "models--tiny--gpt2"
    shutil.copytree(folders["gpt2"], repo / "snapshots" / "abc123")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("abc123")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))
    backend = HFBackend("tiny/gpt2")
    assert backend.name == "hf:tiny/gpt2" and backend.shape == "decoder-only"
    assert "decoder.layers.1.self_attn.pattern" in backend.run("the cat").arrays


def test_allowed_download_blocked_by_hf_hub_offline_says_so(monkeypatch):
    monkeypatch.setenv("ATTENTION_VIZ_ALLOW_DOWNLOAD", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)  # read at import otherwise
    with pytest.raises(ModelError, match="cannot load the config: .*HF_HUB_OFFLINE=1 is set"):
        HFBackend("attention-viz-tests/no-such-model")


def test_concurrent_runs_do_not_mix(backends):
    # One backend object serves every session; transformers 5.x collects attention per context.
    jobs = [("bert", "the cat sat on the mat"), ("gpt2", "hello world"), ("bert", "a dog"), ("gpt2", "the lazy fox")]
    expected = [backends[name].run(text).arrays for name, text in jobs]
    with ThreadPoolExecutor(max_workers=4) as pool:
        for _ in range(3):
            results = list(pool.map(lambda job: backends[job[0]].run(job[1]).arrays, jobs))
            for got, want in zip(results, expected):
                assert got.keys() == want.keys()
                assert all(np.array_equal(got[name], want[name]) for name in want)


def test_non_canonical_decoder_ids_fall_back_to_token_strings(backends):
    backend = backends["t5"]
    piece = backend.tokenizer.token_to_id
    ids = [backend.decoder_start_id, piece("▁"), piece("t"), piece("h"), piece("e"), piece("</s>")]
    tokens = backend._decoder_tokens("the", ids)  # canonical would be "▁the"
    assert tokens.labels == ("<pad>", "␣", "t", "h", "e", "</s>")
    assert tokens.special == (True, False, False, False, False, True)
    assert tokens.offsets == (None,) * 6


def test_bart_labels_keep_every_first_letter(backends):
    # BART's post-processor trims the space off "Ġcat"; the labels must still read "cat", not "at".
    text, target = "the cat sat on the mat", "a dog is in the house"
    result = backends["bart"].run(text, target=target)
    assert result.tokens.labels == ("<s>", *text.split(), "</s>")
    assert result.target_tokens.labels[2:-1] == tuple(target.split())  # after the start token and <s>
