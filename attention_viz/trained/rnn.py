"""The RNN encoder–decoders attention grew out of: a GRU with Bahdanau attention, and the GRU without it.

* ``attention=True`` — Bahdanau et al. 2015 ("Neural machine translation by jointly learning to
  align and translate"). A bidirectional GRU reads the source into states ``h_1 .. h_S``
  (``memory``). At decoder step ``i`` the previous decoder state ``s_{i-1}`` scores every
  ``h_j`` with the additive function ``e_ij = v_aᵀ tanh(W_a s_{i-1} + U_a h_j)``, a softmax turns
  the scores into the weights ``a_ij`` (the alignment), and the context ``c_i = Σ_j a_ij h_j``
  enters the next state ``s_i = GRU([y_{i-1}; c_i], s_{i-1})`` and the output layer. The math is
  :func:`attention_viz.core.attention.additive_attention`; this module only holds the weights.
* ``attention=False`` — Cho et al. 2014: one fixed context vector ``c`` (the encoder's final
  forward and backward states) is handed to every decoder step. Everything the decoder knows
  about the source must fit into ``c``: the long-sentence problem that Bahdanau et al. 2015 set out to solve.

Hook names follow the Transformer's: the attention weights of all decoder steps are captured as
``decoder.layers.0.cross_attn.pattern`` (and ``.scores``), shape ``(B, 1 head, target, source)``,
named from the module path by :func:`name_hook_points`. Row ``i`` (0-based) is the step that
reads decoder input ``i`` (``<bos>`` first) and predicts the next word, as row ``i`` of the
Transformer's cross-attention, which reads decoder inputs ``0..i``. The
recurrence computes one row per step, so the hooks fire once per forward with every row stacked
(teacher forcing), or once per greedy step with the rows so far (inference): in both cases the
last call holds the whole matrix. The no-attention model has no attention hooks at all.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from ..core.attention import Attention, additive_attention
from ..core.hooks import HookPoint, capture_active, name_hook_points


@dataclass(frozen=True)
class RNNConfig:
    """Sizes of the GRU encoder–decoder (the same for both variants, so they compare fairly)."""

    vocab_size: int  # source vocabulary
    tgt_vocab_size: int
    d_emb: int = 128  # word embeddings, both sides
    d_enc: int = 128  # encoder GRU, per direction (memory is 2 × d_enc)
    d_dec: int = 256  # decoder GRU state
    d_att: int = 128  # hidden size of the additive scoring MLP
    d_out: int = 256  # the output layer's hidden size
    attention: bool = True  # False: one fixed context vector (no attention)
    dropout: float = 0.1
    max_len: int = 64  # longest source, and longest decoder input (<bos> included)
    pad_id: int = 0

    def __post_init__(self) -> None:
        for name in ("vocab_size", "tgt_vocab_size", "d_emb", "d_enc", "d_dec", "d_att", "d_out", "max_len"):
            if getattr(self, name) < 1:
                raise ValueError(f"invalid RNNConfig: {name} must be positive")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"invalid RNNConfig: dropout must be in [0, 1), got {self.dropout}")

    @property
    def d_memory(self) -> int:
        return 2 * self.d_enc

    @property
    def decoder_vocab_size(self) -> int:  # the Transformer config's name for it
        return self.tgt_vocab_size


class AdditiveAttention(nn.Module):
    """The weights of Bahdanau's alignment model; the math is :func:`additive_attention`."""

    def __init__(self, d_query: int, d_key: int, d_att: int) -> None:
        super().__init__()
        self.w_q = nn.Parameter(torch.empty(d_att, d_query))  # W_a
        self.w_k = nn.Parameter(torch.empty(d_att, d_key))  # U_a
        self.w_v = nn.Parameter(torch.empty(d_att))  # v_a
        nn.init.xavier_uniform_(self.w_q)
        nn.init.xavier_uniform_(self.w_k)
        nn.init.uniform_(self.w_v, -0.1, 0.1)
        self.scores, self.pattern = HookPoint(), HookPoint()

    def forward(self, query: torch.Tensor, memory: torch.Tensor, mask: torch.Tensor | None) -> Attention:
        """query (B, Tq, d_dec), memory (B, S, d_memory), mask (B, 1, S) → context (B, Tq, d_memory)."""
        return additive_attention(query, memory, memory, self.w_q, self.w_k, self.w_v, mask)

    def record(self, scores: list[torch.Tensor], pattern: list[torch.Tensor]) -> None:
        """Hand the rows computed so far, one (B, 1, S) per step, to the hook points as (B, 1, T, S)."""
        if not capture_active():  # nobody listens: skip the copies (training)
            return
        self.scores(torch.cat(scores, dim=1).unsqueeze(1))  # (B, 1 head, T, S)
        self.pattern(torch.cat(pattern, dim=1).unsqueeze(1))  # (B, 1 head, T, S)


class RNNEncoder(nn.Module):
    def __init__(self, c: RNNConfig) -> None:
        super().__init__()
        self.embed = nn.Embedding(c.vocab_size, c.d_emb, padding_idx=c.pad_id)
        self.gru = nn.GRU(c.d_emb, c.d_enc, batch_first=True, bidirectional=True)
        self.dropout = nn.Dropout(c.dropout)

    def forward(self, src: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """src (B, S) → memory (B, S, 2 d_enc) and summary (B, 2 d_enc) = [last forward; first backward]."""
        x = self.dropout(self.embed(src))  # (B, S, d_emb)
        packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
        out, final = self.gru(packed)  # final (2, B, d_enc)
        memory, _ = pad_packed_sequence(out, batch_first=True, total_length=src.size(1))
        return memory, torch.cat([final[0], final[1]], dim=-1)


class RNNDecoderLayer(nn.Module):
    """The recurrent cell and, with attention, the alignment model over the encoder memory."""

    def __init__(self, c: RNNConfig) -> None:
        super().__init__()
        self.cross_attn = AdditiveAttention(c.d_dec, c.d_memory, c.d_att) if c.attention else None
        self.gru = nn.GRUCell(c.d_emb + c.d_memory, c.d_dec)


class RNNDecoder(nn.Module):
    def __init__(self, c: RNNConfig) -> None:
        super().__init__()
        self.embed = nn.Embedding(c.tgt_vocab_size, c.d_emb, padding_idx=c.pad_id)
        self.bridge = nn.Linear(c.d_memory, c.d_dec)  # s_0 = tanh(W_s [h→_S; h←_1])
        self.layers = nn.ModuleList([RNNDecoderLayer(c)])
        self.out = nn.Linear(c.d_dec + c.d_memory + c.d_emb, c.d_out)  # "deep output" from s_i, c_i, y_{i-1}
        self.generator = nn.Linear(c.d_out, c.tgt_vocab_size)
        self.dropout = nn.Dropout(c.dropout)

    def initial_state(self, summary: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.bridge(summary))  # (B, d_dec)

    def step(
        self,
        y_prev: torch.Tensor,
        state: torch.Tensor,
        memory: torch.Tensor,
        summary: torch.Tensor,
        mask: torch.Tensor | None,
    ) -> tuple[torch.Tensor, torch.Tensor, Attention | None]:
        """One decoder step: y_prev (B,), state s_{i-1} (B, d_dec) → logits (B, V), s_i, attention row."""
        layer = self.layers[0]
        emb = self.dropout(self.embed(y_prev))  # (B, d_emb)
        if layer.cross_attn is not None:
            att = layer.cross_attn(state.unsqueeze(1), memory, mask)  # rows (B, 1, S)
            context = att.context.squeeze(1)  # (B, d_memory)
        else:
            att, context = None, summary  # the one fixed context vector
        state = layer.gru(torch.cat([emb, context], dim=-1), state)  # (B, d_dec)
        hidden = torch.tanh(self.out(torch.cat([state, context, emb], dim=-1)))  # (B, d_out)
        return self.generator(self.dropout(hidden)), state, att


class RNNSeq2Seq(nn.Module):
    """GRU encoder–decoder, with (Bahdanau) or without attention. The decoding interface
    (``start`` / ``step`` / ``teacher_forced``) is :class:`TranslationTransformer`'s."""

    kinds = ("scores", "pattern")  # additive attention has no q, k, v or context heads
    multi_head = False  # one additive attention: nothing to remove; batches run row by row

    def __init__(self, config: RNNConfig) -> None:
        super().__init__()
        self.config = config
        self.encoder = RNNEncoder(config)
        self.decoder = RNNDecoder(config)
        self.hook_names = name_hook_points(self)

    @property
    def cross_attn(self) -> AdditiveAttention | None:
        return self.decoder.layers[0].cross_attn

    def encode(
        self, src: torch.Tensor, src_padding: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """src (B, S) → (memory (B, S, d_memory), summary (B, d_memory), attention mask (B, 1, S) or None)."""
        if src_padding is None:
            lengths = torch.full((src.size(0),), src.size(1), dtype=torch.long)
            mask = None
        else:
            lengths = src_padding.sum(-1)
            mask = src_padding[:, None, :].bool()
        memory, summary = self.encoder(src, lengths)
        return memory, summary, mask

    def forward(
        self,
        src: torch.Tensor,
        tgt: torch.Tensor,
        src_padding: torch.Tensor | None = None,
        tgt_padding: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Teacher forcing (the training data flow): tgt (B, T) = ``<bos> y_1 .. y_{T-1}`` → logits (B, T, V).

        ``tgt_padding`` is accepted for symmetry with the Transformer; padded rows are computed
        and ignored by the loss (a recurrence never looks ahead, so they change nothing before them).
        """
        memory, summary, mask = self.encode(src, src_padding)
        state = self.decoder.initial_state(summary)
        logits, scores, pattern = [], [], []
        for i in range(tgt.size(1)):
            step_logits, state, att = self.decoder.step(tgt[:, i], state, memory, summary, mask)
            logits.append(step_logits)
            if att is not None:
                scores.append(att.scores)
                pattern.append(att.pattern)
        if self.cross_attn is not None:
            self.cross_attn.record(scores, pattern)
        return torch.stack(logits, dim=1)  # (B, T, V)

    def teacher_forced(
        self,
        src: torch.Tensor,
        tgt: torch.Tensor,
        src_padding: torch.Tensor | None = None,
        tgt_padding: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """(B, T, V) next-word logits for every decoder input position (= ``forward``)."""
        return self(src, tgt, src_padding, tgt_padding)

    def decoder_states(self, src: torch.Tensor, tgt: torch.Tensor) -> tuple[None, torch.Tensor]:
        """No states to compare (a GRU's hidden state is not a Transformer's residual stream); the logits."""
        return None, self(src, tgt)

    def start(self, src: torch.Tensor, src_padding: torch.Tensor | None = None) -> RNNDecoding:
        """Encode the source once and set the decoder's first state ``s_0``."""
        memory, summary, mask = self.encode(src, src_padding)
        return RNNDecoding(memory, summary, mask, self.decoder.initial_state(summary))

    def step(self, state: RNNDecoding, ys: torch.Tensor) -> tuple[torch.Tensor, RNNDecoding]:
        """Next-word logits (B, V) after the prefix ``ys`` (B, t): one recurrence step on its last word.

        Inside a capture the attention hooks fire after every step with all rows so far, as the
        Transformer's re-run of the whole prefix does.
        """
        logits, hidden, att = self.decoder.step(ys[:, -1], state.hidden, state.memory, state.summary, state.mask)
        scores, pattern = state.scores, state.pattern
        if att is not None and self.cross_attn is not None:
            scores, pattern = [*scores, att.scores], [*pattern, att.pattern]
            self.cross_attn.record(scores, pattern)
        return logits, RNNDecoding(state.memory, state.summary, state.mask, hidden, scores, pattern)


@dataclass(frozen=True)
class RNNDecoding:
    """What greedy decoding carries from step to step: the encoded source, ``s_{i-1}``, and the
    attention rows so far (handed to the hooks as one matrix)."""

    memory: torch.Tensor  # (B, S, d_memory)
    summary: torch.Tensor  # (B, d_memory)
    mask: torch.Tensor | None  # (B, 1, S)
    hidden: torch.Tensor  # (B, d_dec)
    scores: list[torch.Tensor] = field(default_factory=list)
    pattern: list[torch.Tensor] = field(default_factory=list)
