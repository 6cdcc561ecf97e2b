"""Capture cost: our minilm forward with every pattern captured, next to `transformers`' BertModel on
the same weights: SDPA without attention weights (the floor: it never materializes a pattern) and
eager attention with ``output_attentions=True`` (what users of the tools we replace run today).

All three start from token ids. Ours is what ``ScratchEncoderBackend.run`` does after tokenizing:
the forward under ``capture()`` and the conversion to an ``AttentionResult``. Tokenizing is timed
on its own (every tool pays it).

Each contender is timed in passes of its own (benchmarks/timing.py), with nothing of ours alive while
a baseline runs. Our patterns live in recycled memory (attention_viz/runtime/memory.py): with *recycled*
memory a call writes into the blocks the previous call's result freed. The *fresh* rows turn that
off for everyone, so every call maps new pages. One more row of ours needs a state of its own, and
its name says so: *ours, results kept + mapped ahead*, what the app does on a new text (each result
kept, as its cache keeps them, and ``memory.keep_ready`` mapping the next call's blocks between
calls, untimed). Its baselines are the *fresh* row's, measured in the standard state, not re-timed
beside the gigabytes that row keeps alive.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext

import torch

from attention_viz.runtime import memory
from attention_viz.backends.registry import MODELS
from attention_viz.backends.scratch import ScratchEncoderBackend
from attention_viz.core.hooks import capture
from attention_viz.core.names import ENCODER_SELF
from attention_viz.core.result import AttentionResult

from .texts import text_of_tokens
from .timing import in_passes, kept_pass, median, ratio

APP_KINDS = ("pattern",)  # what attention_viz/ui/cache.py asks for


def load_transformers(folder) -> dict[str, torch.nn.Module]:
    import transformers
    from transformers import BertModel

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    return {
        impl: BertModel.from_pretrained(folder, attn_implementation=impl).eval() for impl in ("sdpa", "eager")
    }


@contextmanager
def no_recycling() -> Iterator[None]:
    """Every block of ours from the allocator (and, with ``fresh_memory``, from the kernel)."""
    limit, memory.limit_bytes = memory.limit_bytes, 0
    memory.release()
    try:
        yield
    finally:
        memory.limit_bytes = limit


def bench_capture(
    backend: ScratchEncoderBackend, lengths: list[int], reps: dict[int, int], fresh_at: tuple[int, ...] = (512,)
) -> list[dict]:
    """One row per length with the allocator left alone ("recycled"), and at ``fresh_at`` lengths two
    more: "fresh" (every call in new pages, for every contender) and the app's state for ours alone
    ("results kept + mapped ahead"), against the fresh row's baselines."""
    theirs = load_transformers(MODELS["minilm"].locate())
    rows = []
    for n in lengths:
        text = text_of_tokens(backend, n)
        tokens, _ = backend.tokenize(text)
        ids = torch.tensor([tokens.ids])

        def ours():  # ScratchEncoderBackend.run after tokenizing: forward with capture, then numpy
            with torch.inference_mode(), memory.recycling(), capture(kinds=APP_KINDS) as recorded:
                backend.model(ids)
            return AttentionResult.from_recorder(backend.name, tokens, recorded)

        def sdpa():
            with torch.inference_mode():
                return theirs["sdpa"](input_ids=ids)

        def eager():
            with torch.inference_mode():
                return theirs["eager"](input_ids=ids, output_attentions=True)

        # the same work: our patterns equal eager's, our hidden states equal both
        with torch.inference_mode():
            hidden = backend.model(ids)
            patterns_diff = max(
                float((torch.from_numpy(ours().pattern(ENCODER_SELF, i)) - a[0]).abs().max())
                for i, a in enumerate(eager().attentions)
            )
            hidden_diff = float((hidden - sdpa().last_hidden_state).abs().max())
        tokenize = in_passes({"tokenize": lambda: backend.tokenize(text)}, reps[n])["tokenize"]
        contenders = {"ours": ours, "sdpa": sdpa, "eager": eager}

        def row(state: str, times: dict[str, list[float]], faults: dict[str, list[int]]) -> dict:
            return {
                "tokens": n,
                "memory": state,
                "reps": reps[n],
                "ours_ms": 1000 * median(times["ours"]),
                "sdpa_ms": 1000 * median(times["sdpa"]),
                "eager_ms": 1000 * median(times["eager"]),
                "tokenize_ms": 1000 * median(tokenize),
                "ours_over_sdpa": ratio(times["ours"], times["sdpa"]),
                "ours_over_eager": ratio(times["ours"], times["eager"]),
                "eager_over_sdpa": ratio(times["eager"], times["sdpa"]),
                "page_faults": {name: median(counts) for name, counts in faults.items()},
                "max_pattern_diff_vs_eager": patterns_diff,
                "max_hidden_diff_vs_sdpa": hidden_diff,
            }

        for state in ("recycled", "fresh") if n in fresh_at else ("recycled",):
            faults: dict[str, list[int]] = {}
            with no_recycling() if state == "fresh" else nullcontext():
                times = in_passes(contenders, reps[n], faults=faults, fresh_memory=state == "fresh",
                                  between=memory.release)
            rows.append(row(state, times, faults))
            if state == "fresh":
                kept: list[AttentionResult] = []

                def keep(result: AttentionResult) -> None:
                    kept.append(result)  # as the app's cache keeps every result
                    memory.keep_ready().join()  # and maps the next one's blocks meanwhile

                memory.release()
                ours_faults: list[int] = []
                app_state = kept_pass(ours, reps[n], faults=ours_faults, after=keep)
                kept.clear()
                memory.release()
                # ours in its special state; the baselines stay the fresh row's (standard state)
                rows.append(row("ours: results kept + mapped ahead; baselines: fresh",
                                {**times, "ours": app_state}, {**faults, "ours": ours_faults}))
    return rows
