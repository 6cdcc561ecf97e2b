"""A long input's layers run when a view first asks for them: the landing head view (layer 0, head 0)
runs one head of the fused kernel and no layer above; any order of asking, from any number of
threads, gives the same bits, each head run once; the values are the model's own forward's."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

from attention_viz.core import longcontext
from attention_viz.core.hooks import capture
from attention_viz.core.model import Transformer, TransformerConfig

LENGTH = 1500  # three of the kernel's 512-query blocks of a windowed layer


def decoder(window: int | None) -> Transformer:
    """Three rotary GQA layers (4 query heads on 2 K/V heads), seeded."""
    torch.manual_seed(0)
    config = TransformerConfig(shape="decoder-only", vocab_size=50, d_model=32, h=4, n_kv_heads=2, d_ff=64, N=3,
                               max_len=2048, positional="rotary", norm="pre", norm_type="rms", activation="silu",
                               gated_ffn=True, dropout=0.0, sliding_window=window)  # fmt: skip
    return Transformer(config).eval()


@pytest.fixture
def counted(monkeypatch):
    """Query heads per call of the fused kernel, and the layers whose q/k projections ran."""
    heads, opened = [], []
    kernel, projections = longcontext._FLASH_CPU, longcontext._queries_keys

    def counting_kernel(q, k, v, *args, **kwargs):
        heads.append(q.shape[1])
        return kernel(q, k, v, *args, **kwargs)

    def counting_projections(attn, x):
        opened.append(attn)
        return projections(attn, x)

    monkeypatch.setattr(longcontext, "_FLASH_CPU", counting_kernel)
    monkeypatch.setattr(longcontext, "_queries_keys", counting_projections)
    return heads, opened


def everything(kept) -> list[np.ndarray]:
    return [a for layer in range(kept.n_layers) for a in (*kept.layer(layer), kept.normalizers(layer))]


def test_the_landing_head_runs_one_head_of_layer_0_and_the_rest_when_asked(counted):
    heads, opened = counted
    model, ids = decoder(None), torch.randint(0, 50, (1, LENGTH))
    kept = longcontext.queries_and_keys(model, ids)
    assert heads == [] and opened == []  # reading the text runs no layer
    kept.normalizers(0, 0)
    assert heads == [1] and opened == [model.decoder.layers[0].self_attn]
    kept.head(0, 2)  # q/k of a layer already made: nothing runs
    assert heads == [1] and len(opened) == 1
    kept.normalizers(0, 3)  # another head of the frontier: that head alone
    assert heads == [1, 1]
    kept.layer(2)  # layer 0's other two heads in one call, layer 1 whole, layer 2's q/k
    assert heads == [1, 1, 2, 4] and len(opened) == 3
    kept.normalizers(2)  # the last layer: every head in one call (keys standing in for values)
    kept.normalizers(1, 2)
    assert heads == [1, 1, 2, 4, 4] and len(opened) == 3
    assert kept._x is None and kept._v is None and not kept._contexts  # nothing left of the forward but q/k/lse


@pytest.mark.parametrize("window", [None, 200])
def test_every_order_of_asking_gives_the_same_bits(window):
    model, ids = decoder(window), torch.randint(0, 50, (1, LENGTH))
    at_once = longcontext.queries_and_keys(model, ids)
    at_once.layer(2)  # every layer below whole, as one forward would
    reference = everything(at_once)
    for ask in ([(0, 0), (0, 2), (1, 3), (2, 1)], [(2, 0)], [(1, None), (0, 1)], [(0, h) for h in range(4)]):
        kept = longcontext.queries_and_keys(model, ids)
        for layer, head in ask:
            kept.normalizers(layer, head)
        assert all(np.array_equal(a, b) for a, b in zip(everything(kept), reference))


def test_the_values_are_the_models_own_forwards():
    """Asked the landing's way (layer 0 run one head first, the rest later), every layer's q/k, and the
    exact cells made with the kernel's normalizers, equal the model's own windowed forward."""
    model, ids = decoder(200), torch.randint(0, 50, (1, LENGTH))
    with torch.inference_mode(), capture(kinds=("q", "k", "pattern")) as recorded:
        model(ids)
    kept = longcontext.queries_and_keys(model, ids)
    kept.normalizers(0, 1)
    rows, cols = range(LENGTH - 300, LENGTH), range(LENGTH - 500, LENGTH)
    for layer in range(3):
        prefix = f"decoder.layers.{layer}.self_attn"
        q, k = kept.layer(layer)
        assert np.abs(q - recorded[f"{prefix}.q"][0].numpy()).max() <= 1e-5
        assert np.abs(k - recorded[f"{prefix}.k"][0].numpy()).max() <= 1e-5
        for head in range(4):
            q, k = kept.head(layer, head)
            scaled = q[rows.start :] @ k[cols.start :].T / np.sqrt(q.shape[-1])
            gone = (np.arange(cols.start, cols.stop)[None, :] > np.arange(rows.start, rows.stop)[:, None]) | (
                np.arange(cols.start, cols.stop)[None, :] <= np.arange(rows.start, rows.stop)[:, None] - 200)
            cells = np.where(gone, 0.0, np.exp(scaled - kept.normalizers(layer, head)[rows.start :, None]))
            captured = recorded[f"{prefix}.pattern"][0, head].numpy()[rows.start :, cols.start :]
            assert np.abs(cells - captured).max() <= 1e-5


def test_sessions_asking_for_different_layers_at_once_run_each_head_once(counted):
    heads, _ = counted
    model, ids = decoder(None), torch.randint(0, 50, (1, LENGTH))
    reference = longcontext.queries_and_keys(model, ids)
    reference.layer(2)
    expected = everything(reference)
    heads.clear()
    kept = longcontext.queries_and_keys(model, ids)
    start, errors = threading.Barrier(3), []

    def session(*asks: tuple[int, int | None]) -> None:
        start.wait()
        try:
            for layer, head in asks:
                kept.normalizers(layer, head)
        except Exception as error:  # noqa: BLE001 (re-raised below, in the test's thread)
            errors.append(error)

    threads = [threading.Thread(target=session, args=asks) for asks in
               ([(2, None)], [(0, 0), (1, 2)], [(1, None), (0, 3)])]  # fmt: skip
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sum(heads) == 3 * 4  # every head of every layer through the kernel once
    assert all(np.array_equal(a, b) for a, b in zip(everything(kept), expected))


def test_rotary_angles_are_made_once_per_length_with_the_same_bits(monkeypatch):
    """Every layer of a long input, and the next input of the same length, rotate with the cos/sin
    the first layer made (32k positions: 7-15 ms a call); the same bits as making them per call; a
    forward with gradients after inference-mode ones at the same length still runs backward."""
    from attention_viz.core import positional

    lengths, angles = [], positional.rotary_angles
    monkeypatch.setattr(positional, "rotary_angles", lambda positions, *a, **k: lengths.append(len(positions)) or
                        angles(positions, *a, **k))
    model, n = decoder(None), LENGTH + 7  # a length no other test asks for
    for _ in range(2):  # two inputs of n tokens
        longcontext.queries_and_keys(model, torch.randint(0, 50, (1, n))).layer(2)  # three layers' q/k
    assert lengths.count(n) == 1
    rotary, q, k = model.decoder.layers[0].self_attn.rotary, torch.randn(2, 4, n, 8), torch.randn(2, 2, n, 8)
    fresh = angles(torch.arange(n), rotary.d_rot, rotary.base)
    for made, by_hand in zip(rotary(q, k), (q, k)):
        assert torch.equal(made, positional.apply_rotary(by_hand, fresh.cos(), fresh.sin()))
    ids = torch.randint(0, 50, (1, 64))
    with torch.inference_mode():
        model(ids)
    model(ids).sum().backward()  # the shared cos/sin are no inference tensors
    assert model.decoder.layers[0].self_attn.w_q.weight.grad is not None


def test_layers_that_do_not_fit_beside_the_kept_ones_move_the_lowest_to_host_memory():
    """The room the memory plan makes before each layer: asked with the bytes kept on the device, the
    lowest layers move out until as many have gone; every read is unchanged, a moved head comes back."""
    model, ids = decoder(None), torch.randint(0, 50, (1, LENGTH))
    asked = []

    def room(layer: int, movable: int) -> int:
        asked.append((layer, movable))
        return 1 if layer >= 1 else 0  # one byte short from layer 1 on: one layer moves each time

    plain = longcontext.queries_and_keys(model, ids, on_device=True)
    kept = longcontext.queries_and_keys(model, ids, on_device=True, room=room)
    layer_bytes = sum(t.nbytes for t in plain.layer(0))
    kept.normalizers(2)
    assert kept.moved == [0, 1]
    assert asked == [(0, 0), (1, layer_bytes), (2, layer_bytes)]  # layer 0 had gone when layer 2 was asked
    for layer in range(3):
        for head in range(4):
            for mine, theirs in zip(kept.head(layer, head), plain.head(layer, head), strict=True):
                assert torch.equal(mine, theirs)
        np.testing.assert_array_equal(kept.normalizers(layer), plain.normalizers(layer))


def test_a_room_that_refuses_stops_the_layer_before_it_runs():
    from attention_viz.errors import ModelError

    def room(layer: int, movable: int) -> int:
        if layer == 1:
            raise ModelError("layer 1 does not fit")
        return 0

    kept = longcontext.queries_and_keys(decoder(None), torch.randint(0, 50, (1, LENGTH)), room=room)
    kept.normalizers(0, 0)  # the landing needs layer 0 alone
    with pytest.raises(ModelError, match="layer 1 does not fit"):
        kept.head(1, 0)
