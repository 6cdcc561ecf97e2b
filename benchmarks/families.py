"""Random checkpoints of the families people open, built offline with transformers' own classes (tiny
for the registry tests, larger for benchmarks.registry): each folder holds config.json,
model.safetensors and a tokenizer (word-level; byte-level BPE where transformers builds one whatever the
file says), as a real checkpoint would."""

from __future__ import annotations

from pathlib import Path

import torch
import transformers as tf
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

WORDS = "the cat sat on mat a dog ran to park and it was tired because when mary john gave drink".split()
TEXT = "when mary and john went to the park john gave a drink to"
SPECIALS = ["<pad>", "<unk>", "<s>", "</s>"]
VOCAB = len(SPECIALS) + len(WORDS)
LAYERS, HEADS, KV_HEADS = 2, 4, 2
# shared sizes: head_dim 8, a short original context so that llama3 scaling touches real frequencies
DECODER = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=LAYERS,
               num_attention_heads=HEADS, num_key_value_heads=KV_HEADS, head_dim=8, max_position_embeddings=256,
               pad_token_id=0, bos_token_id=2, eos_token_id=3, tie_word_embeddings=False)
LLAMA3 = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
          "high_freq_factor": 4.0, "original_max_position_embeddings": 8}

# family → (config class, the family's own settings, model class)
DECODERS: dict[str, tuple[type, dict, type]] = {
    "llama3.1": (tf.LlamaConfig, dict(rope_parameters=LLAMA3), tf.LlamaForCausalLM),
    "llama3.2": (tf.LlamaConfig, dict(rope_parameters={**LLAMA3, "factor": 32.0}), tf.LlamaForCausalLM),
    "qwen2.5": (tf.Qwen2Config, {}, tf.Qwen2ForCausalLM),
    "qwen3": (tf.Qwen3Config, {}, tf.Qwen3ForCausalLM),
    "gemma2": (tf.Gemma2Config, dict(sliding_window=4, attn_logit_softcapping=0.3, final_logit_softcapping=3.0, initializer_range=0.5,
                                     query_pre_attn_scalar=16), tf.Gemma2ForCausalLM),
    "gemma3": (tf.Gemma3TextConfig, dict(sliding_window=4, query_pre_attn_scalar=16,
                                         layer_types=["sliding_attention", "full_attention"]),
               tf.Gemma3ForCausalLM),
    "mistral": (tf.MistralConfig, dict(sliding_window=4), tf.MistralForCausalLM),
    "mixtral": (tf.MixtralConfig, dict(num_local_experts=4, num_experts_per_tok=2), tf.MixtralForCausalLM),
    "phi3": (tf.Phi3Config, {}, tf.Phi3ForCausalLM),
    "olmo2": (tf.Olmo2Config, {}, tf.Olmo2ForCausalLM),
    "gpt-oss": (tf.GptOssConfig, dict(num_local_experts=4, num_experts_per_tok=2, sliding_window=4),
                tf.GptOssForCausalLM),
    "cohere2": (tf.Cohere2Config, dict(sliding_window=4), tf.Cohere2ForCausalLM),
}
OTHERS = ("gpt2", "gpt-neox", "bert", "bart", "t5")


def byte_level_bpe() -> Tokenizer:
    """A byte-level BPE trained on WORDS, each word (after a space) one token: transformers 5 rebuilds a
    qwen2 folder's tokenizer as byte-level BPE from its vocabulary and merges, so a word-level one would
    come back as bytes it has no merges for."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1000, special_tokens=SPECIALS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator([" ".join(WORDS)] * 50, trainer=trainer)
    return tokenizer


BYTE_LEVEL = ("qwen2.5",)  # families whose folder gets byte_level_bpe()
BPE_VOCAB = byte_level_bpe().get_vocab_size()


def save_tokenizer(folder: Path, template: str = "<s> $A", byte_level: bool = False) -> None:
    if byte_level:
        tokenizer = byte_level_bpe()
    else:
        tokenizer = Tokenizer(models.WordLevel({t: i for i, t in enumerate([*SPECIALS, *WORDS])}, unk_token="<unk>"))
        tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
        tokenizer.add_special_tokens(SPECIALS)
    specials = [(t, tokenizer.token_to_id(t)) for t in ("<s>", "</s>") if t in template]
    tokenizer.post_processor = processors.TemplateProcessing(single=template, special_tokens=specials)
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                            pad_token="<pad>").save_pretrained(folder)


def model_of(family: str, **changes) -> torch.nn.Module:
    """A seeded random model of ``family`` (every weight drawn, sinks included); ``changes`` go into
    a decoder family's config."""
    torch.manual_seed(0)
    if family in DECODERS:
        config_class, settings, model_class = DECODERS[family]
        merged = {**DECODER, **settings, **changes}
        if "layer_types" in settings:  # the interleaving, repeated over however many layers
            pattern = settings["layer_types"]
            merged["layer_types"] = [pattern[i % len(pattern)] for i in range(merged["num_hidden_layers"])]
        model = model_class(config_class(**merged))
    elif family == "gpt2":
        model = tf.GPT2LMHeadModel(tf.GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=LAYERS, n_head=HEADS,
                                                 n_positions=256, bos_token_id=2, eos_token_id=3))
    elif family == "gpt-neox":
        model = tf.GPTNeoXForCausalLM(tf.GPTNeoXConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=48,
                                                       num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                                                       max_position_embeddings=256))
    elif family == "bert":
        model = tf.BertModel(tf.BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=LAYERS,
                                           num_attention_heads=HEADS, intermediate_size=48,
                                           max_position_embeddings=256), add_pooling_layer=False)
    elif family == "deberta-v2":
        model = tf.DebertaV2Model(tf.DebertaV2Config(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=LAYERS,
                                                     num_attention_heads=HEADS, intermediate_size=48,
                                                     max_position_embeddings=256))
    elif family == "bart":
        model = tf.BartForConditionalGeneration(tf.BartConfig(
            vocab_size=VOCAB, d_model=32, encoder_layers=LAYERS, decoder_layers=LAYERS, encoder_attention_heads=HEADS,
            decoder_attention_heads=HEADS, encoder_ffn_dim=48, decoder_ffn_dim=48, max_position_embeddings=256,
            pad_token_id=0, bos_token_id=2, eos_token_id=3, decoder_start_token_id=2, forced_eos_token_id=None))
    elif family == "t5":
        model = tf.T5ForConditionalGeneration(tf.T5Config(
            vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=48, num_layers=LAYERS, num_heads=HEADS,
            decoder_start_token_id=0, pad_token_id=0, eos_token_id=3))
    else:
        raise KeyError(family)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.endswith("sinks"):  # zeros at init: a sink that changes nothing would test nothing
                parameter.normal_()
    return model.eval()


def save_family(folder: Path, family: str, **changes) -> Path:
    """``folder`` with a tiny random checkpoint of ``family`` and its tokenizer."""
    folder.mkdir(parents=True, exist_ok=True)
    byte_level = family in BYTE_LEVEL
    save_tokenizer(folder, "$A </s>" if family == "t5" else "<s> $A", byte_level)
    model_of(family, **({"vocab_size": BPE_VOCAB} if byte_level else {}), **changes).save_pretrained(folder)
    return folder
