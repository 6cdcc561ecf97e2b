"""A decoder-only run of our Transformer taken apart into what its residual stream sums (Elhage et
al. 2021, "A Mathematical Framework for Transformer Circuits"): the embeddings, each head's output
(its context times its rows of W_O), each attention's output bias, and each MLP's output.

One forward with capture (``resid_pre`` and ``context`` at every layer, through
:func:`attention_viz.core.hooks.capture`) gives the stream entering every layer and what every head
read before W_O; the attention and MLP outputs are then recomputed from those with the layer's own
modules, position by position, so the pieces are the model's own numbers. Direct logit attribution
and the logit lens read the final norm and the unembedding of :func:`decoder_with_unembedding`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..core.hooks import capture
from ..core.model import DecoderLayer, Transformer
from ..core.names import DECODER_SELF, hook_name, layer_hook_name
from ..errors import ModelError
from .base import Backend
from .patch_sides import patchable_model


def decoder_with_unembedding(backend: Backend, what: str) -> Transformer:
    """The backend's decoder-only Transformer with a final norm and an LM head; a ModelError in one
    sentence for any other model (``what``: the analysis, as the sentence names it)."""
    if backend.implementation == "transformers":
        raise ModelError(f"{what} runs on models in our own Transformer; {backend.name} runs in transformers")
    if backend.shape == "encoder-only":
        raise ModelError(f"{backend.name} is a sentence encoder with no unembedding: {what} needs a decoder's "
                         "next-token logits")
    if backend.shape != "decoder-only":
        raise ModelError(f"{what} runs on decoder-only models; {backend.name} is {backend.shape}")
    model = patchable_model(backend)
    if model.decoder.generator is None:
        raise ModelError(f"{backend.name} has no LM head: {what} needs its unembedding")
    if model.decoder.norm is None:
        raise ModelError(f"{what} needs a pre-LN decoder (a final norm over the whole residual stream); "
                         f"{backend.name} normalizes after each sublayer")
    return model


@dataclass(frozen=True)
class Stream:
    """One run's residual stream: ``entering[l]`` the stream entering layer l (``entering[0]`` the
    embeddings: tokens plus learned or sinusoidal positions) and ``contexts[l]`` what layer l's heads
    read before W_O, all for batch item 0."""

    model: Transformer
    entering: list[torch.Tensor]  # N × (T, d_model)
    contexts: list[torch.Tensor]  # N × (h, T, d_k)

    def layer(self, i: int) -> DecoderLayer:
        return self.model.decoder.layers[i]

    def heads_out(self, i: int, positions: slice | list[int]) -> torch.Tensor:
        """Each head's output at ``positions``: its context times its rows of W_O, no bias: (h, P, d_model)."""
        attn = self.layer(i).self_attn
        rows = attn.w_o.weight.T.reshape(attn.h, attn.d_k, -1)  # (h, d_k, d_model)
        return torch.einsum("hpk,hkd->hpd", self.contexts[i][:, positions], rows)

    def attention_bias(self, i: int) -> torch.Tensor | None:
        return self.layer(i).self_attn.w_o.bias

    def attention_out(self, i: int, positions: slice | list[int]) -> torch.Tensor:
        """What layer i's attention adds to the stream at ``positions``: (P, d_model)."""
        attn = self.layer(i).self_attn
        context = self.contexts[i][:, positions]  # (h, P, d_k)
        return attn.w_o(context.transpose(0, 1).reshape(context.size(1), attn.h * attn.d_k))

    def mlp_out(self, i: int, positions: slice | list[int]) -> torch.Tensor | None:
        """What layer i's MLP adds to the stream at ``positions`` (None: an attention-only layer)."""
        layer = self.layer(i)
        if layer.feed_forward is None:
            return None
        x = self.entering[i][positions]
        if not layer.parallel_residual:  # the MLP reads the stream after this layer's attention
            x = x + self.attention_out(i, positions)
        return layer.feed_forward(layer.sublayers[-1].norm(x))

    def leaving(self, i: int, positions: slice | list[int] = slice(None)) -> torch.Tensor:
        """The stream after layer i at ``positions`` (the last layer's is what the final norm reads)."""
        if i + 1 < len(self.entering):
            return self.entering[i + 1][positions]
        out = self.entering[i][positions] + self.attention_out(i, positions)
        mlp = self.mlp_out(i, positions)
        return out if mlp is None else out + mlp


def residual_stream(model: Transformer, ids: torch.Tensor) -> Stream:
    """One forward of ``ids`` (1, T) through the decoder-only ``model``, its stream kept. Call it,
    and the methods of what it returns, under ``torch.inference_mode()``: nothing here needs gradients."""
    layers = range(len(model.decoder.layers))
    entering_names = [layer_hook_name("decoder", i) for i in layers]
    context_names = [hook_name(DECODER_SELF, i, "context") for i in layers]
    with capture(kinds=("resid_pre", "context"), names=entering_names + context_names) as recorded:
        model(ids)
    return Stream(model, [recorded[n][0] for n in entering_names], [recorded[n][0] for n in context_names])
