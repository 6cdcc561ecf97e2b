"""Activation patching: which heads, or which layers × positions, carry the difference between a
clean and a corrupt input (Meng et al. 2022; Wang et al. 2022; Heimersheim & Nanda). The
computation is :func:`attention_viz.backends.patching.patch`, cached here at the page edge; the page
lays out the inputs, the two metrics and the heatmap of restored fractions."""

from __future__ import annotations

from dataclasses import replace

import streamlit as st

from ...analysis.attribution_patching import agreement
from ...analysis.patching import PRESETS, SITE_DESCRIPTIONS, SITES, Patching
from ...figures.attribution_patching import attribution_heatmap
from ...figures.patching import patching_heatmap
from ...core.result import AttentionResult
from .. import cache, plain
from ..export import chart, drawn_from
from ..heavy import heavy
from ..widgets import choice, flag, follow_the_model, text

EXPLANATION = (
    "Attention weights say where a head looks, not whether what it moves matters. **Activation patching** "
    "asks that causally: run a *clean* input and a *corrupt* one that differs in one fact (same number of "
    "tokens), then run the corrupt input again with one site — a head's output, or the residual stream at "
    "one layer and position — taken from the clean run. The **restored fraction** (patched − corrupt) / "
    "(clean − corrupt) is 1 where that site alone brings the clean answer back, 0 where it changes nothing. "
    "*Noising* does the opposite: the clean run with one corrupt value (near 0: the site was needed)."
)
# the longest clean input the page patches, per site: one patched run per site, so head_positions
# (layers × heads × positions runs) grows with the square of the length; the CLI takes any length
PAGE_TOKENS = {"heads": 128, "patterns": 128, "resid": 64, "head_positions": 24}
METRICS = {
    "decoder-only": "logit(answer) − logit(wrong) for the next token, at the last position",
    "encoder-decoder": "log p(answer) − log p(wrong) at the position where the clean translation writes the answer, "
                       "each input teacher-forced on its own translation up to there",
    "encoder-only": "cos(pronoun, answer) − cos(pronoun, wrong) on the final layer: which candidate the pronoun's "
                    "representation sits closer to (the token compared: the first pronoun, or the one you name)",
}


@st.cache_resource(max_entries=32, show_spinner="Patching every site…")
def patched(model: str, clean: str, corrupt: str, answer: str, wrong: str, site: str, noising: bool,
            token: str | None, method: str = "activation") -> Patching:
    from ...backends.attribution_patching import attribution_patch  # the model's forward (torch) behind the page edge
    from ...backends.patching import patch

    with heavy(f"the {method} patching runs"):
        run = attribution_patch if method == "attribution" else patch
        return run(cache.backend(model), clean, corrupt, answer, wrong, site, noising, token)


INPUTS = ("patching_clean", "patching_corrupt", "patching_answer", "patching_wrong")


def preset_inputs(model: str) -> tuple[str | None, ...]:
    return PRESETS[model].inputs if model in PRESETS else (None,) * len(INPUTS)


def render(result: AttentionResult) -> dict:
    st.markdown(EXPLANATION)
    backend = cache.backend(result.model)
    if not backend.can_ablate:
        plain.info(f"{result.model} cannot be patched: this page replaces heads' outputs inside a forward we run "
                   "ourselves (minilm, toy-translate, induction, or an hf: Llama, Qwen2, Mistral, GPT-NeoX or "
                   "GPT-2 folder).")
        return {}
    preset = PRESETS.get(result.model)
    follow_the_model(result.model, INPUTS, preset_inputs)  # toy-translate's French vocabulary has no "animal"
    left, right = st.columns(2)
    with left:
        clean = text("Clean input", "patching_clean", preset.clean if preset else result.tokens.text)
        answer = text("Answer (one token)", "patching_answer", preset.answer if preset else "", max_chars=80)
    with right:
        corrupt = text("Corrupt input (the same number of tokens)", "patching_corrupt",
                       preset.corrupt if preset else "")
        wrong = text("Wrong answer (one token)", "patching_wrong", preset.wrong if preset else "", max_chars=80)
    if preset and (clean, corrupt) == (preset.clean, preset.corrupt):
        plain.caption(f"The preset pair tests {preset.what}.")
    site = choice("Site", SITES, "patching_site", "heads", widget="radio", horizontal=True,
                  format_func=lambda s: f"{s}: {SITE_DESCRIPTIONS[s]}")
    noising = flag("Noising (the clean run with one corrupt value)", "patching_noising")
    beside = flag("Beside it: attribution patching (every site estimated at once from one backward)",
                  "patching_attribution")
    token = None
    if backend.shape == "encoder-only":
        token = text("Token compared (empty: the first pronoun)", "patching_token", "", max_chars=40) or None
    if not (clean.strip() and corrupt.strip() and answer.strip() and wrong.strip()):
        st.info("Type a clean and a corrupt input of the same length, the clean input's answer and the corrupt "
                "one's, to see which sites carry the difference.")
        return {}
    tokens = len(backend.tokenize(clean)[0])
    if tokens > PAGE_TOKENS[site]:
        plain.info(f"The clean input has {tokens} tokens: this page patches {site} on inputs of up to "
                   f"{PAGE_TOKENS[site]} (one run per site on a shared server); the command line (python -m "
                   "attention_viz patch) takes longer ones.")
        return {}
    st.caption(f"Metric: {METRICS[backend.shape]}.")
    patching = patched(result.model, clean, corrupt, answer.strip(), wrong.strip(), site, noising, token)
    first, second = st.columns(2)
    first.metric("Metric on the clean input", f"{patching.clean:.4f}")
    second.metric("Metric on the corrupt input", f"{patching.corrupt:.4f}")
    plain.caption(f"Measured: {patching.metric}.")
    if patching.warning is not None:  # above the map: it reads as confidently as any other
        plain.warning(patching.warning)
    with drawn_from(replace(result.provenance, source=clean, target=None)):  # the pair typed here, not the sidebar's
        measured_place, estimated_place = st.columns(2) if beside else (st, None)
        chart(measured_place, cache.figure(patching_heatmap, patching), key="patching_map")
        if estimated_place is not None:
            estimate = patched(result.model, clean, corrupt, answer.strip(), wrong.strip(), site, noising, token,
                               "attribution")
            chart(estimated_place, cache.figure(attribution_heatmap, estimate), key="patching_attribution_map")
    st.caption("Red: patching that site alone moves the metric towards the clean input's; blue: away from it; "
               "white: no effect. One colour range, centred at 0.")
    if beside:
        r = agreement(patching, estimate)
        shown = "undefined (a constant grid)" if r is None else f"r = {r:.3f}"
        st.caption("Attribution patching (Nanda 2023) estimates each site's effect to first order, "
                   "(a_clean − a_corrupt) · ∂metric/∂a at the receiving run, from one forward per input and one "
                   "backward; where a site changes the output a lot the estimate can be far off. Correlation "
                   f"with activation patching over these sites: {shown}.")
    return {}
