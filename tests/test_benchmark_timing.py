"""The benchmarks' timing rules: each contender in passes of its own, baselines never beside ours."""

from benchmarks.performance_doc import document
from benchmarks.timing import in_passes, kept_pass, ratio


def test_each_contender_runs_in_passes_of_its_own_alternating_over_rounds():
    calls: list[str] = []
    contenders = {name: (lambda name=name: calls.append(name)) for name in ("ours", "sdpa", "eager")}
    times = in_passes(contenders, reps=5, rounds=2, warmup=1, between=lambda: calls.append("|"))
    assert {name: len(values) for name, values in times.items()} == {"ours": 5, "sdpa": 5, "eager": 5}
    blocks = "".join(c if c == "|" else c[0] for c in calls).split("|")[1:]
    # A B C, then C B A; a pass is one warm-up and that round's calls of one contender alone
    assert blocks == ["oooo", "ssss", "eeee", "eee", "sss", "ooo"]


def test_nothing_a_contender_keeps_is_alive_in_the_next_pass():
    kept: list[object] = []
    alive_during_baseline: list[int] = []
    kept_pass(lambda: object(), reps=3, after=kept.append)
    assert len(kept) == 3  # kept_pass keeps what it is told to keep...
    kept.clear()
    in_passes({"baseline": lambda: alive_during_baseline.append(len(kept))}, reps=2, rounds=1)
    assert alive_during_baseline == [0, 0, 0, 0]  # ...and in_passes never does


def test_ratios_are_ratios_of_medians():
    assert ratio([1.0, 2.0, 9.0], [1.0, 1.0, 1.0]) == 2.0


def test_the_docs_page_is_the_fixed_introduction_then_the_generated_tables_one_level_down():
    page = document("# Performance, measured side by side\n\n## Floors\n\n| a | b |\n")
    assert page.startswith("# Performance\n") and "Do not edit by\nhand" in page
    assert "## Performance, measured side by side" in page and "### Floors" in page
    assert "| a | b |" in page


def test_the_capture_benchmark_runs_its_three_states_on_the_same_work():
    """A smoke run (two calls each: no timing is asserted): the rows exist, name their state, and
    ours computes what transformers computes."""
    from attention_viz.backends.registry import load_backend
    from benchmarks.capture import bench_capture

    rows = bench_capture(load_backend("minilm"), [16], {16: 2}, fresh_at=(16,))
    assert [row["memory"] for row in rows] == ["recycled", "fresh", "ours: results kept + mapped ahead; baselines: fresh"]
    assert rows[2]["sdpa_ms"] == rows[1]["sdpa_ms"]  # the special state's baselines are the standard state's
    assert all(row["max_pattern_diff_vs_eager"] < 1e-4 and row["max_hidden_diff_vs_sdpa"] < 1e-4 for row in rows)
