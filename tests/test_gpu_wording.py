"""No GPU has run this project's GPU code: every place that names a GPU figure, floor or time says so
("not yet measured on a GPU") until a GPU table exists, and `make gpu-check` stops in one line where
torch sees no CUDA device instead of skipping every test and exiting 0."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import torch

from benchmarks.performance_doc import GPU_HEADING, UNMEASURED, _section, with_gpu_table

ROOT = Path(__file__).resolve().parents[1]
PAGE = "# Performance\n\nintro\n"


def gpu_tables(page: str) -> list[str]:
    start, end = _section(page, GPU_HEADING)
    return [line for line in page.splitlines()[start:end] if line.startswith("### ")]


def test_the_gpu_section_says_unmeasured_until_a_gpu_table_is_there():
    cpu = with_gpu_table(PAGE, "### gpt2-small shape on cpu", "the cpu table")
    assert cpu.count(UNMEASURED) == 1 and cpu.index(UNMEASURED) < cpu.index("### gpt2-small shape on cpu")
    assert with_gpu_table(cpu, "### gpt2-small shape on cpu", "the cpu table again").count(UNMEASURED) == 1
    gpu = with_gpu_table(cpu, "### llama-1b shape on NVIDIA H200", "the first gpu table")
    assert UNMEASURED not in gpu and "the cpu table" in gpu and "the first gpu table" in gpu


def test_the_committed_page_says_so_while_it_holds_no_gpu_table():
    page = (ROOT / "docs/performance.md").read_text(encoding="utf-8")
    if all(table.endswith(" on cpu") for table in gpu_tables(page)):
        assert UNMEASURED in page
    else:
        assert UNMEASURED not in page


@pytest.mark.parametrize("path", ["README.md", "docs/deploy.md", "Makefile", "docs/atlas-cluster.md"])
def test_the_gpu_claims_say_they_are_unmeasured(path):
    text = " ".join((ROOT / path).read_text(encoding="utf-8").split())
    assert re.search(r"not yet (measured on a GPU|run on any GPU)", text, re.I), path
    assert not re.search(r"\d+ minutes on one (H100|A100|GPU)", text), path


@pytest.mark.skipif(torch.cuda.is_available(), reason="the one-line stop is for machines without CUDA")
def test_gpu_check_stops_in_one_line_without_cuda():
    done = subprocess.run(["make", "-s", "gpu-check"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and done.stdout == ""  # nothing ran: no tests, no benchmark
    # make's own trailer ("make: ***", or "make[1]: ***" when make test runs it from a make) is not ours
    ours = [line for line in done.stderr.splitlines() if not re.match(r"make(\[\d+\])?: \*\*\*", line)]
    assert len(ours) == 1 and ours[0].startswith("make gpu-check: torch ") and "no CUDA device" in ours[0]
