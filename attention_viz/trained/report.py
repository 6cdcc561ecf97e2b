"""The model card and its chart, as text, from the numbers of :mod:`attention_viz.trained.evaluate`.

Pure functions: dicts in, Markdown / SVG out. Nothing here computes a score, and no number is
typed by hand: everything comes from ``scores.json`` data and the models' ``training.json``.
The chart is a small hand-written SVG (no plotting library needed to view it in Markdown).
"""

from __future__ import annotations

from html import escape

from ..core.names import CROSS, DECODER_SELF, ENCODER_SELF, hook_name

CHART = "accuracy_vs_length.svg"
COLORS = {"toy-translate": "#1f77b4", "toy-translate-rnn": "#2ca02c", "gru-no-attention": "#d62728"}
DESCRIPTIONS = {
    "toy-translate": "Transformer encoder–decoder (attention_viz/core/model.py)",
    "toy-translate-rnn": "bidirectional GRU encoder, GRU decoder with Bahdanau (additive) attention",
    "gru-no-attention": "the same GRUs without attention: one fixed context vector",
}


def line_chart_svg(
    series: dict[str, list[tuple[float, float]]],
    *,
    title: str,
    x_label: str,
    y_label: str,
    colors: dict[str, str] | None = None,
    width: int = 640,
    height: int = 380,
) -> str:
    """A line chart with y in [0, 1]: one polyline (with dots) per series, axes, grid and legend."""
    left, right, top, bottom = 60, 20, 40, 95
    plot_w, plot_h = width - left - right, height - top - bottom
    xs = [x for points in series.values() for x, _ in points]
    x_min, x_max = (min(xs), max(xs)) if xs else (0.0, 1.0)
    x_span = (x_max - x_min) or 1.0

    def px(x: float) -> float:
        return left + (x - x_min) / x_span * plot_w

    def py(y: float) -> float:
        return top + (1.0 - y) * plot_h

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{width / 2:.1f}" y="22" text-anchor="middle" font-size="15">{escape(title)}</text>',
    ]
    for k in range(6):  # horizontal grid and y ticks at 0, 0.2, .. 1
        y = k / 5
        parts.append(f'<line x1="{left}" y1="{py(y):.1f}" x2="{left + plot_w}" y2="{py(y):.1f}" stroke="#ddd"/>')
        parts.append(f'<text x="{left - 6}" y="{py(y) + 4:.1f}" text-anchor="end">{y:.1f}</text>')
    for x in sorted(set(xs)):
        parts.append(f'<line x1="{px(x):.1f}" y1="{top + plot_h}" x2="{px(x):.1f}" y2="{top + plot_h + 4}" stroke="#333"/>')
        if int(x) % 2 == 1 or len(set(xs)) <= 12:
            parts.append(f'<text x="{px(x):.1f}" y="{top + plot_h + 17}" text-anchor="middle">{x:g}</text>')
    parts.append(f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="#333"/>')
    parts.append(f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" stroke="#333"/>')
    parts.append(f'<text x="{left + plot_w / 2:.1f}" y="{top + plot_h + 36}" text-anchor="middle">{escape(x_label)}</text>')
    parts.append(
        f'<text x="16" y="{top + plot_h / 2:.1f}" text-anchor="middle" '
        f'transform="rotate(-90 16 {top + plot_h / 2:.1f})">{escape(y_label)}</text>'
    )
    for i, (name, points) in enumerate(series.items()):
        color = (colors or {}).get(name, "#555")
        coords = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in points)
        parts.append(f'<polyline points="{coords}" fill="none" stroke="{color}" stroke-width="2"/>')
        parts += [f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="2.5" fill="{color}"/>' for x, y in points]
        lx, ly = left + 10 + i * 200, height - 22
        parts.append(f'<line x1="{lx}" y1="{ly}" x2="{lx + 24}" y2="{ly}" stroke="{color}" stroke-width="3"/>')
        parts.append(f'<text x="{lx + 30}" y="{ly + 4}">{escape(name)}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def accuracy_chart(scores: dict) -> str:
    """Exact match against source length (every length 3..25) for each model in ``scores``."""
    series = {
        name: [(float(length), v["accuracy"]) for length, v in s["exact_match"]["by_length"].items()]
        for name, s in scores.items()
    }
    return line_chart_svg(
        series,
        title="Held-out exact match against source length",
        x_label="source length (tokens, final '.' included)",
        y_label="exact match",
        colors=COLORS,
    )


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f} %"


def _size(n_bytes: int) -> str:
    return f"{n_bytes / 1e6:.2f} MB"


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"


def _hyper_table(models: dict) -> list[str]:
    lines = [
        "| | " + " | ".join(models) + " |",
        "|---|" + "---|" * len(models),
    ]

    def row(label: str, fn) -> None:
        lines.append(f"| {label} | " + " | ".join(str(fn(m)) for m in models.values()) + " |")

    def cfg(*keys: str):
        return lambda m: ", ".join(f"{k}={m['config'][k]}" for k in keys if k in m["config"])

    row("command", lambda m: f"`{m['training'].get('command') or 'python -m attention_viz.trained.train --model ' + m['training']['model']}`")
    row("architecture", lambda m: m["architecture"])
    row("sizes", lambda m: cfg("d_model", "h", "d_ff", "N", "norm", "positional")(m)
        if m["architecture"] == "transformer" else cfg("d_emb", "d_enc", "d_dec", "d_att", "d_out", "attention")(m))
    row("dropout", lambda m: m["config"]["dropout"])
    row("parameters", lambda m: f"{m['training'].get('parameters', 0):,}")
    row("weights (float32 safetensors)", lambda m: _size(m["weights_bytes"]))
    row("optimizer steps × batch", lambda m: f"{m['training']['hyperparameters']['steps']} × "
        f"{m['training']['hyperparameters']['batch_size']} sentences")
    row("epochs over the train split", lambda m: m["training"].get("epochs"))
    row("peak learning rate / warmup", lambda m: f"{m['training']['hyperparameters']['lr']} / "
        f"{m['training']['hyperparameters']['warmup']} steps")
    row("label smoothing / grad clip", lambda m: f"{m['training']['hyperparameters']['label_smoothing']} / "
        f"{m['training']['hyperparameters']['clip']}")
    row("seed", lambda m: m["training"]["seed"])
    row("training time: wall clock (CPU)", lambda m: f"{_minutes(m['training']['training_seconds'])} "
        f"({_minutes(m['training'].get('training_cpu_seconds', float('nan')))} CPU) on {m['training']['threads']} "
        f"thread{'s' if m['training']['threads'] > 1 else ''}")
    row("final training loss (label-smoothed)", lambda m: m["training"]["final_train_loss"])
    row("dev exact match (in-distribution)", lambda m: _pct(m["training"]["dev_exact_match"]))
    return lines


def _alignment_table(alignment: dict) -> list[str]:
    heads = alignment["heads"]
    n_heads = len(heads[0])
    lines = [
        "| layer | " + " | ".join(f"head {k}" for k in range(n_heads)) + " | head average |",
        "|---|" + "---|" * (n_heads + 1),
    ]
    for i, row in enumerate(heads):
        lines.append(f"| {i} | " + " | ".join(_pct(x) for x in row) + f" | {_pct(alignment['head_mean'][i])} |")
    return lines


def _length_summary(scores: dict) -> list[str]:
    """The shortest and the longest bucket of each model, in words (the long-sentence problem of Cho et al. 2014)."""
    if not scores:
        return []
    buckets = list(next(iter(scores.values()))["exact_match"]["buckets"])
    first, last = buckets[0], buckets[-1]
    changes = [
        f"`{name}` {_pct(s['exact_match']['buckets'][first]['accuracy'])} → "
        f"{_pct(s['exact_match']['buckets'][last]['accuracy'])}"
        for name, s in scores.items()
    ]
    return [
        f"From the shortest sources ({first} tokens) to the longest ({last}): " + ", ".join(changes) + ".",
        "The long-sentence problem (Cho et al. 2014; Bahdanau et al. 2015) is what this table asks: a GRU without attention",
        "must squeeze the whole source sentence into one fixed context vector, while attention lets the",
        "decoder look back at every source word at every step.",
    ]


def model_card(result: dict) -> str:
    """MODEL_CARD.md from the evaluation's result (= scores.json): every number comes from it."""
    models, scores = result["models"], result["scores"]
    names = list(scores)
    training = next(iter(models.values()))["training"] if models else {}
    out = [
        *_card_intro(names, models),
        *_card_data(result, training),
        *_card_training(models),
        *_card_exact_match(result, scores, names),
        *_card_alignment(scores, names),
        *_card_app_notes(),
        *_card_limitations(),
    ]
    return "\n".join(out)


def _card_intro(names: list[str], models: dict) -> list[str]:
    out = [
        "# Demo translation models: model card",
        "",
        "<!-- Generated by `python -m attention_viz.trained.evaluate` from scores.json and each model's "
        "training.json. Do not edit by hand: re-run the command. -->",
        "",
        "Three small English → French-like translation models, trained by us on a synthetic corpus",
        "with known word alignments, so that their attention can be checked against the truth instead",
        "of being taken on faith:",
        "",
    ]
    for name in names:
        out.append(f"* **`{name}`** — {DESCRIPTIONS.get(name, models[name]['architecture'])}.")
    return out + [
        "",
        "`toy-translate` and `toy-translate-rnn` are selectable in the app and on the command line",
        "(`python -m attention_viz run --model toy-translate --text \"...\" [--target \"...\"] --out r.npz`).",
        "`gru-no-attention` has no attention to show; it is shipped for the comparison below.",
        "",
    ]


def _card_data(result: dict, training: dict) -> list[str]:
    corpus, vocab = training.get("corpus", {}), training.get("vocab", {})
    return [
        "## Data",
        "",
        f"`attention_viz.trained.corpus.splits(seed={corpus.get('seed', 0)})`: English sentences of 3–25 tokens from a",
        "small grammar (noun phrases with up to three adjectives, \"of\" phrases and relative clauses;",
        "eight verb forms, negation, passives with agents, prepositional phrases and dates, up to three",
        "coordinated clauses), translated by rule into a French-like language: adjectives after the noun",
        "in reverse order, gender and number agreement, participle agreement, elision and contraction,",
        "one-to-many words (\"was\" → \"a été\", \"not\" → \"ne … pas\"). Every French word carries the",
        "index of one English word: the gold alignment.",
        "",
        f"* train: {corpus.get('train_pairs', '?')} pairs, dev: {corpus.get('dev_pairs', '?')} pairs "
        f"(same distribution), test: {result.get('test_split_pairs', '?')} pairs.",
        "* The test split is **held out by construction**: every test sentence contains at least one",
        "  (adjective, noun) or (verb, noun) combination that never occurs in train or dev. Test and dev",
        "  are spread evenly over source lengths 3..25.",
        f"* Vocabularies (built from train): {vocab.get('source', '?')} source words, "
        f"{vocab.get('target', '?')} target words, plus `<pad> <bos> <eos> <unk>`.",
        "* Sources are the lower-cased words (final \".\" included, no `<bos>`/`<eos>`); the decoder",
        "  reads `<bos> y_1 … y_n` and is trained to predict `y_1 … y_n <eos>` (teacher forcing).",
        "",
    ]


def _card_training(models: dict) -> list[str]:
    return [
        "## Training",
        "",
        "`python -m attention_viz.trained.train --model NAME` (deterministic: the same seed and the same",
        "`--threads` give the same weights; another thread count changes the order of float sums and",
        "so the last bits). Adam, linear warmup then cosine decay, batches of sentences of similar length,",
        "cross-entropy with label smoothing. The two GRUs share sizes, data and budget: they differ only",
        "by the attention. Times are wall clock on a shared 2-core machine (noisy).",
        "",
        *_hyper_table(models),
        "",
    ]


def _card_exact_match(result: dict, scores: dict, names: list[str]) -> list[str]:
    out = [
        "## Held-out exact match",
        "",
        f"Greedy decoding (the inference data flow), {result['test_pairs']} test pairs; a translation counts",
        "only if every word is right.",
        "",
        "| source length | " + " | ".join(f"`{n}`" for n in names) + " |",
        "|---|" + "---|" * len(names),
    ]
    buckets = list(next(iter(scores.values()))["exact_match"]["buckets"]) if scores else []
    for bucket in buckets:
        cells = []
        for n in names:
            b = scores[n]["exact_match"]["buckets"][bucket]
            cells.append(f"{_pct(b['accuracy'])} (n={b['n']})")
        out.append(f"| {bucket} | " + " | ".join(cells) + " |")
    out.append("| **all** | " + " | ".join(f"**{_pct(scores[n]['exact_match']['overall'])}**" for n in names) + " |")
    return out + [
        "",
        f"![Exact match against source length]({CHART})",
        "",
        *_length_summary(scores),
        "",
    ]


def _card_alignment(scores: dict, names: list[str]) -> list[str]:
    out = [
        "## Alignment: does attention point at the right source word?",
        "",
        "Teacher-forced on the gold target (the training data flow). For target word `j`, take the",
        "decoder row that predicts it (the row reading `<bos> y_1 … y_{j-1}`), find the source position",
        "with the largest cross-attention weight, and compare it with the gold alignment. The headline",
        "counts the target words that translate a source word (`content=True`); the second figure also",
        "counts the two kinds of inserted French words (the article of a bare plural, aligned to its",
        "noun, and the auxiliary of a simple past, aligned to its verb). `<eos>` is not counted.",
        "Nothing in training tells the models where to look: the alignment is learned.",
        "",
    ]
    for name in names:
        alignment = scores[name].get("alignment")
        if alignment is None:
            continue
        out += _card_model_alignment(name, alignment["content"], alignment["all"])
    return out


def _card_model_alignment(name: str, content: dict, everything: dict) -> list[str]:
    out = [
        f"### `{name}`",
        "",
        f"Best: **{_pct(content['best']['accuracy'])}** ({content['best']['where']}) over {content['n']} "
        f"content words; {_pct(everything['best']['accuracy'])} ({everything['best']['where']}) over all "
        f"{everything['n']} target words.",
        "",
    ]
    best = content["best"]
    if best.get("misses"):
        share = best["determiner_misses"] / best["misses"]
        out.append(
            f"Of its {best['misses']} misses on content words, {best['determiner_misses']} ({_pct(share)}) are "
            "French determiners looking past their English determiner at a later word of the noun phrase."
        )
        if share >= 0.5:
            out += [
                "Most misses are of that kind: the gender and number of \"le / la / les\" come from the noun,",
                "and the attention goes there. Bahdanau et al.'s (2015) alignment figure shows the same: \"la\"",
                "attends to \"the\" and \"Area\".",
            ]
        out.append("")
    if len(content["heads"]) > 1 or len(content["heads"][0]) > 1:
        out += ["Content words, per layer and head of the decoder's cross-attention:", ""]
        out += _alignment_table(content)
        out += ["", "All target words:", ""]
        out += _alignment_table(everything)
        out.append("")
    return out


def _card_app_notes() -> list[str]:
    encoder, decoder = hook_name(ENCODER_SELF, 0, "*"), hook_name(DECODER_SELF, 0, "*")
    cross, gru = hook_name(CROSS, 0, "*"), hook_name(CROSS, 0, "pattern")
    return [
        "## How the app shows them",
        "",
        f"* Hook names are the Transformer's, one set per layer (layer 0 shown): `{encoder}`, `{decoder}`,",
        f"  `{cross}`; the GRU's attention is `{gru}`",
        "  (and `.scores`), one head, `[1, target, source]`. The GRU supports the kinds `pattern` and `scores`.",
        "* Without `--target`: greedy decoding, the decoder re-reading its own output at every step; the",
        "  result keeps the last step (the decoder is causal, so its rows equal the earlier steps').",
        "  With `--target`: teacher forcing on `<bos> target`.",
        "* Source text is lower-cased and split on spaces, trailing punctuation split off; unknown words",
        "  become `<unk>` (flagged `unknown`). Every training sentence ends in \".\", the models' end of",
        "  source: a text without it gets one, flagged as a special token.",
        "* `target_tokens` are the **decoder inputs** (`<bos>` + the generated or given words): row `i`",
        "  is the step that reads them and predicts the next word (`meta[\"predicted\"]` lists those",
        "  predictions, ending in `<eos>`).",
        "",
    ]


def _card_limitations() -> list[str]:
    return [
        "## Limitations",
        "",
        "* A toy: a closed vocabulary of a few hundred words and one grammar. Words outside it become",
        "  `<unk>`, and sentences outside the grammar get confident nonsense — look at the attention",
        "  of such inputs as a curiosity, not as evidence.",
        "* The French side is made up by rules (close to French, not checked by a linguist).",
        "* Sentences longer than the training range (25 tokens) are not covered by these scores.",
        "* `gru-no-attention` got the same budget as the GRU with attention (sizes, data, steps,",
        "  schedule): the comparison is at equal cost, not of each model at its best. More training or",
        "  a larger state would raise its numbers.",
        "",
    ]
