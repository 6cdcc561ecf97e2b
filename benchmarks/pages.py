"""End to end without the browser: text → AttentionResult → every figure of the head-heatmap page and
of the all-heads page, serialized the way Streamlit sends them (Plotly's JSON, or our levels
element's bytes); and how many bytes that is.

The page functions mirror attention_viz/ui/views/head.py and grid.py at their default widget values
(encoder self-attention, layer 0, head 0, nothing hidden, nothing zoomed): the same builders with
the same arguments, without Streamlit.
"""

from __future__ import annotations

import json
import time

import numpy as np
import plotly.graph_objects as go
import plotly.io

from attention_viz.analysis import head_stats
from attention_viz.analysis.head_levels import captured_heatmap, needs_levels
from attention_viz.backends.base import Backend
from attention_viz.figures.grid import heads_grid
from attention_viz.figures.heatmap import attention_heatmap
from attention_viz.figures.level_canvas import level_canvas_payload, read_payload
from attention_viz.core.result import AttentionResult
from attention_viz.analysis.selection import LOG_FLOOR, Choice, displayed, group_tokens
from attention_viz.ui.level_canvas import CSS, SCRIPT

from .capture import APP_KINDS
from .texts import text_of_tokens
from .timing import median

GROUP = ("encoder", "self_attn")
ELEMENT_CODE = (SCRIPT + CSS).encode()  # what our levels element's messages carry besides its bytes


def sent_to_browser(figure: go.Figure) -> str:
    """What ``st.plotly_chart`` puts on the wire (streamlit/elements/plotly_chart.py, 1.67): the
    figure's dict (``return_figure_from_figure_or_data``) through ``plotly.io.to_json``."""
    return plotly.io.to_json(figure.to_dict(), validate=False)


def one_head(pattern: np.ndarray, query_labels: list[str], key_labels: list[str]) -> bytes:
    """One whole head as both pages send it by default: float32 cells as a Plotly figure, or past
    ``LEVELS_ABOVE`` cells uint8 levels on our own element (ui/level_canvas.py), whose script and
    style go with each of its messages (linear colours, no threshold, nothing zoomed)."""
    title = "layer 0, head 0"
    if not needs_levels(pattern.shape):
        return sent_to_browser(attention_heatmap(pattern, query_labels, key_labels, title=title)).encode()
    whole = captured_heatmap(pattern, range(pattern.shape[0]), range(pattern.shape[1]), floor=LOG_FLOOR)
    payload = level_canvas_payload(whole, query_labels, title, key_labels, "attention weight", zoomable=True)
    return payload + ELEMENT_CODE


def head_page(result: AttentionResult) -> dict[str, bytes]:
    shown = displayed(result, Choice(GROUP, 0, 0))
    return {"head view": one_head(shown.matrix, shown.query_labels, shown.key_labels)}


def grid_page_figures(result: AttentionResult, stack: np.ndarray) -> dict[str, bytes]:
    query_tokens, key_tokens = group_tokens(result, GROUP)
    grid = heads_grid(stack, title="every head (rows: layers, columns: heads)")
    enlarged = one_head(stack[0, 0], list(query_tokens.labels), list(key_tokens.labels))
    return {"all-heads grid": sent_to_browser(grid).encode(), "grid page, enlarged head": enlarged}


def x_ticks(sent: bytes) -> int:
    """How many x tick labels a head view sent as :func:`one_head` draws."""
    if sent.startswith(b"{"):
        return len(json.loads(sent)["layout"]["xaxis"]["ticktext"])
    return len(read_payload(sent[: -len(ELEMENT_CODE)])[0]["x_ticks"])


def grid_page_table(result: AttentionResult, stack: np.ndarray) -> list[dict]:
    _, key_tokens = group_tokens(result, GROUP)
    return head_stats(stack, list(key_tokens.special))


STAGES = ("run", "head page figures", "grid page figures", "grid page table")


def bench_pages(backend: Backend, lengths: list[int], reps: dict[int, int]) -> list[dict]:
    """Each repetition a new text (a new model run, as in the app), every stage timed in turn."""
    rows = []
    for n in lengths:
        texts = [text_of_tokens(backend, n, variant) for variant in range(reps[n] + 1)]
        times: dict[str, list[float]] = {stage: [] for stage in STAGES}
        for rep, text in enumerate(texts):
            start = time.perf_counter()
            result = backend.run(text, kinds=APP_KINDS)
            lap = [time.perf_counter()]
            head_page(result)
            lap.append(time.perf_counter())
            stack = result.stack("pattern", *GROUP)  # once per page, as the view does
            grid_page_figures(result, stack)
            lap.append(time.perf_counter())
            grid_page_table(result, stack)
            lap.append(time.perf_counter())
            if rep == 0:
                continue  # warm-up
            for stage, begin, end in zip(STAGES, [start, *lap], lap):
                times[stage].append(end - begin)
        totals = {
            "head_view_s": [r + h for r, h in zip(times["run"], times["head page figures"])],
            "grid_view_s": [r + g + t for r, g, t in
                            zip(times["run"], times["grid page figures"], times["grid page table"])],
            "both_pages_s": [sum(parts) for parts in zip(*times.values())],
        }
        rows.append(
            {
                "tokens": n,
                "reps": reps[n],
                **{f"{stage}_s": median(values) for stage, values in times.items()},
                **{name: median(values) for name, values in totals.items()},
            }
        )
    return rows


def payload_sizes(backend: Backend, n: int) -> dict:
    """Bytes of figure JSON each page sends at ``n`` tokens, and how many x tick labels it draws."""
    result = backend.run(text_of_tokens(backend, n), kinds=APP_KINDS)
    specs = {**head_page(result), **grid_page_figures(result, result.stack("pattern", *GROUP))}
    sizes = {name: len(sent) for name, sent in specs.items()}
    sizes["grid page total"] = sizes["all-heads grid"] + sizes["grid page, enlarged head"]
    return {"tokens": n, "bytes": sizes, "head_view_x_ticks": x_ticks(specs["head view"])}
