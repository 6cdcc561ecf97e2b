"""Head atlas: what every head does across a corpus (built by ``atlas build`` on Ray), beside the
current sentence. Layout only: every number comes from attention_viz.atlas, every figure from
attention_viz.figures.atlas."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from ...runtime.access import atlas_folder, atlas_name, atlas_names, page_corpus
from ...atlas.embedding import METHODS, EmbeddingJobs
from ...atlas.jobs import BuildJobs, progress_line
from ...atlas import layout
from ...atlas.stats import STATS
from ...atlas.store import Atlas, truncation_note
from ...atlas.views import grid_of, head_map, measures, sentence_against_corpus, similar_contexts
from ...errors import ModelError
from ...figures.atlas import head_grid, head_map_figure, placement_figure, qk_scatter
from ...figures.heatmap import attention_heatmap
from ...core.provenance import ATLAS, Provenance
from ...core.result import AttentionResult
from .. import cache, plain
from ..widgets import choice, follow_the_model, integer, text
from ..export import chart, drawn_from
from ..tables import clicked_tile

CHART = {"displaylogo": False}
PROGRESS_EVERY = 2  # seconds between redraws of a running build's progress
CLICKED = "_atlas_clicked"  # (layer, head) clicked in the grid or the map, applied on the rerun


@st.cache_resource
def _builds() -> BuildJobs:
    return BuildJobs()


@st.cache_resource
def _embeddings() -> EmbeddingJobs:
    return EmbeddingJobs()


@st.cache_data(max_entries=16, show_spinner="Placing the heads…")
def _head_map(folder: str, built: str):
    return head_map(Atlas.open(folder).js_matrix())


def _named(message: object, folder: Path, name: str) -> str:
    """A message about the atlas folder with the atlas's name in place of its path on the server."""
    return str(message).replace(str(folder), name)


def _build_panel(model: str, folder: Path, name: str) -> None:
    try:
        status = _builds().status(folder)
    except ModelError as error:  # a manifest that is not one
        plain.error(_named(error, folder, name))
        return
    if status.state == "running":
        _progress(folder, name)
        return
    if status.state == "failed":
        plain.error(f"The build stopped: {_named(status.message, folder, name)}")
    label = "Resume the build" if status.done else f"Build the probes atlas of {model}"
    if st.button(label, key="atlas_build"):
        try:
            _builds().start(model, page_corpus(), folder)
        except ModelError as error:  # a folder in the root that a build did not make: left as it is
            plain.error(_named(error, folder, name))
            return
        st.rerun()


@st.fragment(run_every=PROGRESS_EVERY)
def _progress(folder: Path, name: str) -> None:
    """The running build's progress, redrawn on its own every few seconds; when the build ends the
    whole page runs again and opens the atlas (or says why it stopped), with no reload."""
    try:
        status = _builds().status(folder)
    except ModelError as error:
        plain.error(_named(error, folder, name))
        return
    if status.state != "running":
        st.rerun()
    st.progress(status.done / status.total if status.total else 0.0, text=progress_line(status))


def choose_clicked(clicked: tuple[int, int] | None, source: str) -> None:
    """A head newly clicked in ``source`` becomes the chosen layer and head. Their sliders are
    already drawn in this run, so the choice is applied at the top of a rerun (:data:`CLICKED`);
    a selection stays in its figure across reruns, so each one is applied once."""
    seen = f"_clicked_{source}"
    if clicked is not None and clicked != st.session_state.get(seen):
        st.session_state[seen] = clicked
        st.session_state[CLICKED] = clicked
        st.rerun()
    st.session_state[seen] = clicked


def render(result: AttentionResult) -> None:
    model = result.model
    # A link names an atlas (?atlas=minilm-probes), never a folder: it lives in the server's atlas root.
    follow_the_model(model, ("atlas_atlas",), lambda last: (atlas_name(last, "probes"),))
    name = text("Atlas", key="atlas_atlas", default=atlas_name(model, "probes"), max_chars=100,
                help="the name of an atlas on this server (letters, digits, - _ .)")
    names = atlas_names()
    if names:
        plain.caption(f"Atlases on this server: {', '.join(names)}")
    try:
        folder = atlas_folder(name)
        atlas = Atlas.open(folder, name=name) if (folder / layout.MANIFEST).is_file() else None
        summary = atlas.summary() if atlas is not None and atlas.complete else None
    except ModelError as error:  # a bad name, or a folder that is not an atlas this version reads
        plain.error(error)
        return
    if summary is None:
        plain.info(f"No finished atlas named {name} yet. Build one here from the probes (the page shows its progress "
                   "and opens the atlas when it is done) or with `python -m attention_viz atlas build`.")
        _build_panel(model, folder, name)
        return
    plain.caption(f"{atlas.manifest['model']} on {atlas.manifest['corpus']['source']}: {summary['sentences']} sentences, "
                  f"{len(summary['skipped'])} skipped, {summary['tokens']} tokens")
    if summary["truncated"]:
        plain.caption(truncation_note(summary["truncated"]))

    corpus = Provenance(atlas.manifest["model"], source=ATLAS + name)  # the atlas's model over its corpus
    measure = choice("Statistic or relation", measures(atlas), "atlas_measure")
    clicked = st.session_state.pop(CLICKED, None)  # a head clicked in a figure below, on the last run
    if clicked is not None:
        st.session_state["atlas_layer"], st.session_state["atlas_head"] = clicked
    layer = integer("Layer", 0, atlas.layers - 1, "atlas_layer", 0)
    head = integer("Head", 0, atlas.heads - 1, "atlas_head", 0)
    with drawn_from(corpus):
        event = chart(st, head_grid(grid_of(atlas, measure), f"{measure} per head — click a head to choose it",
                                    (layer, head)), key="atlas_grid", config=CHART, on_select="rerun",
                      selection_mode="points")
    choose_clicked(clicked_tile(event, atlas.heads, curve=1), "atlas_grid")
    relation = summary.get("relations", {}).get(measure)
    if relation is not None:
        best, baseline = relation["best"], relation["baseline"]
        plain.caption(f"best head {best['layer']}.{best['head']}: {best['accuracy']:.2f}; "
                      f"fixed offset {baseline['offset']:+d}: {baseline['accuracy']:.2f} ({relation['count']} instances)")

    left, right = st.columns(2)
    with left:
        st.subheader("Where this head stands among the heads")
        with drawn_from(corpus):
            event = chart(st, head_map_figure(_head_map(str(folder), str(atlas.manifest.get("counts"))), atlas.heads,
                                              (layer, head)), key="atlas_map", config=CHART, on_select="rerun",
                          selection_mode="points")
        choose_clicked(clicked_tile(event, atlas.heads, curve=0), "atlas_map")
    with right:
        stat = measure if measure in STATS else "entropy"
        st.subheader(f"This sentence against the corpus ({stat})")
        if atlas.manifest["model"] == model:
            placement = sentence_against_corpus(result, atlas, stat, layer, head)
            chart(st, placement_figure(placement.corpus, placement.value,
                                             f"layer {layer}, head {head}: {placement.value:.3f}, "
                                             f"above {placement.percentile:.0f}% of corpus sentences"),
                            key="atlas_placement", config=CHART)
        else:
            plain.info(f"The atlas is of {atlas.manifest['model']}; the sentence runs in {model}.")

    st.subheader(f"Sentences where layer {layer}, head {head} has the highest {stat}")
    for i, row in enumerate(atlas.top_sentences(stat, layer, head, k=3)):
        top = cache.run(atlas.manifest["model"], row["text"])
        figure = attention_heatmap(top.pattern(top.attentions()[0], layer, head), list(top.tokens.labels),
                                   title=f"line {row['line']} ({stat} {row['value']:.3f})")
        with drawn_from(top.provenance):
            chart(st, figure, key=f"atlas_top_{i}", config=CHART)

    st.subheader("Queries and keys of this head (AttentionViz)")
    method = choice("Projection", list(METHODS), "atlas_method", widget="radio", horizontal=True)
    color_by = choice("Colour", ["position", "kind"], "atlas_color", widget="radio", horizontal=True)
    _qk_view(folder, layer, head, method, color_by, corpus)

    st.subheader("Similar contexts (exBERT)")
    if atlas.manifest["model"] != model or not atlas.manifest.get("d_model"):
        plain.info("Similar contexts need an atlas of the current model with layer outputs.")
        return
    labels = list(result.tokens.labels)
    position = choice("Token of this sentence", list(range(len(labels))), "atlas_token",
                      format_func=lambda i: f"{i}: {labels[i]}")
    context_layer = integer("Representation after layer", 0, atlas.layers - 1, "atlas_context_layer", atlas.layers - 1)
    _, states = cache.backend(model).layer_states(result.tokens.text)
    rows = similar_contexts(folder, context_layer, states[context_layer][position], k=8)
    st.dataframe([{"similarity": round(c.similarity, 3), "token": c.token, "line": c.line,
                   "sentence": c.text} for c in rows], key="atlas_contexts", hide_index=True)


@st.fragment(run_every=3)
def _qk_view(folder: Path, layer: int, head: int, method: str, color_by: str, corpus: Provenance) -> None:
    """PCA at once; UMAP and t-SNE in the background, this fragment polling their status (a fragment
    reruns alone, outside the page's :func:`drawn_from`: it opens its own)."""
    jobs = _embeddings()
    if method == "pca":
        state, embedding = jobs.status(folder, layer, head, method)
        if state != "ready":
            jobs.submit(folder, layer, head, method)
            state, embedding = "running", None
    else:
        state, embedding = jobs.status(folder, layer, head, method)
        if state == "absent" and st.button(f"Compute {method.upper()} for layer {layer}, head {head}",
                                           key="atlas_embed"):
            jobs.submit(folder, layer, head, method)
            state = "queued"
    if state in ("running", "queued"):
        plain.info(f"{method.upper()} for layer {layer}, head {head}: {state} (the first UMAP fit compiles for "
                   "about a minute); this view updates by itself.")
    elif state == "failed":
        plain.error(f"{method.upper()} failed: {embedding}")
    elif state == "ready":
        with drawn_from(corpus):
            chart(st, qk_scatter(embedding.xy, embedding.label, embedding.line, embedding.position, embedding.kind,
                                 color_by, f"layer {layer}, head {head}: {embedding.n} queries and keys ({method})"),
                  key="atlas_qk", config=CHART)
