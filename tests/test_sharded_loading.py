"""Checkpoints as they ship: sharded safetensors (``model.safetensors.index.json`` and its shards)
read tensor by tensor into a model built on the meta device, on the target device, in the chosen
dtype. Parity with the same weights unsharded (exact) and with ``transformers`` loading the same
folder; bfloat16 all through; every broken folder a one-line ModelError that names what is wrong;
and the host's peak memory while a few hundred MB load, measured in a fresh process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import (
    BertConfig,
    BertModel,
    GPT2Config,
    GPT2LMHeadModel,
    GPTNeoXConfig,
    GPTNeoXForCausalLM,
    LlamaConfig,
    LlamaForCausalLM,
)

from attention_viz.core.hooks import capture
from attention_viz.core.model import Transformer, TransformerConfig
from attention_viz.errors import ModelError
from attention_viz.weights.bert import load_bert
from attention_viz.weights.gpt2 import load_gpt2
from attention_viz.weights.llama import load_llama
from attention_viz.weights.neox import load_neox
from attention_viz.weights.loading import Layout, fill, on_meta
from attention_viz.weights.safetensors_io import SHARD_INDEX, read_safetensors

VOCAB, D_MODEL, HEADS, LAYERS, MAX_LEN = 300, 64, 8, 3, 64
IDS = torch.randint(0, VOCAB, (1, 23), generator=torch.Generator().manual_seed(1))


def llama_config() -> LlamaConfig:
    # initializer_range 0.15: peaked patterns, so a q/k mix-up could not hide in near-uniform ones
    return LlamaConfig(
        vocab_size=VOCAB, hidden_size=D_MODEL, intermediate_size=96, num_hidden_layers=LAYERS,
        num_attention_heads=HEADS, num_key_value_heads=2, max_position_embeddings=MAX_LEN,
        bos_token_id=1, eos_token_id=2, initializer_range=0.15,
    )  # fmt: skip


def gpt2_config() -> GPT2Config:
    return GPT2Config(
        n_layer=LAYERS, n_head=HEADS, n_embd=D_MODEL, n_positions=MAX_LEN, vocab_size=VOCAB,
        bos_token_id=1, eos_token_id=2, initializer_range=0.3,
    )  # fmt: skip


def shard_name(i: int, n: int) -> str:
    return f"model-{i + 1:05d}-of-{n:05d}.safetensors"


def save_sharded(tensors: dict[str, torch.Tensor], folder: Path, shards: int, config: dict) -> Path:
    """``tensors`` in ``shards`` files (names dealt round robin, so every shard holds pieces of
    several layers) plus the index and config.json, as ``save_pretrained`` lays a folder out."""
    folder.mkdir(parents=True, exist_ok=True)
    names = sorted(tensors)
    weight_map = {name: shard_name(k % shards, shards) for k, name in enumerate(names)}
    for i in range(shards):
        part = {name: tensors[name].contiguous() for name in names if weight_map[name] == shard_name(i, shards)}
        save_file(part, folder / shard_name(i, shards), metadata={"format": "pt"})
    total = sum(t.numel() * t.element_size() for t in tensors.values())
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (folder / SHARD_INDEX).write_text(json.dumps(index))
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def save_single(tensors: dict[str, torch.Tensor], folder: Path, config: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in tensors.items()}, folder / "model.safetensors", metadata={"format": "pt"})
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def checkpoint_of(model: torch.nn.Module, dtype: torch.dtype = torch.float32) -> dict[str, torch.Tensor]:
    """A transformers model's tensors as a checkpoint holds them: each once (a tied head is saved
    as the embedding alone, as ``save_pretrained`` does), in ``dtype``."""
    seen, tensors = set(), {}
    for name, tensor in model.state_dict().items():
        if tensor.data_ptr() not in seen:
            seen.add(tensor.data_ptr())
            tensors[name] = tensor.detach().to(dtype).clone()
    return tensors


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    """(transformers' model, its tensors, config dict, sharded folder, single-file folder)."""
    torch.manual_seed(0)
    theirs = LlamaForCausalLM(llama_config()).eval()
    tensors, config = checkpoint_of(theirs), theirs.config.to_dict()
    root = tmp_path_factory.mktemp("llama")
    sharded = save_sharded(tensors, root / "sharded", 4, config)
    return theirs, tensors, config, sharded, save_single(tensors, root / "single", config)


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    torch.manual_seed(0)
    theirs = GPT2LMHeadModel(gpt2_config()).eval()
    tensors, config = checkpoint_of(theirs), theirs.config.to_dict()
    assert "lm_head.weight" not in tensors  # tied: saved once, as wte
    root = tmp_path_factory.mktemp("gpt2")
    sharded = save_sharded(tensors, root / "sharded", 3, config)
    return theirs, tensors, config, sharded, save_single(tensors, root / "single", config)


def run(model: Transformer, ids: torch.Tensor = IDS) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    with torch.inference_mode(), capture(kinds=("pattern",)) as recorded:
        logits = model.logits(model(ids))
    return logits, {name: recorded[name] for name in recorded.names_recorded()}


@pytest.mark.parametrize("family", ["llama", "gpt2"])
def test_sharded_equals_unsharded_exactly_and_matches_transformers(family, request):
    theirs, tensors, _, sharded, single = request.getfixturevalue(family)
    load = {"llama": load_llama, "gpt2": load_gpt2}[family]
    assert len(list(sharded.glob("model-*.safetensors"))) > 2 and not (sharded / "model.safetensors").exists()
    from_shards, from_one = load(sharded), load(single)

    assert not any(t.is_meta for t in (*from_shards.parameters(), *from_shards.buffers()))
    assert {t.dtype for t in from_shards.parameters()} == {torch.float32}
    for name, tensor in from_one.state_dict().items():
        assert torch.equal(from_shards.state_dict()[name], tensor), name
    logits, patterns = run(from_shards)
    logits_one, patterns_one = run(from_one)
    assert torch.equal(logits, logits_one)
    assert patterns.keys() == patterns_one.keys() and len(patterns) == LAYERS
    assert all(torch.equal(patterns[name], patterns_one[name]) for name in patterns)

    # transformers reading the very same sharded folder (offline: a local path)
    hf = type(theirs).from_pretrained(sharded, attn_implementation="eager").eval()
    with torch.inference_mode():
        expected = hf(IDS, output_attentions=True)
    assert expected.attentions[-1].amax(-1).mean() > 0.3  # peaked, so the comparison means something
    for i, attention in enumerate(expected.attentions):
        assert (patterns[f"decoder.layers.{i}.self_attn.pattern"] - attention).abs().max() <= 1e-5
    assert (logits - expected.logits).abs().max() <= 1e-5


@pytest.mark.parametrize("family", ["neox", "bert"])
def test_neox_and_bert_load_from_shards_as_from_one_file(family, tmp_path):
    """The other two families, through the same path: fused q/k/v rows split per shard (NeoX), the
    encoder (BERT), each against transformers on the same folder."""
    torch.manual_seed(0)
    if family == "neox":
        config = GPTNeoXConfig(
            vocab_size=VOCAB, hidden_size=D_MODEL, intermediate_size=96, num_hidden_layers=LAYERS,
            num_attention_heads=HEADS, max_position_embeddings=MAX_LEN, rotary_pct=0.5, initializer_range=0.15,
        )  # fmt: skip
        theirs, load, group = GPTNeoXForCausalLM(config).eval(), load_neox, "decoder"
    else:
        config = BertConfig(
            vocab_size=VOCAB, hidden_size=D_MODEL, intermediate_size=96, num_hidden_layers=LAYERS,
            num_attention_heads=HEADS, max_position_embeddings=MAX_LEN, initializer_range=0.15,
        )  # fmt: skip
        theirs, load, group = BertModel(config, add_pooling_layer=False).eval(), load_bert, "encoder"
    theirs.save_pretrained(tmp_path / "saved")  # the names as checkpoints ship them (embed_out, not lm_head)
    tensors = load_file(tmp_path / "saved" / "model.safetensors")
    sharded = load(save_sharded(tensors, tmp_path / "sharded", 3, config.to_dict()))
    single = load(save_single(tensors, tmp_path / "single", config.to_dict()))
    assert all(torch.equal(t, sharded.state_dict()[name]) for name, t in single.state_dict().items())
    with torch.inference_mode(), capture() as recorded:
        hidden = sharded(IDS)
        logits = sharded.logits(hidden) if family == "neox" else None
    hf = type(theirs).from_pretrained(tmp_path / "sharded", attn_implementation="eager").eval()
    with torch.inference_mode():
        expected = hf(IDS, output_attentions=True, output_hidden_states=True)
    for i, attention in enumerate(expected.attentions):
        assert (recorded[f"{group}.layers.{i}.self_attn.pattern"] - attention).abs().max() <= 1e-5
    if family == "neox":
        assert (logits - expected.logits).abs().max() <= 1e-4
    else:
        assert (hidden - expected.last_hidden_state).abs().max() <= 1e-4


def test_gpt2_head_stays_tied_to_the_embedding(gpt2):
    model = load_gpt2(gpt2[3])
    assert model.decoder.generator.weight is model.decoder.embed.tokens.weight
    assert len(list(model.parameters())) == len(list(model.named_parameters(remove_duplicate=False))) - 1


def test_bfloat16_load_is_bfloat16_throughout(llama):
    _, tensors, _, sharded, _ = llama
    model = load_llama(sharded, dtype=torch.bfloat16)
    assert {t.dtype for t in model.parameters()} == {torch.bfloat16}
    assert all(t.dtype == torch.bfloat16 for t in model.buffers() if t.is_floating_point())
    assert torch.equal(model.decoder.embed.tokens.weight, tensors["model.embed_tokens.weight"].bfloat16())
    logits, _ = run(model)
    reference, _ = run(load_llama(sharded))
    assert logits.dtype == torch.bfloat16
    # bf16 keeps under 3 significant digits, and the rounding adds up over the layers: close, not equal
    error = (logits.float() - reference).abs()
    assert error.mean() < 0.05 * reference.std() and error.max() < 0.1 * reference.abs().max()
    assert (logits.float().argmax(-1) == reference.argmax(-1)).float().mean() >= 0.9


def test_bfloat16_checkpoint_loads_as_float32_by_default(tmp_path, llama):
    _, tensors, config, _, _ = llama
    halved = {name: t.bfloat16() for name, t in tensors.items()}
    model = load_llama(save_sharded(halved, tmp_path, 3, config))
    assert {t.dtype for t in model.parameters()} == {torch.float32}
    assert torch.equal(model.decoder.norm.weight, halved["model.norm.weight"].float())


def test_read_safetensors_casts_on_request(llama):
    tensors = read_safetensors(llama[3], dtype=torch.float16)
    assert tensors.keys() == llama[1].keys()
    assert {t.dtype for t in tensors.values()} == {torch.float16}
    assert {t.dtype for t in read_safetensors(llama[3]).values()} == {torch.float32}  # as stored


def test_a_non_float_dtype_is_refused(llama):
    with pytest.raises(ModelError, match="floating-point dtype, got torch.int64"):
        load_llama(llama[3], dtype=torch.int64)


def test_meta_built_sinusoidal_table_is_computed_again_on_the_device():
    """None of the checkpoint families uses a buffer, but our own models do (the sinusoidal table):
    built on meta, it must come back with the values a model built on the CPU has."""
    config = TransformerConfig(shape="decoder-only", vocab_size=50, d_model=16, h=2, d_ff=32, N=1, max_len=20)
    torch.manual_seed(0)
    reference = Transformer(config).eval()
    state = {name: t.clone() for name, t in reference.state_dict().items()}  # pe is not persistent
    assert not any(name.endswith(".pe") for name in state)
    identity = Layout(
        family="ours", prefix="", expected={name: tuple(t.shape) for name, t in state.items()},
        ignored=lambda name: False, convert=lambda name, tensor: [(name, tensor)], n_layers=1,
    )  # fmt: skip
    for dtype in (torch.float32, torch.bfloat16):
        model = on_meta(config)
        assert model.decoder.embed.positions.pe.is_meta
        fill(model, state, identity, dtype=dtype)
        pe = model.decoder.embed.positions.pe
        assert not pe.is_meta and pe.dtype == dtype
        assert torch.equal(pe, reference.decoder.embed.positions.pe.to(dtype))
    ids = torch.randint(0, 50, (1, 7), generator=torch.Generator().manual_seed(2))
    fp32 = on_meta(config)
    fill(fp32, state, identity)
    with torch.inference_mode():
        assert torch.equal(fp32.eval().logits(fp32(ids)), reference.logits(reference(ids)))


# ---------------------------------------------------------------- broken folders


def broken_copy(source: Path, folder: Path) -> Path:
    folder.mkdir()
    for file in source.iterdir():
        (folder / file.name).write_bytes(file.read_bytes())
    return folder


def rewrite_shard(folder: Path, name: str, change) -> None:
    tensors = load_file(folder / name)
    change(tensors)
    save_file(tensors, folder / name, metadata={"format": "pt"})


def shard_holding(folder: Path, tensor: str) -> str:
    return json.loads((folder / SHARD_INDEX).read_text())["weight_map"][tensor]


def one_line_error(folder: Path, load=load_llama) -> str:
    with pytest.raises(ModelError) as error:
        load(folder)
    message = str(error.value)
    assert "\n" not in message
    return message


def test_missing_shard_is_named(tmp_path, llama):
    folder = broken_copy(llama[3], tmp_path / "f")
    (folder / shard_name(2, 4)).unlink()
    assert f"missing: {shard_name(2, 4)}" in one_line_error(folder)


def test_tensor_the_index_promises_but_its_shard_lacks_is_named(tmp_path, llama):
    folder = broken_copy(llama[3], tmp_path / "f")
    name = "model.layers.1.self_attn.k_proj.weight"
    shard = shard_holding(folder, name)
    rewrite_shard(folder, shard, lambda tensors: tensors.pop(name))
    assert f"puts tensor {name} in {shard}, which does not hold it" in one_line_error(folder)


def test_tensor_missing_everywhere_is_named(tmp_path, llama):
    folder = broken_copy(llama[3], tmp_path / "f")
    name = "model.layers.2.mlp.up_proj.weight"
    rewrite_shard(folder, shard_holding(folder, name), lambda tensors: tensors.pop(name))
    index = json.loads((folder / SHARD_INDEX).read_text())
    del index["weight_map"][name]
    (folder / SHARD_INDEX).write_text(json.dumps(index))
    assert "missing layers.2.mlp.up_proj.weight" in one_line_error(folder)


def test_unexpected_tensor_is_named(tmp_path, gpt2):
    folder = broken_copy(gpt2[3], tmp_path / "f")
    rewrite_shard(folder, shard_name(1, 3), lambda tensors: tensors.update({"h.7.attn.c_attn.weight": torch.ones(2)}))
    assert "unexpected h.7.attn.c_attn.weight" in one_line_error(folder, load_gpt2)


def test_shape_mismatch_is_named(tmp_path, gpt2):
    folder = broken_copy(gpt2[3], tmp_path / "f")
    name = "h.0.mlp.c_fc.weight"  # stored with GPT2LMHeadModel's prefix, named without it
    shard = shard_holding(folder, f"transformer.{name}")
    rewrite_shard(folder, shard, lambda tensors: tensors.update({f"transformer.{name}": torch.zeros(D_MODEL, 10)}))
    message = one_line_error(folder, load_gpt2)
    assert f"{name} has shape ({D_MODEL}, 10), expected ({D_MODEL}, {4 * D_MODEL})" in message


def test_index_naming_a_file_outside_the_folder_is_refused(tmp_path, llama):
    folder = broken_copy(llama[3], tmp_path / "f")
    (tmp_path / "outside.safetensors").write_bytes((folder / shard_name(0, 4)).read_bytes())
    index = json.loads((folder / SHARD_INDEX).read_text())
    first = next(iter(index["weight_map"]))
    index["weight_map"][first] = "../outside.safetensors"
    (folder / SHARD_INDEX).write_text(json.dumps(index))
    assert "names shards outside the folder: ../outside.safetensors" in one_line_error(folder)


def test_damaged_shard_is_named(tmp_path, llama):
    folder = broken_copy(llama[3], tmp_path / "f")
    damaged = folder / shard_name(1, 4)
    damaged.write_bytes(damaged.read_bytes()[:100])
    assert f"{damaged} is not a readable safetensors file" in one_line_error(folder)


# ---------------------------------------------------------------- peak host memory

# Runs in a fresh interpreter: the imports come first, then the resident set before the load and the
# peak after it (VmHWM, reset after the imports where the kernel allows it). Whether the load pulled
# in torch._dynamo (what torch's meta normal_ would import, slowly, for good) is reported too.
MEASURE = """
import json, sys, torch
from attention_viz.weights.llama import load_llama

def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024

try:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
except OSError:
    pass
before = status("VmRSS")
model = load_llama(sys.argv[1], dtype=torch.bfloat16)
size = sum(p.numel() * p.element_size() for p in model.parameters())
print(json.dumps({"before": before, "peak": status("VmHWM"), "after": status("VmRSS"), "model": size,
                  "dynamo": "torch._dynamo" in sys.modules}))
"""


@pytest.mark.slow
def test_peak_host_memory_of_a_bf16_load_stays_near_the_model_size(tmp_path):
    """A ~290 MB bf16 Llama-shaped checkpoint in 6 shards. What must be resident: the model (1×),
    the shard being read (its pages stay mapped while it is read: a quarter of the model at most
    here) and the one tensor being copied out of it. Bound 1.5×: that, with room for the allocator;
    a load through a dict of all tensors into a float32 model needs 3× at least."""
    vocab, d, layers, d_ff = 16384, 1024, 10, 2816
    config = LlamaConfig(
        vocab_size=vocab, hidden_size=d, intermediate_size=d_ff, num_hidden_layers=layers,
        num_attention_heads=16, num_key_value_heads=4, max_position_embeddings=256,
    ).to_dict()  # fmt: skip
    generator = torch.Generator().manual_seed(0)
    shapes = {"model.embed_tokens.weight": (vocab, d), "lm_head.weight": (vocab, d), "model.norm.weight": (d,)}
    for i in range(layers):
        layer = f"model.layers.{i}."
        shapes |= {
            f"{layer}self_attn.q_proj.weight": (d, d), f"{layer}self_attn.k_proj.weight": (d // 4, d),
            f"{layer}self_attn.v_proj.weight": (d // 4, d), f"{layer}self_attn.o_proj.weight": (d, d),
            f"{layer}mlp.gate_proj.weight": (d_ff, d), f"{layer}mlp.up_proj.weight": (d_ff, d),
            f"{layer}mlp.down_proj.weight": (d, d_ff),
            f"{layer}input_layernorm.weight": (d,), f"{layer}post_attention_layernorm.weight": (d,),
        }  # fmt: skip
    tensors = {name: (torch.randn(shape, generator=generator) * 0.02).bfloat16() for name, shape in shapes.items()}
    checkpoint = sum(t.numel() * t.element_size() for t in tensors.values())
    folder = save_sharded(tensors, tmp_path / "big", 6, config)
    del tensors

    done = subprocess.run([sys.executable, "-c", MEASURE, str(folder)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    measured = json.loads(done.stdout)
    growth = measured["peak"] - measured["before"]
    assert measured["model"] == checkpoint
    print(f"checkpoint {checkpoint / 2**20:.0f} MiB, peak growth {growth / 2**20:.0f} MiB "
          f"({growth / checkpoint:.2f}×), resident after {(measured['after'] - measured['before']) / 2**20:.0f} MiB")
    assert growth >= measured["model"] * 0.9  # the measurement sees the model itself
    assert growth <= 1.5 * checkpoint
    assert not measured["dynamo"]
