"""docs/performance.md says by how much a missed floor misses, and where a missed first visit's or
Enter's seconds went, from the measured parts only (benchmarks/run.py)."""

from benchmarks.run import ENTER_FLOOR, FIRST_VISIT_FLOOR, browser_misses, floors, markdown


def browser(visit: float, visit_server: float, enter: float, enter_server: float) -> dict:
    return {"cold_start_s": [visit + 1, visit + 1], "first_visit_s": [visit, visit],
            "first_visit_message_s": [visit_server, visit_server], "link_to_heatmap_s": [0.5],
            "enter_to_heatmap_s": {"512": [enter] * 3}, "enter_to_heatmap_message_s": {"512": [enter_server] * 3}}


def test_a_missed_first_visit_and_enter_say_by_how_much_and_where_the_seconds_went():
    b = browser(FIRST_VISIT_FLOOR + 1.25, 3.5, ENTER_FLOOR + 0.1, 0.3)
    visit, enter = [line for line in browser_misses(b) if line]
    assert f"by {1.25:.2f} s" in visit and "3.50 s" in visit and f"{FIRST_VISIT_FLOOR + 1.25 - 3.5:.2f} s" in visit
    assert f"by {0.1:.2f} s" in enter and "0.30 s" in enter and f"{ENTER_FLOOR + 0.1 - 0.3:.2f} s" in enter
    report = {"machine": {"date": "d", "cpu": "c", "cores": 2, "torch": "t", "torch_threads": 2, "environment": {},
                          "load_average_start": 1.0, "load_average_end": 1.0}, "browser": b}
    report["floors"] = floors(report)
    page = markdown(report, "python -m benchmarks.run")
    assert "| MISSED by 1.25 s |" in page and "| MISSED by 0.10 s |" in page and visit in page


def test_met_floors_say_nothing_more():
    b = browser(FIRST_VISIT_FLOOR - 0.5, 2.0, ENTER_FLOOR - 0.1, 0.2)
    assert browser_misses(b) == []
    assert all(c["ok"] for c in floors({"browser": b}))
