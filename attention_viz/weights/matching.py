"""Does a checkpoint fit the model its config.json describes? Strict checks shared by every loader.

A model whose weights are partly missing runs anyway, on whatever its initialisation left there, and
its attention then looks as real as any other: so a checkpoint loads only when every tensor the
model needs is there with the right shape, and nothing is left over. Each refusal is one line that
names the first few offending tensors (a mismatched checkpoint can have hundreds).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ..errors import ModelError

NAMED = 5  # tensors named in a message; the rest are counted


def listed(names: Iterable[str], limit: int = NAMED) -> str:
    """``a, b, c, d, e and 3 more`` (sorted)."""
    names = sorted(names)
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def mismatch(missing: Iterable[str], unexpected: Iterable[str]) -> str:
    """``missing a, b; unexpected c`` (either part left out when empty), or "" when both are."""
    missing, unexpected = sorted(missing), sorted(unexpected)
    parts = [f"missing {listed(missing)}"] if missing else []
    parts += [f"unexpected {listed(unexpected)}"] if unexpected else []
    return "; ".join(parts)


def check_names(family: str, found: set[str], expected: set[str], ignored: set[str], n_layers: int) -> None:
    """ModelError naming the first missing and unexpected tensors of a checkpoint."""
    problems = mismatch(expected - found, found - expected - ignored)
    if problems:
        raise ModelError(f"{family} checkpoint does not match a {n_layers}-layer model: {problems}")


def check_shapes(family: str, found: Mapping[str, Sequence[int]], expected: Mapping[str, Sequence[int]]) -> None:
    """ModelError naming the first tensors whose shape is not the one the config implies.

    ``found``: checkpoint name → shape as stored; ``expected``: the same names → the shape the config
    implies, in the checkpoint's own layout (before any split or transpose).
    """
    wrong = sorted(name for name, shape in expected.items() if tuple(found[name]) != tuple(shape))
    if wrong:
        shown = "; ".join(
            f"{name} has shape {tuple(found[name])}, expected {tuple(expected[name])}" for name in wrong[:NAMED]
        )
        more = f"; and {len(wrong) - NAMED} more" if len(wrong) > NAMED else ""
        raise ModelError(f"{family} checkpoint does not fit its config: {shown}{more}")


def saved_head(names: Iterable[str], head: str, prefix: str, tied: bool) -> bool:
    """Whether a decoder checkpoint carries its LM head (``head``, or the embedding when ``tied``).

    A base model (``LlamaModel``, ``GPTNeoXModel``: embedding models ship this way) saves its
    tensors without the ``prefix`` its ForCausalLM class adds, and no head: it runs without one.
    A prefixed checkpoint without its head is an incomplete causal LM: True here, so the loader
    names the missing tensor.
    """
    names = set(names)
    return tied or head in names or any(name.startswith(prefix) for name in names)
