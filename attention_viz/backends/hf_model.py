"""A loaded ``transformers`` model whose attention runs through our registered function
(:mod:`attention_viz.backends.hf_attention`): which modules are which attention, how many heads each
has, where its output projection is, and the forward the runners (ablation, patching, value zeroing)
call — the same questions they ask our own Transformer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from ..core.names import CROSS, GROUPS, Group
from ..errors import ModelError
from . import hf_attention
from .hf_attention import Site

# The output projection W_O of an attention, by the names families give it: in the attention module
# itself, else in its parent (BERT and ViT keep it in a sibling "output" module).
OWN_OUTPUT = ("o_proj", "out_proj", "o", "c_proj", "dense")
PARENT_OUTPUT = ("output.dense", "dense")


@dataclass
class RegistryModel:
    """``model`` (eval mode) with every attention the registry calls named and hooked."""

    model: nn.Module
    shape: str  # "encoder-only" | "decoder-only" | "encoder-decoder"
    sites: list[Site]

    @classmethod
    def attach(cls, model: nn.Module, shape: str, probe_run: Callable[[], object], decoder_length: int,
               name: str) -> RegistryModel | None:
        """Name and hook ``model``'s attentions from one probe forward; None when none of them goes
        through the registry (its family computes attention in code of its own)."""
        calls = hf_attention.probe(probe_run)
        if not calls:
            return None
        sites = hf_attention.name_sites(model, calls, shape, decoder_length)
        if shape != "encoder-decoder" and any(site.group == CROSS for site in sites):
            raise ModelError(f"{name}: an attention reads another input than its own ({shape})")
        hf_attention.attach(model, sites)
        return cls(model, shape, sites)

    def site(self, group: Group, layer: int) -> Site | None:
        return next((s for s in self.sites if s.group == group and s.layer == layer), None)

    def layers(self, group: Group) -> int:
        return sum(1 for s in self.sites if s.group == group)

    def groups(self) -> list[Group]:
        return [g for g in GROUPS if self.layers(g)]

    def module(self, site: Site) -> nn.Module:
        return self.model.get_submodule(site.path)

    def heads(self, group: Group, layer: int) -> int:
        """Query heads of one attention (read from the module, as each family names it)."""
        site = self.site(group, layer)
        if site is None:
            return 0
        module = self.module(site)
        config = self.model.config
        for source, attribute in ((module, "num_heads"), (module, "num_attention_heads"), (module, "n_heads"),
                                  (module, "n_head"), (config, "num_attention_heads")):
            value = getattr(source, attribute, None)
            if isinstance(value, int) and value > 0:
                return value
        raise ModelError(f"cannot tell the number of heads of {site.path}")

    def output_projection(self, group: Group, layer: int) -> np.ndarray | None:
        """W_O as ``(h·d_head, d_model)`` for ``x W_O``, or None where the family hides it."""
        projection = self.projection(group, layer)
        if projection is None:
            return None
        # nn.Linear keeps (out, in); GPT-2's Conv1D keeps (in, out)
        matrix = projection.weight.T if isinstance(projection, nn.Linear) else projection.weight
        return matrix.detach().float().cpu().numpy().copy()

    def output_bias(self, group: Group, layer: int) -> np.ndarray | None:
        """b_O ``(d_model,)``, or None where W_O has no bias."""
        projection = self.projection(group, layer)
        bias = None if projection is None else getattr(projection, "bias", None)
        return None if bias is None else bias.detach().float().cpu().numpy().copy()

    def projection(self, group: Group, layer: int) -> nn.Module | None:
        """The module that applies W_O to the heads' contexts side by side."""
        site = self.site(group, layer)
        if site is None:
            return None
        module = self.module(site)
        parent = self.model.get_submodule(site.path.rsplit(".", 1)[0]) if "." in site.path else None
        for owner, names in ((module, OWN_OUTPUT), (parent, PARENT_OUTPUT)):
            for name in names:
                try:
                    projection = owner.get_submodule(name) if owner is not None else None
                except AttributeError:
                    continue
                weight = getattr(projection, "weight", None)
                if weight is not None and weight.dim() == 2:
                    return projection
        return None

    # -- what the patching runner asks of a model (backends/patching.py) ---------------------------

    @property
    def has_lm_head(self) -> bool:
        return self.shape == "decoder-only" and self.model.get_output_embeddings() is not None

    def __call__(self, ids: torch.Tensor, decoder_ids: torch.Tensor | None = None) -> torch.Tensor:
        """A batch of token ids (B, T) → what a metric reads: the last position's logits (B, 1, V) for a
        decoder (transformers' own head, its final soft-capping and logit scale included) or an
        encoder–decoder teacher-forced on ``decoder_ids``, the final hidden states (B, T, d_model) for
        an encoder."""
        if self.shape == "decoder-only":
            return self.model(input_ids=ids, use_cache=False, logits_to_keep=1).logits
        if self.shape == "encoder-decoder":
            return self.model(input_ids=ids, decoder_input_ids=decoder_ids, use_cache=False).logits[:, -1:]
        return self.model(input_ids=ids).last_hidden_state

    def widest(self, length: int) -> int:
        """Floats of one run's widest activation: the (h, T, T) scores or the feed-forward's (T, d_ff)."""
        config = self.model.config
        heads = max((self.heads(s.group, s.layer) for s in self.sites), default=1)
        width = max(int(getattr(config, name, 0) or 0) for name in ("intermediate_size", "d_ff", "n_inner",
                                                                     "hidden_size", "d_model", "n_embd"))
        vocab = int(getattr(config, "vocab_size", 0) or 0) if self.shape != "encoder-only" else 0
        return max(heads * length * length * 3, length * width * 4, vocab)

    # -- where the norms sit around an attention (what ALTI linearizes) ---------------------------

    def norm_layout(self, site: Site) -> tuple[str, nn.Module | None]:
        """("pre", None): the norm is inside the sublayer, on its input (Llama, Mistral, Qwen, Phi-3,
        GPT-2 …); ("sandwich", norm): an RMSNorm on the attention's output before the residual (Gemma
        2/3, OLMo 2); ("post", norm): a LayerNorm after the residual (BERT). A ModelError names what
        is not one of these (a parallel feed-forward, an unknown layer)."""
        layer = self.model.get_submodule(hf_attention.layer_path(site.path))
        parent = self.model.get_submodule(site.path.rsplit(".", 1)[0])
        names = {name for name, _ in layer.named_children()}
        output = getattr(parent, "output", None)
        if output is not None and isinstance(getattr(output, "LayerNorm", None), nn.Module):
            return "post", output.LayerNorm  # BERT-style: LayerNorm(x + attention)
        parallel = getattr(self.model.config, "use_parallel_residual", False) or (
            "input_layernorm" in names and not names & {"post_attention_layernorm", "pre_feedforward_layernorm"})
        if parallel:
            raise ModelError("its attention and feed-forward read the same input in parallel, so the attention "
                             "block has no output of its own to decompose")
        if "pre_feedforward_layernorm" in names or ("post_feedforward_layernorm" in names
                                                    and "input_layernorm" not in names):
            return "sandwich", layer.post_attention_layernorm
        if names & {"input_layernorm", "ln_1", "layer_norm1"}:
            return "pre", None
        raise ModelError(f"the norms of {type(layer).__name__} are not a layout ALTI knows (pre-norm, post-norm or "
                         "a norm on the attention's output)")

    # -- reading the residual stream through the model's own unembedding (the logit lens) ----------

    def final_norm(self) -> nn.Module:
        """The norm the last layer's output goes through before the LM head."""
        base = self.model.base_model
        for name in ("norm", "ln_f", "final_layernorm", "final_layer_norm", "final_norm"):
            module = getattr(base, name, None)
            if isinstance(module, nn.Module):
                return module
        raise ModelError(f"cannot find the final norm of {type(base).__name__}")

    def unembed(self, normed: torch.Tensor) -> torch.Tensor:
        """Logits of normed states, as the causal-LM head makes them: W_U, then the family's own final
        soft-capping (Gemma 2/3) or logit scale (Cohere)."""
        logits = self.model.get_output_embeddings()(normed)
        config = self.model.config
        cap = getattr(config, "final_logit_softcapping", None)
        if cap:
            logits = torch.tanh(logits / cap) * cap
        scale = getattr(config, "logit_scale", None)
        return logits * scale if scale else logits

    # -- what each layer writes into the residual stream (direct logit attribution, circuits) -------

    def attention_output_norm(self, site: Site) -> nn.Module | None:
        """The norm the attention's output passes before it joins the residual stream (the sandwich
        layouts of Gemma 2/3 and OLMo 2: ``post_attention_layernorm``), None where it joins as it is
        (pre-norm and parallel layers)."""
        layer = self.model.get_submodule(hf_attention.layer_path(site.path))
        names = {name for name, _ in layer.named_children()}
        sandwich = "pre_feedforward_layernorm" in names or ("post_feedforward_layernorm" in names
                                                           and "input_layernorm" not in names)
        return layer.post_attention_layernorm if sandwich else None

    def logit_factor(self) -> tuple[float | None, float]:
        """(the final soft-cap c of c·tanh(z/c), or None; the logit scale, 1.0 where none): what
        :meth:`unembed` does after W_U."""
        config = self.model.config
        return getattr(config, "final_logit_softcapping", None) or None, getattr(config, "logit_scale", None) or 1.0
