"""A complete Transformer written from the paper (Vaswani et al. 2017), in three shapes:

* ``encoder-only``     — BERT: embeddings → N encoder layers;
* ``decoder-only``     — GPT-2: embeddings → N causal decoder layers (no cross-attention) → vocab;
* ``encoder-decoder``  — the original translation model: encoder, and a decoder whose layers add
  cross-attention (queries from the decoder, keys and values from the encoder ``memory``).

Modules only project and reshape; the math lives in :mod:`attention_viz.core.attention`. Each attention
has six hook points (``q k v scores pattern context``) whose names are their module paths, e.g.
``decoder.layers.1.cross_attn.pattern``. Masks are boolean, True where attention is allowed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from .attention import (
    causal_mask, fused_attention, kv_groups, masked_softmax, repeat_kv, scaled_dot_product_attention,
    sliding_window_mask,
)  # fmt: skip
from .hooks import HookPoint, name_hook_points
from .positional import LearnedEncoding, RotaryEmbedding, RotaryScaling, SinusoidalEncoding, rotary_dims

Shape = Literal["encoder-only", "decoder-only", "encoder-decoder"]
SHAPES: tuple[str, ...] = ("encoder-only", "decoder-only", "encoder-decoder")
ACTIVATIONS = {
    "relu": F.relu,
    "gelu": F.gelu,  # exact (erf) GELU, as BERT
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),  # GPT-2's "gelu_new"
    "silu": F.silu,  # Swish₁, the gate of SwiGLU (Llama, Qwen2, Mistral)
}


@dataclass(frozen=True)
class TransformerConfig:
    """Hyperparameters, named as in the paper. Defaults are the paper's base model."""

    shape: Shape = "encoder-decoder"
    vocab_size: int = 32000  # source vocabulary (the only one for encoder- or decoder-only)
    tgt_vocab_size: int | None = None  # encoder–decoder target vocabulary; None = vocab_size
    d_model: int = 512
    h: int = 8  # attention heads; d_k = d_v = d_model / h
    d_ff: int = 2048
    N: int = 6  # encoder layers (decoder layers too unless N_dec is given)
    N_dec: int | None = None
    max_len: int = 512
    positional: Literal["sinusoidal", "learned", "rotary", "none"] = "sinusoidal"
    norm: Literal["post", "pre"] = "post"  # post-LN: paper, BERT; pre-LN: GPT-2
    layer_norm_eps: float = 1e-5
    activation: str = "relu"
    dropout: float = 0.1
    type_vocab_size: int = 0  # BERT's segment (token type) embeddings; 0 = none
    embedding_norm: bool = False  # BERT normalizes the summed embeddings
    scale_embeddings: bool = True  # paper §3.4: embeddings × √d_model
    tie_embeddings: bool = False  # output projection shares the target embedding matrix (GPT-2)
    pad_id: int = 0
    # Llama-style layouts; the defaults keep the paper's, BERT's and GPT-2's
    n_kv_heads: int | None = None  # K/V heads (grouped-query attention); None = h, 1 = multi-query
    head_dim: int | None = None  # d_k when it is not d_model / h (some Llama and Mistral checkpoints)
    rotary_pct: float = 1.0  # positional="rotary": share of each head's dimensions that rotate (GPT-NeoX)
    rotary_base: float = 10000.0  # the base of the rotary frequencies θ_i = base^(−2i/d_rot)
    rotary_scaling: RotaryScaling | None = None  # long-context rescaling of the θ_i (Llama 3.1: llama3)
    norm_type: Literal["layer", "rms"] = "layer"  # LayerNorm, or RMSNorm (Zhang & Sennrich 2019)
    gated_ffn: bool = False  # (act(x W) ⊙ x V) W_2 (Shazeer 2020); with activation="silu" this is SwiGLU
    qkv_bias: bool = True  # biases of W_Q, W_K, W_V (Llama: none; Qwen2: these only)
    out_bias: bool = True  # bias of W_O
    ffn_bias: bool = True
    generator_bias: bool = True  # untied output projection only (a tied one never has a bias)
    generator: bool = True  # False: a checkpoint saved without its LM head (LlamaModel …): no logits
    sliding_window: int | None = None  # decoder self-attention sees only the last W positions (Mistral)
    full_attention_layers: tuple[int, ...] = ()  # decoder layers exempt from the window (Qwen2)
    parallel_residual: bool = False  # GPT-NeoX: x + Attn(LN₁(x)) + FFN(LN₂(x)), both from the same x
    feed_forward: bool = True  # False: attention-only layers (Elhage et al. 2021's induction-head models)

    def __post_init__(self) -> None:
        object.__setattr__(self, "full_attention_layers", tuple(self.full_attention_layers))  # JSON gives lists
        if isinstance(self.rotary_scaling, dict):  # and objects
            object.__setattr__(self, "rotary_scaling", RotaryScaling(**self.rotary_scaling))
        problems = []
        if self.shape not in SHAPES:
            problems.append(f"shape must be one of {SHAPES}, got {self.shape!r}")
        for name in ("vocab_size", "d_model", "h", "d_ff", "N", "max_len"):
            if getattr(self, name) < 1:
                problems.append(f"{name} must be positive, got {getattr(self, name)}")
        if self.h >= 1 and self.head_dim is None and self.d_model % self.h:
            problems.append(f"d_model ({self.d_model}) must be divisible by h ({self.h})")
        if self.head_dim is not None and self.head_dim < 1:
            problems.append(f"head_dim must be positive, got {self.head_dim}")
        if self.n_kv_heads is not None and (self.n_kv_heads < 1 or self.h % self.n_kv_heads):
            problems.append(f"h ({self.h}) must be a multiple of n_kv_heads ({self.n_kv_heads})")
        if self.positional == "rotary" and self.h >= 1 and self.d_k >= 1:
            try:
                rotary_dims(self.d_k, self.rotary_pct)
            except ValueError as error:
                problems.append(str(error))
        if self.rotary_scaling is not None and self.positional != "rotary":
            problems.append("rotary_scaling needs positional='rotary'")
        if self.norm_type not in ("layer", "rms"):
            problems.append(f"norm_type must be 'layer' or 'rms', got {self.norm_type!r}")
        if self.sliding_window is not None and (self.sliding_window < 1 or self.shape == "encoder-only"):
            problems.append("sliding_window must be positive and needs a decoder")
        if self.parallel_residual and (self.norm != "pre" or self.shape != "decoder-only"):
            problems.append("parallel_residual needs a pre-LN decoder-only model")
        if self.parallel_residual and not self.feed_forward:
            problems.append("parallel_residual needs the feed-forward sublayer")
        if self.positional == "sinusoidal" and self.d_model % 2:
            problems.append("sinusoidal positions need an even d_model")
        if self.positional not in ("sinusoidal", "learned", "rotary", "none"):
            problems.append(f"unknown positional encoding {self.positional!r}")
        if self.norm not in ("post", "pre"):
            problems.append(f"norm must be 'post' or 'pre', got {self.norm!r}")
        if self.activation not in ACTIVATIONS:
            problems.append(f"activation must be one of {sorted(ACTIVATIONS)}, got {self.activation!r}")
        if not 0.0 <= self.dropout < 1.0:
            problems.append(f"dropout must be in [0, 1), got {self.dropout}")
        if self.layer_norm_eps <= 0:
            problems.append("layer_norm_eps must be positive")
        if self.N_dec is not None and self.N_dec < 1:
            problems.append("N_dec must be positive")
        if problems:
            raise ValueError("invalid TransformerConfig: " + "; ".join(problems))

    @property
    def d_k(self) -> int:
        return self.head_dim if self.head_dim is not None else self.d_model // self.h

    @property
    def kv_heads(self) -> int:
        return self.n_kv_heads if self.n_kv_heads is not None else self.h

    @property
    def has_encoder(self) -> bool:
        return self.shape != "decoder-only"

    @property
    def has_decoder(self) -> bool:
        return self.shape != "encoder-only"

    @property
    def decoder_vocab_size(self) -> int:
        if self.shape == "encoder-decoder" and self.tgt_vocab_size is not None:
            return self.tgt_vocab_size
        return self.vocab_size

    @property
    def decoder_layers(self) -> int:
        return self.N_dec if self.N_dec is not None else self.N


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1..head_h) W_O, head_i = Attention(Q W_Qi, K W_Ki, V W_Vi).

    ``n_kv_heads`` < h: grouped-query attention, K and V projected to fewer heads, each shared by a
    group of query heads (the ``k``/``v`` hooks hold the n_kv_heads real ones). ``rotary``: queries
    and keys rotated by position after the projections (RoPE); ``q``/``k`` hooks see them rotated,
    as the dot product does.
    """

    def __init__(
        self,
        d_model: int,
        h: int,
        dropout: float = 0.0,
        bias: bool = True,
        n_kv_heads: int | None = None,
        d_k: int | None = None,
        qkv_bias: bool | None = None,
        rotary: RotaryEmbedding | None = None,
    ) -> None:
        super().__init__()
        assert d_k is not None or d_model % h == 0
        self.h, self.d_k = h, d_k if d_k is not None else d_model // h
        self.h_kv = n_kv_heads if n_kv_heads is not None else h
        kv_groups(self.h, self.h_kv)  # raises unless h is a multiple of h_kv
        qkv_bias = bias if qkv_bias is None else qkv_bias
        self.w_q = nn.Linear(d_model, self.h * self.d_k, bias=qkv_bias)
        self.w_k = nn.Linear(d_model, self.h_kv * self.d_k, bias=qkv_bias)
        self.w_v = nn.Linear(d_model, self.h_kv * self.d_k, bias=qkv_bias)
        self.w_o = nn.Linear(self.h * self.d_k, d_model, bias=bias)
        self.rotary = rotary
        self.dropout = nn.Dropout(dropout)
        self.q, self.k, self.v = HookPoint(), HookPoint(), HookPoint()
        self.scores, self.pattern, self.context = HookPoint(), HookPoint(), HookPoint()

    def _mix(self, pattern: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """The weighted sum of the values, for weights an intervention replaced."""
        return pattern.to(v.dtype) @ repeat_kv(v, self.h // self.h_kv)  # (B, h, Tq, d_k); patterns are float32

    def split_heads(self, x: torch.Tensor, heads: int | None = None) -> torch.Tensor:
        batch, length, _ = x.shape
        return x.view(batch, length, heads or self.h, self.d_k).transpose(1, 2)  # (B, heads, T, d_k)

    def forward(
        self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """query (B, Tq, d_model), key/value (B, Tk, d_model), mask broadcastable to (B, h, Tq, Tk)."""
        q = self.split_heads(self.w_q(query))  # (B, h, Tq, d_k)
        k = self.split_heads(self.w_k(key), self.h_kv)  # (B, h_kv, Tk, d_k)
        if self.rotary is not None:
            q, k = self.rotary(q, k)
        q, k = self.q(q), self.k(k)
        v = self.v(self.split_heads(self.w_v(value), self.h_kv))  # (B, h_kv, Tk, d_k)
        dropout = self.dropout if self.training and self.dropout.p > 0 else None
        keep_scores = self.scores.wanted()  # if not, the pattern overwrites them: one (Tq, Tk) tensor, not two
        if not keep_scores and not self.pattern.wanted() and dropout is None and not torch.is_grad_enabled():
            # nobody looks at this layer's weights: the fused kernel, no (T, T) array
            return self._output(self.context(fused_attention(q, k, v, mask)))
        context, pattern, scores = scaled_dot_product_attention(
            q, k, v, mask, dropout=dropout, keep_scores=keep_scores
        )
        # Each hook point may replace its tensor (hooks.intervene); what comes after then follows
        # from the replacement: new scores → a new softmax, new weights → a new mix of the values.
        if scores is not None:
            new_scores = self.scores(scores)  # (B, h, Tq, Tk)
            if new_scores is not scores:
                _, pattern = masked_softmax(new_scores, mask)
                context = self._mix(pattern, v)
        new_pattern = self.pattern(pattern)  # (B, h, Tq, Tk)
        if new_pattern is not pattern:
            context = self._mix(new_pattern, v)
        return self._output(self.context(context))  # (B, h, Tq, d_k): the heads' outputs, what W_O reads

    def _output(self, context: torch.Tensor) -> torch.Tensor:
        """The heads' contexts (B, h, Tq, d_k) side by side through W_O: (B, Tq, d_model)."""
        batch, _, length, _ = context.shape
        concat = context.transpose(1, 2).reshape(batch, length, self.h * self.d_k)
        return self.w_o(concat)


class FeedForward(nn.Module):
    """FFN(x) = act(x W_1 + b_1) W_2 + b_2, applied at every position separately.

    ``gated``: the GLU variant (Shazeer 2020), FFN(x) = (act(x W_1) ⊙ x V) W_2; SwiGLU with SiLU.
    """

    def __init__(
        self, d_model: int, d_ff: int, activation: str, dropout: float, gated: bool = False, bias: bool = True
    ) -> None:
        super().__init__()
        self.w_1 = nn.Linear(d_model, d_ff, bias=bias)
        self.v = nn.Linear(d_model, d_ff, bias=bias) if gated else None
        self.w_2 = nn.Linear(d_ff, d_model, bias=bias)
        self.activation = ACTIVATIONS[activation]
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = self.activation(self.w_1(x))  # (B, T, d_ff)
        if self.v is not None:
            hidden = hidden * self.v(x)
        return self.w_2(self.dropout(hidden))


def make_norm(d_model: int, norm_type: str, eps: float) -> nn.Module:
    """LayerNorm (mean and variance, with bias), or RMSNorm: x / √(mean(x²) + ε) · g, no centring."""
    return nn.RMSNorm(d_model, eps=eps) if norm_type == "rms" else nn.LayerNorm(d_model, eps=eps)


class Sublayer(nn.Module):
    """Residual connection around ``sublayer`` with LayerNorm after (post-LN) or before (pre-LN)."""

    def __init__(self, d_model: int, norm: str, eps: float, dropout: float, norm_type: str = "layer") -> None:
        super().__init__()
        self.pre_norm = norm == "pre"
        self.norm = make_norm(d_model, norm_type, eps)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, sublayer) -> torch.Tensor:
        if self.pre_norm:
            return x + self.dropout(sublayer(self.norm(x)))
        return self.norm(x + self.dropout(sublayer(x)))


def self_attention(c: TransformerConfig) -> MultiHeadAttention:
    rotary = RotaryEmbedding(c.d_k, c.rotary_pct, c.rotary_base, c.rotary_scaling) if c.positional == "rotary" else None
    return MultiHeadAttention(
        c.d_model, c.h, c.dropout, c.out_bias, n_kv_heads=c.n_kv_heads, d_k=c.d_k, qkv_bias=c.qkv_bias, rotary=rotary
    )


def feed_forward(c: TransformerConfig) -> FeedForward:
    return FeedForward(c.d_model, c.d_ff, c.activation, c.dropout, gated=c.gated_ffn, bias=c.ffn_bias)


def sublayers(c: TransformerConfig, n: int) -> nn.ModuleList:
    return nn.ModuleList(Sublayer(c.d_model, c.norm, c.layer_norm_eps, c.dropout, c.norm_type) for _ in range(n))


class EncoderLayer(nn.Module):
    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.self_attn = self_attention(config)
        self.feed_forward = feed_forward(config) if config.feed_forward else None
        self.sublayers = sublayers(config, 2 if config.feed_forward else 1)
        self.resid_pre = HookPoint()  # the residual stream entering the layer

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        x = self.resid_pre(x)  # (B, T, d_model)
        x = self.sublayers[0](x, lambda y: self.self_attn(y, y, y, mask))
        return x if self.feed_forward is None else self.sublayers[1](x, self.feed_forward)


class DecoderLayer(nn.Module):
    """Masked self-attention, then (encoder–decoder only) cross-attention over ``memory``, then FFN.

    ``parallel_residual`` (GPT-NeoX): attention and FFN both read the layer's input, each through
    its own norm, and their sum joins the residual stream once.
    """

    def __init__(self, config: TransformerConfig, cross_attention: bool) -> None:
        super().__init__()
        c = config
        self.self_attn = self_attention(c)
        self.cross_attn = MultiHeadAttention(c.d_model, c.h, c.dropout) if cross_attention else None
        self.feed_forward = feed_forward(c) if c.feed_forward else None
        self.sublayers = sublayers(c, (3 if cross_attention else 2) - (not c.feed_forward))
        self.parallel_residual = c.parallel_residual
        self.resid_pre = HookPoint()  # the residual stream entering the layer
        self.resid_mid = HookPoint()  # entering the feed-forward sublayer (not in a parallel-residual layer)
        self.resid_post = HookPoint()  # leaving the layer

    def forward(
        self,
        x: torch.Tensor,
        tgt_mask: torch.Tensor,
        memory: torch.Tensor | None = None,
        src_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        x = self.resid_pre(x)  # (B, T, d_model)
        if self.parallel_residual:
            attn, ffn = self.sublayers
            y, z = attn.norm(x), ffn.norm(x)
            out = x + attn.dropout(self.self_attn(y, y, y, tgt_mask)) + ffn.dropout(self.feed_forward(z))
            return self.resid_post(out)
        x = self.sublayers[0](x, lambda y: self.self_attn(y, y, y, tgt_mask))
        if self.cross_attn is not None:
            if memory is None:
                raise ValueError("an encoder–decoder layer needs the encoder memory")
            x = self.sublayers[1](x, lambda y: self.cross_attn(y, memory, memory, src_mask))
        x = self.resid_mid(x)
        return self.resid_post(x if self.feed_forward is None else self.sublayers[-1](x, self.feed_forward))


class Embeddings(nn.Module):
    """Token embedding (+ token type) + position code, optionally normalized, then dropout."""

    def __init__(self, config: TransformerConfig, vocab_size: int) -> None:
        super().__init__()
        c = config
        self.tokens = nn.Embedding(vocab_size, c.d_model)
        self.scale = math.sqrt(c.d_model) if c.scale_embeddings else 1.0
        self.positions: nn.Module | None = {
            "sinusoidal": lambda: SinusoidalEncoding(c.max_len, c.d_model),
            "learned": lambda: LearnedEncoding(c.max_len, c.d_model),
            "rotary": lambda: None,  # rotary positions act inside every attention, not here
            "none": lambda: None,
        }[c.positional]()
        self.token_types = nn.Embedding(c.type_vocab_size, c.d_model) if c.type_vocab_size else None
        self.norm = nn.LayerNorm(c.d_model, eps=c.layer_norm_eps) if c.embedding_norm else None
        self.dropout = nn.Dropout(c.dropout)
        self.max_len = c.max_len

    def forward(
        self, ids: torch.Tensor, token_type_ids: torch.Tensor | None = None, use_positions: bool = True
    ) -> torch.Tensor:
        length = ids.size(1)
        if length > self.max_len:
            raise ValueError(f"{length} tokens exceed the model's maximum of {self.max_len}")
        x = self.tokens(ids)  # (B, T, d_model)
        if self.scale != 1.0:  # BERT and GPT-2 do not scale: skip a pass over (B, T, d_model)
            x = x * self.scale
        if self.positions is not None and use_positions:
            x = x + self.positions(torch.arange(length, device=ids.device))
        if self.token_types is not None:
            types = torch.zeros_like(ids) if token_type_ids is None else token_type_ids
            x = x + self.token_types(types)
        if self.norm is not None:
            x = self.norm(x)
        return self.dropout(x)


def final_norm(config: TransformerConfig) -> nn.Module | None:
    return make_norm(config.d_model, config.norm_type, config.layer_norm_eps) if config.norm == "pre" else None


class Encoder(nn.Module):
    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.embed = Embeddings(config, config.vocab_size)
        self.layers = nn.ModuleList(EncoderLayer(config) for _ in range(config.N))
        # pre-LN leaves the last residual stream unnormalized, so it gets a final LayerNorm
        self.norm = final_norm(config)

    def forward(
        self,
        src: torch.Tensor,
        src_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        use_positions: bool = True,
    ) -> torch.Tensor:
        x = self.embed(src, token_type_ids, use_positions)
        for layer in self.layers:
            x = layer(x, src_mask)
        return self.norm(x) if self.norm is not None else x


class Decoder(nn.Module):
    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        cross = config.shape == "encoder-decoder"
        self.embed = Embeddings(config, config.decoder_vocab_size)
        self.layers = nn.ModuleList(DecoderLayer(config, cross) for _ in range(config.decoder_layers))
        self.norm = final_norm(config)
        bias = config.generator_bias and not config.tie_embeddings
        self.generator = nn.Linear(config.d_model, config.decoder_vocab_size, bias=bias) if config.generator else None
        # each layer's self-attention window (None = the whole causal past)
        self.windows = [
            None if i in config.full_attention_layers else config.sliding_window for i in range(len(self.layers))
        ]
        if config.tie_embeddings and self.generator is not None:
            self.generator.weight = self.embed.tokens.weight

    def forward(
        self,
        tgt: torch.Tensor,
        tgt_mask: torch.Tensor,
        memory: torch.Tensor | None = None,
        src_mask: torch.Tensor | None = None,
        use_positions: bool = True,
    ) -> torch.Tensor:
        x = self.embed(tgt, use_positions=use_positions)
        length = tgt.size(1)
        masks = {
            w: tgt_mask if w is None else tgt_mask & sliding_window_mask(length, w, tgt.device)
            for w in set(self.windows)
        }
        for layer, window in zip(self.layers, self.windows):
            x = layer(x, masks[window], memory, src_mask)
        return self.norm(x) if self.norm is not None else x


def key_mask(key_padding: torch.Tensor | None) -> torch.Tensor | None:
    """(B, Tk) True-for-real-token → (B, 1, 1, Tk), broadcast over heads and queries."""
    return None if key_padding is None else key_padding[:, None, None, :].bool()


def decoder_mask(length: int, key_padding: torch.Tensor | None, device: torch.device) -> torch.Tensor:
    """Causal mask, further restricted to real target tokens when the batch is padded: (B|1, 1, T, T)."""
    mask = causal_mask(length, device)[None, None]
    return mask if key_padding is None else mask & key_mask(key_padding)


class Transformer(nn.Module):
    """One model class for the three shapes; ``encoder`` and/or ``decoder`` exist as the shape needs.

    ``src_padding`` / ``tgt_padding`` are (B, T) booleans, True for real tokens, False for padding.
    """

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.config = config
        self.encoder = Encoder(config) if config.has_encoder else None
        self.decoder = Decoder(config) if config.has_decoder else None
        self.hook_names = name_hook_points(self)

    def encode(
        self,
        src: torch.Tensor,
        src_padding: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        use_positions: bool = True,
    ) -> torch.Tensor:
        """src (B, S) ids → memory (B, S, d_model)."""
        if self.encoder is None:
            raise ValueError("a decoder-only model has no encoder")
        return self.encoder(src, key_mask(src_padding), token_type_ids, use_positions)

    def decode(
        self,
        tgt: torch.Tensor,
        memory: torch.Tensor | None = None,
        src_padding: torch.Tensor | None = None,
        tgt_padding: torch.Tensor | None = None,
        use_positions: bool = True,
    ) -> torch.Tensor:
        """tgt (B, T) ids → hidden states (B, T, d_model); position t sees targets 0..t only."""
        if self.decoder is None:
            raise ValueError("an encoder-only model has no decoder")
        tgt_mask = decoder_mask(tgt.size(1), tgt_padding, tgt.device)
        return self.decoder(tgt, tgt_mask, memory, key_mask(src_padding), use_positions)

    def forward(
        self,
        src: torch.Tensor | None = None,
        tgt: torch.Tensor | None = None,
        src_padding: torch.Tensor | None = None,
        tgt_padding: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        use_positions: bool = True,
    ) -> torch.Tensor:
        """Final hidden states: the encoder's (encoder-only) or the decoder's (other shapes).

        Encoder–decoder runs are teacher-forced: the whole target is given at once.
        """
        shape = self.config.shape
        if shape == "encoder-only":
            return self.encode(src, src_padding, token_type_ids, use_positions)
        if shape == "decoder-only":
            return self.decode(tgt if tgt is not None else src, None, None, tgt_padding, use_positions)
        if src is None or tgt is None:
            raise ValueError("an encoder–decoder model needs both src and tgt")
        memory = self.encode(src, src_padding, use_positions=use_positions)
        return self.decode(tgt, memory, src_padding, tgt_padding, use_positions)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        if self.decoder is None or self.decoder.generator is None:
            raise ValueError("this model has no output vocabulary (an encoder, or a checkpoint without its LM head)")
        return self.decoder.generator(hidden)

    @torch.no_grad()
    def greedy_decode(
        self, prefix: torch.Tensor, max_new_tokens: int, eos_id: int | None = None, src: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Append the most likely next token, one step at a time (the inference data flow).

        ``prefix`` (1, T0): the start token (encoder–decoder) or the prompt (decoder-only).
        ``src`` (1, S): the source sentence, encoded once. Each step re-runs the decoder on the
        whole prefix (no key/value cache) so a capture sees every step's full causal pattern.
        """
        memory = self.encode(src) if self.config.shape == "encoder-decoder" else None
        ys = prefix
        for _ in range(max_new_tokens):
            if ys.size(1) >= self.config.max_len:
                break
            hidden = self.decode(ys, memory)
            next_id = self.logits(hidden[:, -1]).argmax(-1, keepdim=True)  # (1, 1)
            ys = torch.cat([ys, next_id], dim=1)
            if eos_id is not None and int(next_id) == eos_id:
                break
        return ys
