"""The Python API for notebooks and scripts: run a model, show a view inline, export it to a file.

    import attention_viz as av
    result = av.run("minilm", "The animal didn't cross the street because it was too tired.")
    av.show(result, view="head", layer=3, head=1)        # drawn inline in Jupyter, VS Code, Colab
    av.show(result, view="heads")                        # every layer and head, switchable in the output
    av.export(result, "attention.html", view="heads")   # the same as one file that opens offline

Nothing here needs a server or the network. In a notebook the first output carries plotly.js (once per
notebook) and every output draws with it, also when the saved notebook is opened elsewhere; an exported
file carries its own. Only :func:`run` loads torch, and only :func:`show` and :func:`export` load plotly
(a run on a machine without it works); they also work on a result read back with ``AttentionResult.load_npz`` (what
``python -m attention_viz run`` writes).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field, fields
from functools import cached_property, partial, wraps
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .analysis import FlowTooLarge, attention_flow, focus_matrix, rollout
from .analysis.patching import Patching, resolve_inputs
from .errors import ModelError
from .core.names import CROSS, DECODER_SELF, ENCODER_SELF, Group
from .core.result import AttentionResult
from .analysis.selection import GROUP_NAMES, REDUCTIONS, Choice, displayed, group_tokens, reduce_heads

if TYPE_CHECKING:  # the figures import plotly: each view imports what it draws with when it draws
    import plotly.graph_objects as go

__all__ = ["VIEWS", "NotebookPlotly", "Shown", "export", "init_notebook", "patch", "run", "show"]

VIEWS = ("head", "heads", "grid", "compare", "focus", "layers", "rollout")
ATTENTIONS: dict[str, Group] = {"encoder": ENCODER_SELF, "decoder": DECODER_SELF, "cross": CROSS}
Head = int | str  # a head index, or "mean" / "max" over the layer's heads


def run(
    model: str,
    text: str | Sequence[str],
    target: str | None = None,
    *,
    kinds: Collection[str] = ("pattern",),
    mixing: Collection[str] = (),
    device: str | None = None,
    dtype: str | None = None,
) -> AttentionResult | list[AttentionResult]:
    """Run ``model`` on ``text`` and capture its attention.

    ``model``: the names the app and the CLI take — ``"minilm"``, ``"toy-translate"``,
    ``"toy-translate-rnn"`` (``python -m attention_viz models`` lists them) or ``"hf:<hub id or local
    folder>"`` for any model ``transformers`` runs (hub ids only when already downloaded, or with
    ``ATTENTION_VIZ_ALLOW_DOWNLOAD=1``).
    ``target``: for encoder–decoder models, the target sentence to teacher-force; without it the
    model translates greedily and its own output is the target.
    ``kinds``: hook kinds to capture besides the patterns, e.g. ``("pattern", "scores", "q", "k")``.
    ``text`` a list: one result per text, from one forward of the texts right-padded to the longest
    with the padding masked (encoder- and decoder-only models of ours; other models run them in turn).
    ``mixing``: context-mixing maps to add per layer, ``("value_zeroing", "alti")`` or either (Mohebbi et
    al. 2023; Ferrando et al. 2022): ``result.array(("encoder", "self_attn"), layer, "alti")`` → ``[query, key]``.
    ``device``: ``"cpu"``, ``"cuda"`` or ``"auto"``; ``dtype``: ``"float32"``, ``"bfloat16"`` or ``"float16"``
    (None: ``ATTENTION_VIZ_DEVICE`` / ``ATTENTION_VIZ_DTYPE``, else auto, float32 on the CPU and bfloat16 on
    CUDA). Patterns are computed in float32 whatever the weights' dtype.

    Returns an :class:`~attention_viz.core.result.AttentionResult`: ``result.tokens.labels``,
    ``result.pattern(("encoder", "self_attn"), layer)`` → ``[heads, query, key]``,
    ``result.stack()`` → ``[layers, heads, query, key]``, ``result.save_npz(path)``.
    Raises :class:`~attention_viz.errors.ModelError` with a one-line reason for an unknown model or
    unreadable text.
    """
    from .backends.registry import load_backend  # torch loads here, not at `import attention_viz`

    backend = load_backend(model, device=device, dtype=dtype)
    if not isinstance(text, str):
        if target is not None or mixing:
            raise ModelError("a list of texts takes no target and no mixing: run those one text at a time")
        from .backends.batched import run_batch

        return run_batch(backend, text, kinds)
    if mixing:
        from .backends.mixing import check_measures, mixing_arrays

        check_measures(mixing)  # a misspelt measure fails before the forward
    result = backend.run(text, target=target, kinds=tuple(kinds))
    if mixing:
        result.arrays.update(mixing_arrays(backend, result, mixing))
    return result


def patch(
    model: str,
    clean: str | None = None,
    corrupt: str | None = None,
    answer: str | None = None,
    wrong: str | None = None,
    *,
    site: str = "heads",
    noising: bool = False,
    token: str | None = None,
    method: str = "activation",
    device: str | None = None,
    dtype: str | None = None,
) -> PatchResult:
    """Activation patching: which heads (``site="heads"``, ``"patterns"``), layers × positions
    (``"resid"``) or heads × positions (``"head_positions"``) carry what makes ``clean`` answer
    ``answer`` where ``corrupt`` (same token length) answers ``wrong``.

    Each site is patched alone from the clean run into the corrupt one (``noising=True``: from the
    corrupt run into the clean one) and gets its restored fraction (patched − corrupt) / (clean −
    corrupt). Without texts and words, the model's preset pair (``minilm``: "... it was too
    tired/wide", ``toy-translate``: signée/signé, ``induction``: a shuffled first copy).
    ``token``: encoders only, the token whose representation is compared (default: the first pronoun).
    ``method="attribution"``: every site estimated at once, (a_clean − a_corrupt) · ∂metric/∂a at the
    corrupt run (attribution patching, Nanda 2023), from one forward per input and one backward.
    ``device``, ``dtype``: as in :func:`run`.

    Returns a :class:`~attention_viz.analysis.patching.Patching`: ``result["heads"]`` (numpy, one row
    per layer), ``result.clean``, ``result.corrupt``, ``result.metric``, ``result.to_dict()`` (the CLI's
    JSON) and ``result.show()`` (a heatmap). Raises ModelError in one line for inputs of different
    token lengths, a word that is not one token, equal metrics, or a model that cannot be patched.
    """
    from .backends.attribution_patching import attribution_patch  # torch loads here
    from .backends.patching import patch as activation_patch
    from .backends.registry import load_backend

    methods = {"activation": activation_patch, "attribution": attribution_patch}
    if method not in methods:
        raise ModelError(f"unknown method {method!r}: choose activation or attribution")
    run_patching = methods[method]
    texts = resolve_inputs(model, clean, corrupt, answer, wrong)
    backend = load_backend(model, device=device, dtype=dtype)
    found = run_patching(backend, *texts, site=site, noising=noising, token=token)
    return PatchResult(**{f.name: getattr(found, f.name) for f in fields(found)})


@dataclass(frozen=True)
class PatchResult(Patching):
    """:class:`~attention_viz.analysis.patching.Patching` with :meth:`show` for notebooks (the
    analysis stays below the figures; the notebook API sits above both)."""

    def show(self, **options) -> go.Figure:
        """The heatmap of restored fractions (a Plotly figure: a notebook draws it inline)."""
        from .figures.patching import patching_heatmap

        return patching_heatmap(self, **options)


@dataclass
class Shown:
    """What :func:`show` returns. A notebook draws it inline (``_repr_html_``): plain HTML in the notebook's
    page that draws with the page's plotly.js, which the kernel session's first output carries
    (figures/notebook.py), so it needs no server, no network and no extension, and the saved notebook
    draws offline wherever it is opened (trusted). ``page`` is the view as one complete page with
    plotly.js inside, what ``save(path)`` writes; ``figures`` the Plotly figures in it (empty for the
    ``heads`` view, which draws in its own script)."""

    view: str
    figures: list[go.Figure]
    make_page: Callable[[], str] = field(repr=False)
    make_output: Callable[[], str] = field(repr=False)  # one notebook output, ids of its own each call

    @cached_property
    def page(self) -> str:
        return self.make_page()

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.write_text(self.page, encoding="utf-8")
        return path

    def _repr_html_(self) -> str:
        from .figures.notebook import SESSION

        return SESSION.output(self.make_output())

    def _repr_mimebundle_(self, include: Collection[str] | None = None, exclude: Collection[str] | None = None) -> dict:
        return {"text/html": self._repr_html_(), "text/plain": repr(self)}

    def _ipython_display_(self) -> None:
        from .figures.notebook import draw_once_per_cell

        draw_once_per_cell(self)

    def __repr__(self) -> str:
        return f"<attention-viz {self.view} view: {len(self.figures)} figure(s); .save(path) writes it as one page>"


class NotebookPlotly:
    """What :func:`init_notebook` returns: shown as a cell's output, plotly.js for the notebook's page."""

    def _repr_html_(self) -> str:
        from .figures.notebook import SESSION

        return SESSION.plotly()

    def __repr__(self) -> str:
        return "<attention-viz: plotly.js for this notebook's outputs>"


def init_notebook() -> NotebookPlotly:
    """plotly.js for this notebook, as a cell's output: ``av.init_notebook()`` alone in the first cell.
    Without it the kernel session's first :func:`show` output carries plotly.js, and re-running only
    that cell replaces it with an output without, which leaves a saved notebook with none; with it the
    copy stays in a cell of its own."""
    return NotebookPlotly()


def _drawn_as_called(show_view: Callable[..., Shown]) -> Callable[..., Shown]:
    """In a notebook, what :func:`show` returns is drawn as it is called: pasted as one cell, several
    calls each show their view, not only the cell's last value."""
    @wraps(show_view)
    def show(*args, **kwargs) -> Shown:
        from .figures.notebook import in_kernel

        shown = show_view(*args, **kwargs)
        if in_kernel():
            shown._ipython_display_()
        return shown
    return show


@_drawn_as_called
def show(
    result: AttentionResult,
    view: str = "head",
    *,
    attention: str | None = None,
    layer: int | None = None,
    head: Head = 0,
    other: AttentionResult | tuple[int, Head] | None = None,
    query: int | str | None = None,
    key: int | str | None = None,
    words: bool = False,
    hide_special: bool = False,
    threshold: float = 0.0,
) -> Shown:
    """Show one view of ``result``; in a notebook the returned object draws itself (offline).

    Views (``view=``):

    * ``"head"`` — the heatmap of one head (``layer``, ``head``; ``head="mean"`` or ``"max"`` over
      the layer's heads). ``words=True`` groups word pieces into words, ``hide_special=True`` drops
      [CLS]/[SEP]/… and renormalizes rows, ``threshold`` blanks weights below it.
    * ``"heads"`` — every layer and head in one output: the reader switches attention, layer and
      head (or mean / max) inside it, and hovering shows both tokens and the weight.
    * ``"grid"`` — thumbnails of every head, layers × heads.
    * ``"compare"`` — two heads side by side: (``layer``, ``head``) and ``other=(layer, head)``
      (default: the same head in the last layer); or ``other=<a second result>``: the same head on
      two sentences, and their difference when both have the same number of tokens.
    * ``"focus"`` — how much the ``query`` token attends to the ``key`` token in every head, and the
      query's attention row in (``layer``, ``head``) drawn over the sentence. Tokens are positions
      (``query=7``) or text (``query="it"``, the first match); by default "it" and "animal" when the
      sentence has them.
    * ``"layers"`` — the ``query`` token's attention in every layer (mean of heads), attention
      rollout and attention flow after the last layer (Abnar & Zuidema 2020).
    * ``"rollout"`` — attention rollout after ``layer`` (default: the last).

    ``attention``: ``"encoder"``, ``"decoder"`` or ``"cross"`` — which attention of an
    encoder–decoder model (default: the first the result has). Layers and heads are 0-indexed.
    A choice the result cannot serve raises ``ValueError`` saying what it has.
    """
    if view not in VIEWS:
        raise ValueError(f"unknown view {view!r}; choose from {', '.join(VIEWS)}")
    from .figures.grid import heads_grid
    from .figures.notebook import figures_output, heads_output
    from .figures.offline import figures_html, heads_html

    group = _attention(result, attention)
    if view == "heads":  # the view opens on the chosen attention, layer and head
        start = (group, _layer(result, group, layer, 0), _head(result, group, head))
        return Shown(view, [], partial(heads_html, result, start), partial(heads_output, result, start))
    if view == "head":
        figures, notes, extra = _head_view(result, group, _layer(result, group, layer, 0), _head(result, group, head),
                                           words, hide_special, threshold)
    elif view == "grid":
        figures, notes, extra = [heads_grid(result.stack("pattern", *group), title=_title(group, "every head"))], [], []
    elif view == "compare":
        figures, notes, extra = _compare_view(result, group, _layer(result, group, layer, 0),
                                              _head(result, group, head), other)
    elif view == "focus":
        figures, notes, extra = _focus_view(result, group, _layer(result, group, layer, 0), _head(result, group, head),
                                            query, key)
    elif view == "layers":
        figures, notes, extra = _layers_view(result, _self_attention(result, group, view), query)
    else:
        group = _self_attention(result, group, view)
        last = result.n_layers(*group) - 1
        figures, notes, extra = _rollout_view(result, group, _layer(result, group, layer, last))
    laid_out = {"notes": notes, "extra_html": extra, "heading": result.model}
    return Shown(view, list(figures), partial(figures_html, figures, title=f"attention-viz {view}: {result.model}",
                                              **laid_out), partial(figures_output, figures, **laid_out))


def export(result: AttentionResult, path: str | Path, view: str = "heads", **options: object) -> Path:
    """Write ``show(result, view, **options)`` as one HTML file that opens offline (plotly.js inside).

    The default ``view="heads"`` is the interactive page with every layer and head: weights stored
    as 8-bit codes with one scale per attention row (said in the file), about 15 MB for 512 tokens
    on minilm. Returns the path written.
    """
    return show.__wrapped__(result, view, **options).save(path)  # written, not drawn in the notebook


# --- the choices, checked against what the result holds ------------------------------------------


def _attention(result: AttentionResult, attention: str | None) -> Group:
    present = result.attentions()
    if not present:
        raise ValueError("the result holds no attention pattern")
    if attention is None:
        return present[0]
    if attention not in ATTENTIONS:
        raise ValueError(f"attention must be one of {', '.join(ATTENTIONS)}; got {attention!r}")
    group = ATTENTIONS[attention]
    if group not in present:
        names = ", ".join(name for name, g in ATTENTIONS.items() if g in present)
        raise ValueError(f"this result has no {attention} attention (it has: {names})")
    return group


def _self_attention(result: AttentionResult, group: Group, view: str) -> Group:
    if group != CROSS:
        return group
    selves = [name for name, g in ATTENTIONS.items() if g != CROSS and g in result.attentions()]
    if not selves:
        raise ValueError(f"the {view} view composes a self-attention through its layers, and this result has "
                         "only cross-attention")
    raise ValueError(f"the {view} view composes a self-attention through its layers: choose attention="
                     + " or ".join(repr(name) for name in selves))


def _layer(result: AttentionResult, group: Group, layer: int | None, default: int) -> int:
    n = result.n_layers(*group)
    layer = default if layer is None else int(layer)
    if not 0 <= layer < n:
        raise ValueError(f"layer must be in 0..{n - 1}; got {layer}")
    return layer


def _head(result: AttentionResult, group: Group, head: Head) -> Head:
    n = result.pattern(group, 0).shape[0]
    if head in REDUCTIONS:
        return head
    if isinstance(head, str) or not 0 <= int(head) < n:
        raise ValueError(f"head must be in 0..{n - 1}, 'mean' or 'max'; got {head!r}")
    return int(head)


def _token(labels: Sequence[str], token: int | str | None, preferred: str, fallback: int, what: str) -> int:
    """A position from an index, a token's text (first match, any case) or the default."""
    lowered = [label.lower() for label in labels]
    if token is None:
        return lowered.index(preferred) if preferred in lowered else min(fallback, len(labels) - 1)
    if isinstance(token, str):
        if token.lower() not in lowered:
            raise ValueError(f"{what} {token!r} is not a token of this text")
        return lowered.index(token.lower())
    if not 0 <= int(token) < len(labels):
        raise ValueError(f"{what} must be in 0..{len(labels) - 1}; got {token}")
    return int(token)


def _title(group: Group, what: str) -> str:
    return f"{GROUP_NAMES[group]}: {what}"


def _head_name(layer: int, head: Head) -> str:
    return f"layer {layer}, " + (f"head {head}" if isinstance(head, int) else f"{head} of heads")


# --- the views: each returns (figures, plain-text notes, package-built HTML) -----------------------

View = tuple[list["go.Figure"], list[str], list[str]]


def _head_view(result: AttentionResult, group: Group, layer: int, head: Head, words: bool, hide_special: bool,
               threshold: float) -> View:
    from .figures.heatmap import attention_heatmap

    shown = displayed(result, Choice(group, layer, head, words, hide_special, threshold))
    figure = attention_heatmap(shown.matrix, shown.query_labels, shown.key_labels,
                               title=_title(group, _head_name(layer, head)), threshold=threshold)
    return [figure], list(shown.notes), []


def _compare_view(result: AttentionResult, group: Group, layer: int, head: Head,
                  other: AttentionResult | tuple[int, Head] | None) -> View:
    from .figures.heatmap import attention_heatmap

    if isinstance(other, AttentionResult):
        other_group = _attention(other, next(k for k, g in ATTENTIONS.items() if g == group))
        a, b = displayed(result, Choice(group, layer, head)), displayed(other, Choice(other_group, layer, head))
        figures = [
            attention_heatmap(a.matrix, a.query_labels, a.key_labels, title=f"A: {_head_name(layer, head)}"),
            attention_heatmap(b.matrix, b.query_labels, b.key_labels, title=f"B: {_head_name(layer, head)}"),
        ]
        if a.matrix.shape != b.matrix.shape:
            return figures, [f"The sentences have {len(a.key_labels)} and {len(b.key_labels)} tokens: a "
                             "cell-by-cell difference needs the same number of tokens."], []
        queries = [x if x == y else f"{x}/{y}" for x, y in zip(a.query_labels, b.query_labels)]
        keys = [x if x == y else f"{x}/{y}" for x, y in zip(a.key_labels, b.key_labels)]
        figures.append(attention_heatmap(a.matrix - b.matrix, queries, keys, diverging=True,
                                         title="A − B (red: A attends more)", colorbar_title="A − B"))
        return figures, [], []
    other_layer, other_head = other if other is not None else (result.n_layers(*group) - 1, head)
    other_layer, other_head = _layer(result, group, other_layer, 0), _head(result, group, other_head)
    figures = []
    for at_layer, at_head in ((layer, head), (other_layer, other_head)):
        shown = displayed(result, Choice(group, at_layer, at_head))
        figures.append(attention_heatmap(shown.matrix, shown.query_labels, shown.key_labels,
                                         title=_title(group, _head_name(at_layer, at_head))))
    return figures, [], []


def _focus_view(result: AttentionResult, group: Group, layer: int, head: Head, query: int | str | None,
                key: int | str | None) -> View:
    from .figures.focus import focus_heatmap, highlighted_text

    query_tokens, key_tokens = group_tokens(result, group)
    queries, keys = list(query_tokens.labels), list(key_tokens.labels)
    q = _token(queries, query, "it", 1, "query")
    k = _token(keys, key, "animal", 0, "key")
    stack = result.stack("pattern", *group)
    row = reduce_heads(stack[layer], head)[q]
    sentence = highlighted_text(keys, np.asarray(row), q if group != CROSS else None)
    note = f"The attention row of query {q} in {_head_name(layer, head)}, drawn over the {'source' if group == CROSS else 'sentence'}:"
    return [focus_heatmap(focus_matrix(stack, q, k), queries[q], keys[k])], [note], [sentence]


def _layers_view(result: AttentionResult, group: Group, query: int | str | None) -> View:
    from .figures.heatmap import attention_heatmap

    stack = result.stack("pattern", *group)
    labels = list(group_tokens(result, group)[0].labels)
    q = _token(labels, query, "it", 0, "query")
    per_layer = stack.mean(axis=1)[:, q, :]  # [layers, keys], heads averaged
    figures = [
        attention_heatmap(per_layer, [f"layer {i}" for i in range(len(per_layer))], labels,
                          title=f"token {q} in every layer (mean of heads)"),
        attention_heatmap(rollout(stack)[-1], labels, labels, title="rollout after the last layer"),
    ]
    notes = [f"Token {q}: “{labels[q]}”."]
    try:
        figures.append(attention_heatmap(attention_flow(stack), labels, labels, title="attention flow"))
    except FlowTooLarge as too_large:
        notes.append(f"Attention flow is not drawn: {too_large}")
    return figures, notes, []


def _rollout_view(result: AttentionResult, group: Group, layer: int) -> View:
    from .figures.heatmap import attention_heatmap

    labels = list(group_tokens(result, group)[0].labels)
    rolled = rollout(result.stack("pattern", *group))[layer]
    note = "Each layer's head mean plus the residual identity (½A + ½I), rows renormalized, multiplied through the layers."
    return [attention_heatmap(rolled, labels, labels, title=f"rollout after layer {layer}")], [note], []
