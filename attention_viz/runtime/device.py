"""Where a model runs and in which floating-point type: a request (``--device``, ``av.run(device=)``),
else the operator's ``ATTENTION_VIZ_DEVICE`` / ``ATTENTION_VIZ_DTYPE``, else what the machine has.

``auto`` is CUDA when torch sees a GPU, else the CPU. The dtype defaults to float32 on the CPU and
bfloat16 on CUDA (half the memory of float32, the range of float32). Whatever the weights' type,
attention scores and patterns are computed in float32 (core/attention.py).

Names only here: torch is imported when ``auto`` or ``cuda`` must be checked, so a process that
asks for the CPU, or that never loads a model, does not load torch for this.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import ModelError
from .settings import DEVICE_ENV, DTYPE_ENV, requested_placement

if TYPE_CHECKING:
    import torch

DEVICES = ("auto", "cpu", "cuda")
DTYPES = ("float32", "bfloat16", "float16")
DEFAULT_DTYPES = {"cpu": "float32", "cuda": "bfloat16"}


@dataclass(frozen=True)
class Placement:
    """A resolved device ("cpu" or "cuda") and dtype name; ``automatic``: the device came from
    ``auto``, so a model that runs on the CPU only may stay there (:meth:`on_cpu`)."""

    device: str = "cpu"
    dtype: str = "float32"
    automatic: bool = False
    dtype_chosen: bool = False  # the dtype was asked for, not the device's default

    @property
    def torch_dtype(self) -> torch.dtype:
        import torch

        return getattr(torch, self.dtype)

    @property
    def key(self) -> str:
        """What tells two loads of one model apart (the model cache's key has it)."""
        return f"{self.device}/{self.dtype}"

    def on_cpu(self, model: str) -> Placement:
        """This placement for a model that runs on the CPU in float32 only: itself when it is
        that, the CPU when the device was ``auto`` and no other dtype was asked for; a ModelError
        otherwise."""
        if self.device == "cpu" and self.dtype == "float32":
            return self
        if self.automatic and not self.dtype_chosen:
            return CPU
        raise ModelError(f"{model} runs on the CPU in float32 only; asked for {self}: use device cpu (or auto) "
                         "and dtype float32")

    def __str__(self) -> str:
        return f"{self.device}, {self.dtype}"


CPU = Placement()


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def resolve(device: str | None = None, dtype: str | None = None, *, available: bool | None = None) -> Placement:
    """The placement for a request; None: the environment's, else ``auto`` and the device's default
    dtype. ``available``: whether CUDA is there (None: ask torch). A value that cannot be honoured is
    a one-line ModelError naming where it came from (the request or the environment variable)."""
    device_name, dtype_name = "device", "dtype"
    env_device, env_dtype = requested_placement()
    if device is None and env_device is not None:
        device, device_name = env_device, DEVICE_ENV
    if dtype is None and env_dtype is not None:
        dtype, dtype_name = env_dtype, DTYPE_ENV
    asked = (device or "auto").strip().lower()
    if asked not in DEVICES:
        raise ModelError(f"{device_name} must be one of {', '.join(DEVICES)}; got {device!r}")
    if dtype is not None and dtype.strip().lower() not in DTYPES:
        raise ModelError(f"{dtype_name} must be one of {', '.join(DTYPES)}; got {dtype!r}")
    if asked == "cpu":
        chosen = "cpu"
    else:
        has_cuda = cuda_available() if available is None else available
        if asked == "cuda" and not has_cuda:
            raise ModelError(f"{device_name} cuda: CUDA is not available on this machine (torch sees no GPU); "
                             "ask for cpu or auto")
        chosen = "cuda" if has_cuda else "cpu"
    named = None if dtype is None else dtype.strip().lower()
    return Placement(chosen, named or DEFAULT_DTYPES[chosen], automatic=asked == "auto", dtype_chosen=named is not None)
