"""VerifyReport: at most MAX_REPORTED_PER_KIND problems per area, the rest counted as suppressed."""
from __future__ import annotations

from mqtool_store.verify import MAX_REPORTED_PER_KIND, VerifyReport


def test_each_area_reports_its_first_problems_and_counts_the_rest():
    report = VerifyReport("root")
    for i in range(MAX_REPORTED_PER_KIND + 30):
        report.add("consumequeue", "cq", i, f"unit {i}")
        if i % 10 == 0:
            report.add("index", "idx", i, f"entry {i}")
    cq = [p for p in report.problems if p.area == "consumequeue"]
    assert [p.offset for p in cq] == list(range(MAX_REPORTED_PER_KIND))     # the first ones, in order
    assert report.suppressed == {"consumequeue": 30}
    assert len([p for p in report.problems if p.area == "index"]) == 8       # another area: its own count
    report.add("commitlog", "cl", 0, "bad")
    assert report.problems[-1].area == "commitlog" and not report.ok
    assert report.to_dict()["suppressed"] == {"consumequeue": 30}
