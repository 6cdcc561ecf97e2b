"""Heavy work on a shared server: at most the configured number of computations at once, one more
refused with one plain line (never queued, never cached), nested heavy work inside a slot allowed;
the detector page says so while the server is full, and computes once a slot is free."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from apphelpers import app, charts

from attention_viz.errors import ModelError, ServerBusy
from attention_viz.ui import ablation_cache
from attention_viz.ui.heavy import HEAVY_SLOTS_ENV, HeavyGate, configured_slots, heavy


@contextmanager
def held(gate: HeavyGate, slots: int) -> Iterator[None]:
    """``slots`` slots of ``gate`` taken by other threads (other sessions) until the block ends."""
    taken, release = threading.Barrier(slots + 1), threading.Event()

    def hold() -> None:
        with gate("someone else's work"):
            taken.wait()
            release.wait()

    threads = [threading.Thread(target=hold) for _ in range(slots)]
    for thread in threads:
        thread.start()
    taken.wait()
    try:
        yield
    finally:
        release.set()
        for thread in threads:
            thread.join()


def test_one_more_than_the_slots_is_refused_then_admitted_once_one_is_free():
    gate = HeavyGate(2)
    with held(gate, 1):
        with gate("a second job"):  # a slot is still free
            pass
    with held(gate, 2):
        with pytest.raises(ServerBusy, match="busy with other heavy work, so the study was not started"):
            with gate("the study"):
                pytest.fail("ran without a slot")
    with gate("the study"):  # both released
        pass
    assert issubclass(ServerBusy, ModelError)  # one line in the UI and the CLI, like every user-facing error


def test_heavy_work_inside_a_slot_may_start_more_heavy_work():
    gate, inner = HeavyGate(1), []
    with gate("the study"):
        with gate("the probe set"):  # the same thread: no second slot needed, no self-refusal
            inner.append(True)
    assert inner == [True]
    with gate("again"):  # every level released
        pass


def test_the_operator_sets_the_slots_and_a_typo_falls_back(monkeypatch):
    monkeypatch.setenv(HEAVY_SLOTS_ENV, "3")
    assert configured_slots() == 3
    monkeypatch.delenv(HEAVY_SLOTS_ENV)
    default = configured_slots()
    assert default >= 1
    for typo in ("0", "-1", "two", "1.5"):
        monkeypatch.setenv(HEAVY_SLOTS_ENV, typo)
        assert configured_slots() == default


def test_the_detector_page_says_the_server_is_busy_and_works_once_it_is_not():
    ablation_cache.probe_runs.clear()  # the probe set is the heavy part: not computed yet
    with held(heavy, heavy.slots):
        busy = app(model="induction", text="a b c a b c", view="detector")
        assert not busy.exception
        assert any("busy with other heavy work" in e.value for e in busy.error)
        assert not any("score" in str(c["layout"].get("title", {}).get("text", "")) for c in charts(busy))
    busy.run()  # the refusal was not cached: the next run computes
    assert not busy.exception and not busy.error
    assert len(charts(busy)) >= 5


def test_a_longer_inputs_flow_waits_for_a_free_slot_while_the_rest_of_the_page_draws():
    from attention_viz.ui.views import layers

    # 44 tokens: past the gate (HEAVY_FLOW_TOKENS), inside the flow's own budget (67 on minilm)
    long_text = " ".join(["The animal didn't cross the street because it was too tired."] * 3)
    layers.flow_cached.clear()
    with held(heavy, heavy.slots):
        busy = app(text=long_text, view="layers")
        assert not busy.exception and not busy.error
        assert any("busy with other heavy work, so the attention flow" in i.value.replace("\\", "")
                   for i in busy.info)
        titles = [str(c["layout"].get("title", {}).get("text", "")) for c in charts(busy)]
        assert any(t.startswith("rollout") for t in titles) and not any("flow" in t for t in titles)
    busy.run()
    assert any("flow" in str(c["layout"].get("title", {}).get("text", "")) for c in charts(busy))
    short = app(view="layers")  # a sentence's flow needs no slot: drawn even while the server is full
    with held(heavy, heavy.slots):
        short.run()
        assert any("flow" in str(c["layout"].get("title", {}).get("text", "")) for c in charts(short))
