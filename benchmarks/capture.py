"""Capture cost: our minilm forward with every pattern captured, next to `transformers`' BertModel on
the same weights: SDPA without attention weights (the floor: it never materializes a pattern) and
eager attention with ``output_attentions=True`` (what users of the tools we replace run today).

All three start from token ids. Ours is what ``ScratchEncoderBackend.run`` does after tokenizing:
the forward under ``capture()`` and the conversion to an ``AttentionResult``. Tokenizing is timed
on its own (every tool pays it).

Our patterns live in recycled memory (attention_viz/buffers.py): with recycled memory a call writes
into the blocks the previous call's result freed. The fresh-memory rows turn that off too, so every
call of ours maps new pages. The mapped-ahead rows are what the app does now: each result of ours is
kept (as its cache keeps them, so no block comes back) and ``buffers.keep_ready`` maps the next call's
blocks between calls (in the app, while the person reads the page; here untimed).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext

import torch

from attention_viz import buffers
from attention_viz.backends.registry import MODELS
from attention_viz.backends.scratch import ScratchEncoderBackend
from attention_viz.hooks import capture
from attention_viz.names import ENCODER_SELF
from attention_viz.result import AttentionResult

from .texts import text_of_tokens
from .timing import interleaved, median, ratio

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
    limit, buffers.limit_bytes = buffers.limit_bytes, 0
    buffers.release()
    try:
        yield
    finally:
        buffers.limit_bytes = limit


def bench_capture(
    backend: ScratchEncoderBackend, lengths: list[int], reps: dict[int, int], fresh_at: tuple[int, ...] = (512,)
) -> list[dict]:
    """One row per length with the allocator left alone ("recycled": a call may reuse the memory the
    previous one freed), and at ``fresh_at`` lengths two more: every call of ours in fresh pages, as a
    new sentence in the app was before, and "mapped ahead", as the app runs a new sentence now (its
    cache keeps the earlier results alive; keep_ready maps the next run's blocks in between)."""
    theirs = load_transformers(MODELS["minilm"].locate())
    rows = []
    for n in lengths:
        text = text_of_tokens(backend, n)
        tokens, _ = backend.tokenize(text)
        ids = torch.tensor([tokens.ids])

        def ours():  # ScratchEncoderBackend.run after tokenizing: forward with capture, then numpy
            with torch.inference_mode(), capture(kinds=APP_KINDS) as recorded:
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
        tokenize = interleaved({"tokenize": lambda: backend.tokenize(text)}, reps[n])["tokenize"]
        for memory in ("recycled", "fresh", "mapped ahead") if n in fresh_at else ("recycled",):
            faults: dict[str, list[int]] = {}
            contenders = {"ours": ours, "sdpa": sdpa, "eager": eager}
            kept: list[AttentionResult] = []

            def keep(name: str, output: object) -> None:
                if name == "ours":
                    kept.append(output)  # as the app's cache keeps every result
                    buffers.keep_ready().join()  # and maps the next one's blocks meanwhile

            with no_recycling() if memory == "fresh" else nullcontext():
                buffers.release()
                times = interleaved(contenders, reps[n], faults=faults, fresh_memory=memory != "recycled",
                                    after=keep if memory == "mapped ahead" else None)
            kept.clear()
            rows.append(
                {
                    "tokens": n,
                    "memory": memory,
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
            )
    return rows
