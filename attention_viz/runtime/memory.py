"""Recycled memory for attention's (query × key) tensors: the scores and patterns.

At 512 tokens each layer writes a 12 MB pattern. Memory new to the process must first be mapped
and zeroed by the kernel, page by page, a sizeable share of a whole forward (`make bench` measures
it), and glibc hands freed blocks this large back to the kernel at once, so the next call pays it
again. Blocks of
:data:`MIN_BYTES` or more therefore come from here: once nothing uses a block any more it joins a
free list (at most :data:`limit_bytes` in all) and a later call of about the same size writes into
pages already mapped. A new block is advised to the kernel as huge pages (2 MB each, where the
kernel's transparent huge pages are on "madvise", as on Debian): a 2 MB page is one fault where 4 kB pages
are 512.

A block is free only when nothing refers to it. Each block is a byte tensor read through one numpy
array, the *owner*; every array, view and tensor handed out is made from the owner, and torch keeps
a reference to the array it was made from while numpy keeps one to the first array of a chain of
views whose own base is not an array, which is the owner. So the owner dies only after the last
user, and a ``weakref.finalize`` on it returns the block.

Blocks are handed out uninitialized: the caller writes every element (``baddbmm(..., out=)``), so
nothing crosses from one call to another. Taking and returning are single dict operations, atomic
under the GIL: concurrent calls never get the same block.

Recycling is opt-in, per call: the attention math allocates normally (``torch.empty``) unless the
caller runs inside :func:`recycling` (the app's cached runs, the benchmarks). With
``ATTENTION_VIZ_POISON_BLOCKS=1`` (or :data:`poison` set) every block is filled with NaN as it joins
the free list, so a block handed back while something still reads it shows as NaN in that reader
(the tests run the models both ways with it on).

A server that keeps its results (the app's cache) never gives their blocks back, so every new text
would map fresh memory again, whose pages a hypervisor must back anew (on the VMs we measure on, a
large share of a 512-token run). :func:`keep_ready`, called after such a run, maps
blocks of the sizes that run had to make, in a background thread at the lowest CPU priority, so the
next text writes into memory that is already there.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import math
import mmap
import os
import threading
import weakref
from collections.abc import Iterator

import numpy as np
import torch

from ..core.attention import scratch_allocator

MIN_BYTES = 1 << 20  # smaller blocks come back from glibc's heap already mapped
limit_bytes = 128 << 20  # free blocks kept at most; a 512-token minilm run uses 6 × 12 MB
_free: dict[int, torch.Tensor] = {}  # id → byte tensor nobody uses (tensors compare elementwise, not by identity)
_handed: collections.deque[int] = collections.deque(maxlen=256)  # sizes handed out since keep_ready last ran
_NUMPY = {torch.float32: np.float32, torch.float64: np.float64}
HUGE_PAGE = 2 << 20
_MADV_HUGEPAGE = getattr(mmap, "MADV_HUGEPAGE", None)  # Linux only
_madvise = ctypes.CDLL(None, use_errno=True).madvise if _MADV_HUGEPAGE is not None else None
poison = os.environ.get("ATTENTION_VIZ_POISON_BLOCKS") == "1"  # debug: NaN into every block handed back
if _madvise is not None:
    _madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]


def empty(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """An uninitialized contiguous CPU tensor, in recycled memory when it is large enough."""
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes < MIN_BYTES or dtype not in _NUMPY:
        return torch.empty(shape, dtype=dtype)
    if limit_bytes > 0:
        _handed.append(nbytes)
        block = _take(nbytes)
    else:
        block = _new_block(nbytes)
    owner = block.numpy()  # the only array made straight from the block: all users hang from it
    finalizer = weakref.finalize(owner, _give_back, block)
    finalizer.atexit = False
    return torch.from_numpy(owner[:nbytes].view(_NUMPY[dtype]).reshape(shape))


def _take(nbytes: int) -> torch.Tensor:
    """The smallest free block that holds ``nbytes`` without wasting more than as much again."""
    fitting = [(b.numel(), key) for key, b in list(_free.items()) if nbytes <= b.numel() <= 2 * nbytes]
    for _, key in sorted(fitting):
        block = _free.pop(key, None)  # None: another thread took it since the snapshot
        if block is not None:
            return block
    return _new_block(nbytes)


def _new_block(nbytes: int) -> torch.Tensor:
    """``nbytes`` of memory new to the process, starting on a huge-page boundary and advised as huge
    pages before anything touches it (advice is only a hint: without it the block is the same)."""
    raw = torch.empty(nbytes + HUGE_PAGE, dtype=torch.uint8)
    start = -raw.data_ptr() % HUGE_PAGE
    if _madvise is not None:
        _madvise(raw.data_ptr() + start, nbytes, _MADV_HUGEPAGE)
    return raw[start : start + nbytes]


def keep_ready() -> threading.Thread:
    """Have free blocks ready, mapped in the background, for the sizes handed out since the last
    call (as far as :data:`limit_bytes` allows): for a caller that keeps what it was handed and will
    soon ask for the same sizes again. Returns the thread (tests wait for it)."""
    sizes = []
    while _handed:
        sizes.append(_handed.popleft())
    thread = threading.Thread(target=_map_blocks, args=(sizes,), name="memory.keep_ready", daemon=True)
    thread.start()
    return thread


def _map_blocks(sizes: list[int]) -> None:
    """A free block for each of ``sizes``: one already free where it fits (as :func:`_take` would
    choose), else a new one with each page written once (the kernel and hypervisor map it then, not
    when a run writes it). Lowest priority: a browser drawing the last result on the same cores goes
    first."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)  # Linux: a thread's own nice value
    except (AttributeError, OSError):
        pass
    spare = sorted(b.numel() for b in list(_free.values()))
    for nbytes in sorted(sizes):
        fitting = [size for size in spare if nbytes <= size <= 2 * nbytes]
        if fitting:
            spare.remove(fitting[0])
            continue
        if free_bytes() + nbytes > limit_bytes:
            return
        block = _new_block(nbytes)
        block.numpy()[:: mmap.PAGESIZE] = 0  # numpy, not torch: one thread, this one, at this priority
        _free[id(block)] = block


@contextlib.contextmanager
def recycling() -> Iterator[None]:
    """The attention math of calls made inside this block (this thread or task only) takes its
    (query × key) tensors from :func:`empty`."""
    token = scratch_allocator.set(empty)
    try:
        yield
    finally:
        scratch_allocator.reset(token)


def _give_back(block: torch.Tensor) -> None:
    if poison:
        block.numpy().fill(255)  # all bits set: NaN in float32 and float64 (numpy: a block made under
        # inference_mode refuses torch's in-place writes outside it, where finalizers run)
    if free_bytes() + block.numel() <= limit_bytes:
        _free[id(block)] = block


def free_bytes() -> int:
    """Bytes held in free blocks (tests; the benchmark's fresh-memory runs)."""
    return sum(b.numel() for b in list(_free.values()))


def release() -> None:
    """Hand every free block back to the allocator and forget the sizes handed out."""
    _free.clear()
    _handed.clear()
