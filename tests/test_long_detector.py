"""The head detector on a text past the capture limit (analysis/long_detector.py): each score's counted
rows and target cells are those of the dense masks of analysis/detector.py; summed from scattered cells
with the kept normalizers (numpy's or the torch twin's) they give the scores of the captured patterns;
rows are sampled evenly past the limit, and the scores then are the mean over those rows."""

from __future__ import annotations

import numpy as np
import pytest

from test_long_input import folders, small  # noqa: F401 - the fixtures

from attention_viz.analysis import blockwise
from attention_viz.analysis.detector import MASKS, SCORES, head_scores, offset_mask
from attention_viz.analysis.detector_view import OFFSET
from attention_viz.analysis.long_detector import _evenly, long_scores, targets
from attention_viz.analysis.long_input import LongInput
from attention_viz.backends.long_passes import TORCH_PASSES
from attention_viz.core import blockwise_torch


def dense(name: str, ids: np.ndarray, special: np.ndarray, offset: int):
    return ({**MASKS, OFFSET: offset_mask(offset)})[name](ids, special, True)


@pytest.mark.parametrize("offset", [-3, 0, 2])
@pytest.mark.parametrize("with_special", [False, True])
def test_targets_are_the_dense_masks_cells(offset, with_special):
    rng = np.random.default_rng(offset + 10)
    ids = rng.integers(0, 12, 300)
    special = np.zeros(300, dtype=bool)
    if with_special:
        special[[0, 150]] = True
    for name in (*SCORES, OFFSET):
        mask, rows = dense(name, ids, special, offset)
        t = targets(name, ids, special, offset)
        assert t.rows.tolist() == np.flatnonzero(rows).tolist(), name
        mine = sorted(zip(t.rows[t.cell_rows].tolist(), t.cell_keys.tolist(), strict=True))
        theirs = sorted(zip(*np.nonzero(mask & rows[:, None])))
        assert mine == [(int(r), int(c)) for r, c in theirs], name


def test_rows_past_the_limit_are_taken_evenly():
    rows = np.arange(10, 1010)
    taken = _evenly(rows, 100)
    assert len(taken) == 100 and taken[0] == 10 and taken[-1] == 1009 and np.all(np.diff(taken) >= 9)
    ids = np.random.default_rng(0).integers(0, 5, 2000)
    t = targets("duplicate_token", ids, np.zeros(2000, dtype=bool), most=64)
    assert len(t.rows) == 64 and set(t.cell_rows.tolist()) == set(range(64))


def test_scores_from_scattered_cells_are_the_captured_patterns_scores(small):  # noqa: F811
    long, patterns = small
    stack = np.stack(patterns)  # (layers, heads, T, T)
    ids, special = np.asarray(long.tokens.ids), np.asarray(long.tokens.special)
    expected = head_scores([(stack, ids, special)], {**MASKS, OFFSET: offset_mask(-2)})
    for passes in (long.passes, TORCH_PASSES):
        summed = long_scores(LongInput(long.model, long.tokens, long.kept, 0, passes), -2, most=10_000)
        mine = head_scores([], {**MASKS, OFFSET: offset_mask(-2)}, summed)
        for name in expected:
            assert np.abs(mine[name] - expected[name]).max() <= 1e-5, name
    sampled = long_scores(long, -2, most=50)
    for name, (sums, rows) in sampled.items():
        t = targets(name, ids, special, -2, most=50)
        assert rows == len(t.rows) <= 50
        shares = np.zeros((len(t.rows), *stack.shape[:2]))
        np.add.at(shares, t.cell_rows, np.moveaxis(stack[:, :, t.rows[t.cell_rows], t.cell_keys], -1, 0))
        assert np.abs(sums - shares.sum(0)).max() <= 1e-5, name


def test_cells_are_zero_in_the_future_and_outside_the_window():
    rng = np.random.default_rng(3)
    q, k = (rng.standard_normal((200, 8)).astype(np.float32) for _ in range(2))
    lse = blockwise.normalizers(q, k, range(200), window=30)
    rows, keys = np.array([50, 50, 50, 50, 199]), np.array([60, 50, 21, 20, 170])
    exact = np.concatenate([blockwise.pattern_block(q, k, range(r, r + 1), range(c, c + 1), window=30)[0]
                            for r, c in zip(rows, keys, strict=True)])
    for mine in (blockwise.cells(q, k, lse, rows, keys, window=30, chunk=2),
                 blockwise_torch.cells(q, k, lse, rows, keys, window=30, chunk=3)):
        assert mine[0] == 0.0 and mine[3] == 0.0 and mine[2] > 0 and mine[4] > 0  # the future and 30 back: 0; 29 back seen
        assert np.abs(mine - exact).max() <= 1e-6


def test_the_detector_page_scores_a_long_text_whole(folders):  # noqa: F811
    from apphelpers import app
    from single_view import array, figures, problems
    from test_long_input import LENGTH, long_text

    from attention_viz.analysis.detector_view import long_detector_scores
    from attention_viz.backends.registry import load_backend
    from attention_viz.core.names import DECODER_SELF

    model, text = f"hf:{folders / 'llama'}", long_text()
    at = app(view="detector", model=model, text=text)
    assert problems(at) == [] and not at.warning
    assert any(f"{LENGTH + 1:,} tokens" in info.value and "target cells" in info.value for info in at.info)
    at.slider(key="detector_offset").set_value(-1).run()
    assert problems(at) == []
    drawn = [array(spec["data"][0]["z"]) for spec in figures(at)]
    backend = load_backend(model)
    long = backend.long_input(*backend.long_tokens(text))
    probes = [backend.run(probe) for probe in backend.probe_texts()]
    expected = long_detector_scores(probes, long_scores(long, -1), DECODER_SELF, -1)
    names = (*SCORES, OFFSET)
    assert len(drawn) == 6
    for mine, name in zip(drawn, names[0::2] + names[1::2], strict=True):  # two columns, the left one first
        assert np.abs(mine - expected[name]).max() <= 1e-6, name
    assert np.abs(expected["previous_token"] - expected[OFFSET]).max() <= 1e-9  # offset −1 is the previous token
