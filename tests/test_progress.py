"""Long jobs tell how far they are to whoever watches (runtime/progress.py): the reporter of the
calls a page makes, never another session's; and nothing at all when nobody watches."""

from __future__ import annotations

import threading

from attention_viz.analysis.detector import detect
from attention_viz.backends.registry import load_backend
from attention_viz.core.names import ENCODER_SELF
from attention_viz.runtime.progress import reporting, steps, time_left

TEXT = "The animal didn't cross the street because it was too tired."


def test_value_zeroing_reports_each_layer_up_to_done():
    backend = load_backend("minilm")
    result = backend.run(TEXT)
    seen: list[tuple[str, float]] = []
    with reporting(lambda what, fraction: seen.append((what, fraction))):
        backend.context_mixing(result, ("value_zeroing",))
    assert [fraction for _, fraction in seen] == [(i + 1) / 6 for i in range(6)]  # minilm's six layers
    assert all("value zeroing" in what for what, _ in seen)


def test_the_detector_reports_each_probe_and_nobody_hears_another_sessions_job():
    backend = load_backend("minilm")
    texts = backend.probe_texts(4)
    mine, other = [], []

    def elsewhere() -> None:  # a second session watching its own, shorter job at the same time
        with reporting(lambda what, fraction: other.append(fraction)):
            job = steps("its own job", 2)
            job.done()
            job.done()

    with reporting(lambda what, fraction: mine.append((what, fraction))):
        thread = threading.Thread(target=elsewhere)
        thread.start()
        detect(backend.run, texts, ENCODER_SELF)
        thread.join()
    assert [fraction for _, fraction in mine] == [0.25, 0.5, 0.75, 1.0]
    assert other == [0.5, 1.0]
    steps("unwatched", 3).done()  # no reporter: nothing happens, nothing fails


def test_the_time_left_follows_the_pace():
    assert time_left(0.0, 5.0) == "" and time_left(1.0, 5.0) == ""
    assert time_left(0.5, 10.0) == "about 10 s left"
    assert time_left(0.25, 60.0) == "about 3 min left"
    assert time_left(0.99, 1.0) == "under a second left"
