"""Show, Attend and Tell (Xu et al. 2015): a CNN encoder, and an LSTM decoder with soft
("deterministic") attention over the image regions.

* Encoder. Three conv–BatchNorm–ReLU–maxpool stages turn the 64×64 image into a ``grid × grid``
  map (8×8); each cell is one region's annotation vector ``a_i`` (``L = 64`` regions of 8×8
  pixels, ``D = d_feat``). Batch normalization gives unit-scale features from the first step:
  without it the stack sits for hundreds of steps on captions that ignore the image. The paper
  takes VGG's conv5 features, whose zero padding tells a region where it is; our shallow encoder
  gets two coordinate channels on the pixels (CoordConv, Liu et al. 2018: where inside its
  region a shape sits) and a learned embedding per region.
* Decoder (the paper's section 3.1.2 and 4.2). ``h_0, c_0`` come from the mean annotation.
  At step ``t`` the previous state ``h_{t-1}`` scores every region with the additive function
  ``e_ti = w_vᵀ tanh(W_q h_{t-1} + W_k a_i)`` (:func:`attention_viz.attention.additive_attention`),
  ``α_t = softmax(e_t)``, and the context is ``ẑ_t = β_t Σ_i α_ti a_i`` with the gating scalar
  ``β_t = σ(f_β(h_{t-1}))``. The LSTM reads ``[E y_{t-1}; ẑ_t]``; the word comes from the deep
  output ``L_o(E y_{t-1} + L_h h_t + L_z ẑ_t)``.
* Context dropout (training only, ours): with chance ``context_dropout`` a step's ``ẑ_t`` does
  not enter the LSTM. Without it the model reads an object's colour and shape in one look, at
  the colour word, and writes the shape from memory while looking at the background (shape
  words' peak in box under 2 %); with memory of a look unreliable it looks again (87.6 %).
* Doubly stochastic regularization (eq. 14): ``λ Σ_i (1 − Σ_t α_ti)²`` added to the loss
  (:func:`doubly_stochastic_penalty`), nudging the model to look at every part of the image
  over the course of the caption.

Hook names follow the RNN translator's: the attention of every step is captured as
``decoder.layers.0.cross_attn.pattern`` (and ``.scores``), shape ``(B, 1 head, steps, regions)``,
named from the module path; keys are the regions in row-major order (region ``r * grid + c``).
Row ``t`` is the map ``α_t`` used to emit word ``t`` (after reading ``<bos>`` + words ``< t``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

from ..core.hooks import name_hook_points
from .rnn import AdditiveAttention


@dataclass(frozen=True)
class CaptionerConfig:
    vocab_size: int
    image_size: int = 64
    channels: tuple[int, ...] = (16, 32, 64)  # one conv–ReLU–maxpool stage each: 64 → 8 pixels
    coords: bool = True  # CoordConv: x and y in [-1, 1] as two more input channels
    batch_norm: bool = True  # conv–BatchNorm–ReLU
    d_feat: int = 64  # D, the size of an annotation vector
    d_emb: int = 32  # word embeddings (E)
    d_dec: int = 256  # LSTM state
    d_att: int = 64  # hidden size of the additive scoring MLP
    max_len: int = 16  # longest decoder input, <bos> included
    dropout: float = 0.1
    # training only: the chance that a step's context ẑ_t does not enter the LSTM (the whole
    # vector, per scene), so what the model saw one word earlier is unreliable memory and each
    # word's evidence is best read when the word is written
    context_dropout: float = 0.0
    pad_id: int = 0
    mean: tuple[float, ...] = field(default=(0.5, 0.5, 0.5))  # pixel normalization, per channel

    def __post_init__(self) -> None:
        object.__setattr__(self, "channels", tuple(int(c) for c in self.channels))  # JSON gives lists
        object.__setattr__(self, "mean", tuple(float(m) for m in self.mean))
        for name in ("vocab_size", "image_size", "d_feat", "d_emb", "d_dec", "d_att", "max_len"):
            if getattr(self, name) < 1:
                raise ValueError(f"invalid CaptionerConfig: {name} must be positive")
        if not self.channels or self.image_size % (2 ** len(self.channels)):
            raise ValueError("invalid CaptionerConfig: image_size must halve evenly once per stage")
        for name in ("dropout", "context_dropout"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ValueError(f"invalid CaptionerConfig: {name} must be in [0, 1), got {getattr(self, name)}")

    @property
    def grid(self) -> int:
        return self.image_size // 2 ** len(self.channels)

    @property
    def regions(self) -> int:
        return self.grid * self.grid


class ImageEncoder(nn.Module):
    """image (B, 3, H, W) uint8-valued floats in [0, 255] → annotations (B, L, D), row-major regions."""

    def __init__(self, c: CaptionerConfig) -> None:
        super().__init__()
        stages: list[nn.Module] = []
        previous = 3 + 2 * c.coords
        for width in c.channels:
            norm = [nn.BatchNorm2d(width)] if c.batch_norm else []  # BatchNorm has its own bias
            stages += [nn.Conv2d(previous, width, 3, padding=1, bias=not c.batch_norm), *norm, nn.ReLU(),
                       nn.MaxPool2d(2)]
            previous = width
        self.cnn = nn.Sequential(*stages)
        self.project = nn.Conv2d(previous, c.d_feat, 1)
        self.position = nn.Parameter(torch.zeros(c.regions, c.d_feat))  # where each region is
        nn.init.normal_(self.position, std=0.1)
        self.register_buffer("mean", torch.tensor(c.mean).view(1, 3, 1, 1), persistent=False)
        ramp = torch.linspace(-1.0, 1.0, c.image_size)
        xy = torch.stack([ramp.expand(c.image_size, -1), ramp.unsqueeze(1).expand(-1, c.image_size)])
        self.register_buffer("xy", xy.unsqueeze(0) if c.coords else None, persistent=False)  # (1, 2, H, W)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        x = image / 255.0 - self.mean
        if self.xy is not None:
            x = torch.cat([x, self.xy.expand(x.size(0), -1, -1, -1)], dim=1)  # (B, 5, H, W)
        features = self.project(self.cnn(x))  # (B, D, grid, grid)
        return features.flatten(2).transpose(1, 2) + self.position  # (B, L, D)


class CaptionDecoderLayer(nn.Module):
    """The recurrent cell and the attention over the regions (named like the translators')."""

    def __init__(self, c: CaptionerConfig) -> None:
        super().__init__()
        self.cross_attn = AdditiveAttention(c.d_dec, c.d_feat, c.d_att)
        self.gate = nn.Linear(c.d_dec, 1)  # f_β: how much of the context enters the step
        self.lstm = nn.LSTMCell(c.d_emb + c.d_feat, c.d_dec)


class CaptionDecoder(nn.Module):
    def __init__(self, c: CaptionerConfig) -> None:
        super().__init__()
        self.embed = nn.Embedding(c.vocab_size, c.d_emb, padding_idx=c.pad_id)
        self.init_h = nn.Linear(c.d_feat, c.d_dec)
        self.init_c = nn.Linear(c.d_feat, c.d_dec)
        self.layers = nn.ModuleList([CaptionDecoderLayer(c)])
        self.out_h = nn.Linear(c.d_dec, c.d_emb)  # L_h
        self.out_z = nn.Linear(c.d_feat, c.d_emb)  # L_z
        self.generator = nn.Linear(c.d_emb, c.vocab_size)  # L_o
        self.dropout = nn.Dropout(c.dropout)
        self.context_dropout = c.context_dropout

    def initial_state(self, annotations: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean = annotations.mean(1)  # (B, D)
        return torch.tanh(self.init_h(mean)), torch.tanh(self.init_c(mean))

    def step(
        self, y_prev: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor], annotations: torch.Tensor
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor], torch.Tensor, torch.Tensor]:
        """y_prev (B,), state (h, c) → logits (B, V), new state, α_t (B, 1, L), scores e_t (B, 1, L)."""
        layer = self.layers[0]
        h, c = state
        emb = self.embed(y_prev)  # (B, d_emb)
        att = layer.cross_attn(h.unsqueeze(1), annotations, None)
        beta = torch.sigmoid(layer.gate(h))  # (B, 1)
        z = beta * att.context.squeeze(1)  # (B, D)
        remembered = z
        if self.training and self.context_dropout:
            kept = torch.rand(z.size(0), 1) >= self.context_dropout  # (B, 1)
            remembered = z * kept / (1.0 - self.context_dropout)
        h, c = layer.lstm(torch.cat([emb, remembered], dim=-1), (h, c))
        hidden = emb + self.out_h(self.dropout(h)) + self.out_z(z)  # deep output (eq. 7)
        return self.generator(self.dropout(hidden)), (h, c), att.pattern, att.scores


class ShowAttendTell(nn.Module):
    """Encoder, decoder and the two data flows: teacher forcing (``forward``) and greedy decoding."""

    def __init__(self, config: CaptionerConfig) -> None:
        super().__init__()
        self.config = config
        self.encoder = ImageEncoder(config)
        self.decoder = CaptionDecoder(config)
        self.hook_names = name_hook_points(self)

    @property
    def cross_attn(self) -> AdditiveAttention:
        return self.decoder.layers[0].cross_attn

    def forward(self, image: torch.Tensor, tgt: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Teacher forcing: image (B, 3, H, W), tgt (B, T) = ``<bos> y_1 .. y_{T-1}`` →
        logits (B, T, V) and the attention of every step α (B, T, L)."""
        annotations = self.encoder(image)
        state = self.decoder.initial_state(annotations)
        logits, scores, pattern = [], [], []
        for t in range(tgt.size(1)):
            step_logits, state, alpha, e = self.decoder.step(tgt[:, t], state, annotations)
            logits.append(step_logits)
            pattern.append(alpha)
            scores.append(e)
        self.cross_attn.record(scores, pattern)
        return torch.stack(logits, dim=1), torch.cat(pattern, dim=1)

    @torch.no_grad()
    def greedy_decode(self, image: torch.Tensor, bos_id: int, eos_id: int) -> torch.Tensor:
        """The inference data flow: ``<bos>`` then the most likely word, fed back, until every row
        has produced ``eos_id`` or the decoder input reaches ``max_len``. Returns (B, 1 + steps).
        Inside a capture the attention hooks fire after every step with all rows so far."""
        annotations = self.encoder(image)
        state = self.decoder.initial_state(annotations)
        ys = torch.full((image.size(0), 1), bos_id, dtype=torch.long)
        done = torch.zeros(image.size(0), dtype=torch.bool)
        scores, pattern = [], []
        while ys.size(1) < self.config.max_len and not bool(done.all()):
            logits, state, alpha, e = self.decoder.step(ys[:, -1], state, annotations)
            next_id = logits.argmax(-1, keepdim=True)  # (B, 1)
            ys = torch.cat([ys, next_id], dim=1)
            pattern.append(alpha)
            scores.append(e)
            self.cross_attn.record(scores, pattern)
            done |= next_id.squeeze(1) == eos_id
        return ys


def doubly_stochastic_penalty(alpha: torch.Tensor, steps: torch.Tensor) -> torch.Tensor:
    """Σ_i (1 − Σ_t α_ti)² per caption (eq. 14), averaged over the batch.

    alpha (B, T, L); steps (B, T) bool: which steps are real (not padding after ``<eos>``).
    """
    coverage = (alpha * steps.unsqueeze(-1)).sum(1)  # (B, L): attention each region got in total
    return ((1.0 - coverage) ** 2).sum(-1).mean()


def images_to_tensor(images: list) -> torch.Tensor:
    """uint8 (H, W, 3) arrays → float (B, 3, H, W) in [0, 255]."""
    return torch.stack([torch.from_numpy(image).permute(2, 0, 1) for image in images]).float()
