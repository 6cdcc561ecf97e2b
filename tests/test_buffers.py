"""Recycled (query × key) memory: a block is reused only once nothing refers to it, never shared
between concurrent calls, and a kept result never changes."""

import contextlib
import ctypes
import gc
import threading

import numpy as np
import pytest
import torch

from attention_viz.runtime import memory as buffers
from attention_viz.core.hooks import capture
from attention_viz.core.model import Transformer, TransformerConfig
from attention_viz.core.result import AttentionResult
from attention_viz.inputs.tokens import Tokens

SHAPE = (2, 512, 512)  # 2 MB of float32: above buffers.MIN_BYTES


@pytest.fixture(autouse=True)
def empty_free_list():
    gc.collect()  # a result an earlier test left in a reference cycle would return its blocks mid-test
    buffers.release()
    yield
    buffers.release()


def test_a_block_returns_only_after_its_last_user_is_gone():
    tensor = buffers.empty(SHAPE, torch.float32)
    users = [tensor.numpy()[1], tensor[0, :3], tensor.numpy().reshape(-1)[::7], np.asarray(tensor)]
    del tensor
    gc.collect()
    while users:
        assert buffers.free_bytes() == 0  # a view of it is still alive
        users.pop()
        gc.collect()
    assert buffers.free_bytes() >= 4 * np.prod(SHAPE)


def test_a_free_block_is_reused_for_a_similar_size_only():
    first = buffers.empty((4, 512, 512), torch.float32)  # 4 MB
    address = first.data_ptr()
    del first
    smaller = buffers.empty((1, 400, 512), torch.float32)  # 0.8 MB: under MIN_BYTES, from torch
    assert smaller.data_ptr() != address
    much_smaller = buffers.empty((1, 512, 600), torch.float32)  # 1.2 MB: less than half of 4 MB
    assert much_smaller.data_ptr() != address
    again = buffers.empty((4, 500, 512), torch.float32)  # a little smaller: fits
    assert again.data_ptr() == address and again.shape == (4, 500, 512) and again.is_contiguous()
    assert buffers.free_bytes() == 0


def test_nothing_is_kept_beyond_the_limit(monkeypatch):
    monkeypatch.setattr(buffers, "limit_bytes", 3 << 20)
    blocks = [buffers.empty(SHAPE, torch.float32) for _ in range(3)]
    del blocks
    gc.collect()
    assert buffers.free_bytes() == 2 << 20  # one 2 MB block fits under 3 MB, a second does not
    monkeypatch.setattr(buffers, "limit_bytes", 0)
    assert buffers.empty(SHAPE, torch.float32).data_ptr() != 0 and buffers.free_bytes() == 2 << 20


def test_concurrent_callers_never_share_a_block():
    failures = []

    def worker(value: float) -> None:
        for _ in range(50):
            tensor = buffers.empty(SHAPE, torch.float32)
            tensor.fill_(value)
            if not bool((tensor == value).all()):  # another thread wrote into the same block
                failures.append(value)

    threads = [threading.Thread(target=worker, args=(float(i),)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


def test_a_kept_result_is_untouched_by_later_runs():
    """As in the app's cache: the first result stays alive while other texts run on the same model."""
    config = TransformerConfig(shape="encoder-only", vocab_size=50, d_model=16, h=2, d_ff=32, N=2, max_len=600,
                               dropout=0.0)
    torch.manual_seed(0)
    model = Transformer(config).eval()

    def run(seed: int) -> AttentionResult:
        ids = torch.randint(0, 50, (1, 520), generator=torch.Generator().manual_seed(seed))
        n = ids.size(1)
        tokens = Tokens("", tuple(ids[0].tolist()), ("x",) * n, (None,) * n, (False,) * n, (False,) * n, (None,) * n)
        with torch.inference_mode(), buffers.recycling(), capture() as recorded:
            model(ids)
        return AttentionResult.from_recorder("tiny", tokens, recorded)

    kept = run(0)
    snapshot = {name: array.copy() for name, array in kept.arrays.items()}
    assert all(array.nbytes >= buffers.MIN_BYTES for array in snapshot.values())  # they did come from here
    for seed in (1, 2, 3):
        other = run(seed)
        assert not any(np.array_equal(other.arrays[n], snapshot[n]) for n in snapshot)
        del other  # its blocks go back and serve the next run
    assert all(np.array_equal(kept.arrays[n], snapshot[n]) for n in snapshot)
    for pattern in kept.arrays.values():
        np.testing.assert_allclose(pattern.sum(-1), 1.0, rtol=1e-5)


def test_a_new_block_starts_on_a_huge_page_boundary():
    """So that the kernel can map it 2 MB at a time (the huge-page advice covers the block from its start)."""
    buffers.release()
    for shape in ((512, 512, 12), (3, 700, 700)):
        block = buffers.empty(shape, torch.float32)
        assert block.data_ptr() % buffers.HUGE_PAGE == 0
        block.fill_(1.0)
        assert float(block.sum()) == block.numel()


def test_keep_ready_maps_blocks_for_the_sizes_just_handed_out_when_they_are_kept():
    """As the app's cache does: the results keep their blocks, so the next run would need new ones;
    keep_ready makes them beforehand, and the next run of those sizes gets them."""
    kept = [buffers.empty(SHAPE, torch.float32), buffers.empty((3, 512, 512), torch.float32)]
    buffers.keep_ready().join()
    assert buffers.free_bytes() == (2 + 3) << 20
    ready = {block.data_ptr() for block in buffers._free.values()}
    again = [buffers.empty(SHAPE, torch.float32), buffers.empty((3, 512, 512), torch.float32)]
    assert {tensor.data_ptr() for tensor in again} == ready and buffers.free_bytes() == 0
    del kept
    gc.collect()  # two blocks come back: the next call finds them free and maps nothing new
    buffers.keep_ready().join()
    assert buffers.free_bytes() == (2 + 3) << 20 and not {b.data_ptr() for b in buffers._free.values()} & ready


def test_keep_ready_stays_under_the_limit(monkeypatch):
    monkeypatch.setattr(buffers, "limit_bytes", 5 << 20)
    kept = [buffers.empty(SHAPE, torch.float32) for _ in range(4)]  # 8 MB handed out
    buffers.keep_ready().join()
    assert buffers.free_bytes() == 4 << 20 and len(kept) == 4


def _tiny_run(model: Transformer, seed: int, recycled: bool) -> dict[str, np.ndarray]:
    ids = torch.randint(0, 50, (1, 520), generator=torch.Generator().manual_seed(seed))
    with torch.inference_mode(), buffers.recycling() if recycled else contextlib.nullcontext(), \
            capture(kinds=("scores", "pattern")) as recorded:
        model(ids) if model.config.shape != "encoder-decoder" else model(ids, ids[:, :300])
    return {name: recorded[name][0].numpy() for name in recorded.names_recorded()}


@pytest.mark.parametrize("shape", ["encoder-only", "decoder-only", "encoder-decoder"])
def test_recycled_runs_equal_plain_ones_with_every_returned_block_poisoned(shape, monkeypatch):
    """The models run both ways: plain allocation (the reference math) and recycled memory with the
    debug switch that writes NaN into every block handed back. Results kept while later runs reuse
    the blocks stay equal to the plain runs: no block is handed back while anything still reads it."""
    monkeypatch.setattr(buffers, "poison", True)
    config = TransformerConfig(shape=shape, vocab_size=50, d_model=16, h=2, d_ff=32, N=2, max_len=600, dropout=0.0)
    torch.manual_seed(0)
    model = Transformer(config).eval()
    plain = [_tiny_run(model, seed, recycled=False) for seed in range(3)]
    assert buffers.free_bytes() == 0  # the reference path never touches the free list
    kept = [_tiny_run(model, seed, recycled=True) for seed in range(3)]
    gc.collect()
    for _ in range(2):  # more runs whose blocks come and go: each returned block is filled with NaN
        _tiny_run(model, 9, recycled=True)
        gc.collect()
    assert buffers.free_bytes() > 0  # blocks were handed back (and poisoned) meanwhile
    for reference, recycled in zip(plain, kept):
        assert reference.keys() == recycled.keys()
        for name in reference:
            np.testing.assert_array_equal(recycled[name], reference[name], err_msg=name)


def test_poison_marks_a_block_that_comes_back(monkeypatch):
    """The debug switch itself: a block handed back reads as NaN through a view made behind the
    owner's back (what a bug would look like)."""
    monkeypatch.setattr(buffers, "poison", True)
    tensor = buffers.empty(SHAPE, torch.float32)
    tensor.fill_(1.0)
    # a view made from the raw address, not from the owner: it keeps nothing alive
    stolen = np.ctypeslib.as_array((ctypes.c_float * tensor.numel()).from_address(tensor.data_ptr()))
    del tensor
    gc.collect()
    assert buffers.free_bytes() > 0 and bool(np.isnan(stolen).all())
