"""The report's coordinator-load and assignment-interval sections, from the pure cores' rows."""
from __future__ import annotations

from offsets_audit.audit import coordinator_load as L
from offsets_audit.audit import interval_whatif as W
from offsets_audit.audit.model import Event
from offsets_audit.audit.report import coordinator_load_section, interval_whatif_section, render_report

T0 = 1_754_000_040_000


def _load_rows():
    rows = [{"group_id": "big-app", "group_type": "consumer", "partition": 3, "offset": i, "timestamp": T0 + i * 1000,
             "assignment_epoch": i + 2, "assignment_timestamp": T0 + i * 1000, "num_members": 400,
             "assignor": "uniform", "rerun_cpu_ms": 150.0} for i in range(40)]
    rows.append({"group_id": "orders<script>", "group_type": "consumer", "partition": 3, "offset": 100,
                 "timestamp": T0 + 500, "assignment_epoch": 2, "assignment_timestamp": T0 + 500, "num_members": 2,
                 "assignor": "range", "rerun_cpu_ms": 0.2})
    return L.partition_load(L.runs_of(rows, L.measured_factors()), groups_on_partition=5)


def _whatif_rows():
    events = []
    for i in range(200):
        events += [Event("member_joined", "big-app", "consumer", 3, 2 * i, T0 + i * 300, f"m{i}", {}),
                   Event("group_epoch_bumped", "big-app", "consumer", 3, 2 * i + 1, T0 + i * 300, None,
                           {"old": i + 1, "new": i + 2}),
                   Event("target_assignment_computed", "big-app", "consumer", 3, 2 * i + 1, T0 + i * 300, None,
                           {"assignment_epoch": i + 2, "assignment_timestamp": T0 + i * 300})]
    history = W.group_history(events, end_time_ms=T0 + 70_000)
    rows = W.what_if_rows(history, W.GroupIntervals(0, 5000, interval_source="group config"), run_ms=150.0)
    return rows + W.cluster_rows(rows)


def test_sections_name_the_busy_partition_its_top_group_and_the_recommendation():
    load_html = coordinator_load_section(_load_rows())
    assert "big-app" in load_html and "<svg" in load_html and "orders&lt;script&gt;" in load_html
    assert "<script>" not in load_html
    whatif_html = interval_whatif_section(_whatif_rows())
    assert "big-app" in whatif_html and "each at its recommendation" in whatif_html
    assert "canComputeNextTargetAssignment" in whatif_html
    page = render_report({"run_id": "r", "coordinator_load": _load_rows(), "assignment_interval_whatif": _whatif_rows()})
    assert 'id="coordinator-load"' in page and 'id="interval-whatif"' in page


def test_sections_say_so_when_there_is_nothing():
    assert "No assignor runs" in coordinator_load_section([])
    assert "No consumer, share or streams group" in interval_whatif_section([])
    untimed = L.partition_load(L.runs_of([{"group_id": "g", "group_type": "consumer", "partition": 0, "offset": 1,
                                           "timestamp": T0, "assignment_epoch": 2, "assignment_timestamp": T0,
                                           "num_members": 1, "assignor": None, "rerun_cpu_ms": None}],
                                         L.measured_factors()))
    assert "No run was timed" in coordinator_load_section(untimed)


def test_an_incremental_runs_report_shows_the_load_or_says_why_it_was_not_estimated():
    page = render_report({"run_id": "i1", "summary": {"mode": "incremental", "stages": {
        "coordinator_load": "ran (the whole log so far)"}}, "coordinator_load": _load_rows(),
        "assignment_interval_whatif": []})
    assert "Not estimated" not in page and "big-app" in page
    page = render_report({"run_id": "i1", "summary": {"mode": "incremental", "stages": {
        "coordinator_load": "skipped: this checkpoint's earlier runs kept no coordinator run rows"}},
        "coordinator_load": [], "assignment_interval_whatif": []})
    assert page.count("Not estimated by this run: this checkpoint&#x27;s earlier runs kept no coordinator run "
                      "rows") == 1 and "No assignor runs" not in page
