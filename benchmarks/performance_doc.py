"""docs/performance.md: what each benchmark measures and how to run it, then the tables of the last
``make bench``, generated. Nothing in it is typed by hand but the prose below, which holds no number."""

from __future__ import annotations

INTRO = """\
# Performance

<!-- Written by `make bench` (python -m benchmarks.run --performance docs/performance.md). Do not edit by
hand: run it again. -->

Every figure below is measured by a script in `benchmarks/`, side by side with the baseline a user
would otherwise run, in one process on the machine named in the table's first line. Each contender
is timed in passes of its own, with nothing of ours alive while a baseline runs; a row that needs a
state of its own says so in its name and is compared with baselines measured in the standard state.
Timings on a shared 2-core machine are noisy: each table gives its load average, and ratios measured
in one run are steadier than seconds.

| benchmark | what it measures | command |
|---|---|---|
| `benchmarks.run` | capture cost against `transformers` (SDPA floor, eager with weights), text → every figure, bytes to the browser, peak memory, and Enter → heatmap in headless Chromium; the floors | `make bench` (writes this page and `benchmarks/RESULTS.md`) |
| `benchmarks.load` | many sessions at once against one or two replicas behind nginx (docs/deploy.md) | `python -m benchmarks.load --table` |
| `benchmarks.long` | texts of 8k–32k tokens: the blockwise pass, the app and the browser | `python -m benchmarks.long --tokens 8192 32768 [--app] [--browser]` |
| `benchmarks.offline` | the every-head offline file: size, time to first paint and to interactive, head switches | `python -m benchmarks.offline` |
| `benchmarks.ablation` | a head ablation's cost beside the plain forward | `python -m benchmarks.ablation` |
| `benchmarks.atlas` | the corpus pass on Ray: sentences per second | `python -m benchmarks.atlas` |
| `benchmarks.registry` | every family through transformers' attention registry with our attention function: parity with eager, the long path, a capture beside transformers' SDPA and eager forwards | `python -m benchmarks.registry --doc docs/performance.md` |
| `benchmarks.versus_transformer_lens` | activation patching, direct logit attribution and attribution patching beside TransformerLens 3.9 on the same GPT-2-small-shaped weights: seconds and the largest difference | `make bench-tl` (builds `.venv-tl` with TransformerLens, writes its section below) |
| `benchmarks.gpu` | real model shapes (Llama 1B, 8B; random weights) on one CUDA card: the long head view, every head, a full capture against `transformers` eager and SDPA, peak device memory; the floors | `make gpu-check` (writes the GPU section below) |

The tables of the last `make bench` follow.

"""


def document(tables: str, old: str = "") -> str:
    """The page: the fixed introduction, then ``tables`` (benchmarks.run's markdown) one level down,
    then the sections of ``old`` (the page as it was) that other scripts write: the GPU section, which
    only a machine with CUDA measures, the registry's and TransformerLens'."""
    body = "\n".join("#" + line if line.startswith("#") else line for line in tables.splitlines())
    page = INTRO + body + "\n"
    for heading in (GPU_HEADING, REGISTRY_HEADING, TRANSFORMER_LENS_HEADING):
        found = _section(old, heading)
        if found is not None:
            page = _with_section(page, heading, "\n".join(old.splitlines()[found[0] + 1 : found[1]]))
    return page


GPU_HEADING = "## Real model shapes: long inputs and full capture"
# written by python -m benchmarks.registry --doc docs/performance.md
REGISTRY_HEADING = "## Every family through transformers' registry, with our attention function"
# written by python -m benchmarks.versus_transformer_lens --doc docs/performance.md (make bench-tl)
TRANSFORMER_LENS_HEADING = "## Beside TransformerLens, on the same weights"
GPU_INTRO = """
<!-- Written by python -m benchmarks.gpu --doc docs/performance.md, one table per model shape and device:
`make gpu-check` on a machine with CUDA (the Llama 1B and 8B shapes), `make bench` on the CPU (a Llama of
GPT-2-small's size). Do not edit by hand: run it again. -->

Random weights of the real shapes (this measures cost, not meaning), bfloat16 on a GPU, float32 on the
CPU. *ours* rows are what the app does with a text longer than a capture: the head view's landing heatmap
(the forward up to the landing layer and one head's overview), another head of that layer, one layer's
grid, every head of the model; and the ordinary capture of every pattern, where the memory plan lets it
run. *transformers* runs the same weights: eager with `output_attentions`, and the SDPA forward (the
floor). Peak memory is the CUDA allocator's, weights included (on the CPU: the growth of peak RSS).
"""
UNMEASURED = ("**Not yet measured on a GPU.** No GPU has run `make gpu-check`: every table of this section comes "
              "from a CPU, and the floors benchmarks.gpu sets for the Llama 1B and 8B shapes are targets, not yet "
              "measured on a GPU.")


def _marked(gpu: str) -> str:
    """The GPU section's body saying it holds no GPU table, as long as every table's device is the CPU."""
    lines = [line for line in gpu.splitlines() if line != UNMEASURED]
    tables = [i for i, line in enumerate(lines) if line.startswith("### ")]
    if any(not lines[i].endswith(" on cpu") for i in tables):
        return "\n".join(lines)
    at = tables[0] if tables else len(lines)
    return "\n".join(lines[:at] + [UNMEASURED, ""] + lines[at:])


def _section(text: str, heading: str) -> tuple[int, int] | None:
    """The lines [start, end) of the section under ``heading`` (a markdown heading line), up to the
    next heading of its level or above; None when it is not there."""
    lines = text.splitlines()
    level = len(heading) - len(heading.lstrip("#"))
    if heading not in lines:
        return None
    start = lines.index(heading)
    for end in range(start + 1, len(lines)):
        hashes = len(lines[end]) - len(lines[end].lstrip("#"))
        if 0 < hashes <= level and lines[end][hashes:hashes + 1] == " ":
            return start, end
    return start, len(lines)


def _with_section(text: str, heading: str, body: str) -> str:
    """``text`` with the section under ``heading`` replaced by ``body`` (appended when absent)."""
    lines = text.splitlines()
    found = _section(text, heading)
    start, end = found if found is not None else (len(lines), len(lines))
    new = [heading, "", *body.strip("\n").splitlines(), ""]
    if start and lines[start - 1].strip():
        new.insert(0, "")
    return "\n".join(lines[:start] + new + lines[end:]).rstrip("\n") + "\n"


def with_section(page: str, heading: str, body: str) -> str:
    """``page`` with ``body`` under ``heading`` (a level-2 section of its own), the rest unchanged."""
    return _with_section(page if page.strip() else INTRO, heading, body)


def with_gpu_table(page: str, heading: str, body: str) -> str:
    """``page`` (docs/performance.md) with ``body`` under ``heading`` (one model shape's table, a
    level-3 heading) in the GPU section, replacing that shape's last table; the rest unchanged."""
    page = page if page.strip() else INTRO
    found = _section(page, GPU_HEADING)
    gpu = "\n".join(page.splitlines()[found[0] + 1 : found[1]]) if found else GPU_INTRO
    return _with_section(page, GPU_HEADING, _marked(_with_section(gpu, heading, body)))
