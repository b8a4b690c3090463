"""An incremental run on a group of many members: the audit's timeline rows stay proportional to the group's
rebalances, not to its member events times its members (quadratic in the group's size: the run's memory and its
checkpoint would grow with it), and the run says once which group's non-owner findings name no members."""
from __future__ import annotations

import json

import pytest

from offsets_audit import incremental
from offsets_audit.config import load_settings
from offsets_audit.replay import replay_records
from offsets_audit.simulate import simulate
from offsets_audit.sources.segments import list_segments, read_segment

MEMBERS = 40
LIMIT = 12


@pytest.fixture(scope="module")
def big_group(tmp_path_factory):
    out = tmp_path_factory.mktemp("big-group")
    summary = simulate(out, groups=1, hours=0.01, seed=8, partitions=1, formats=("segments",),
                       hog_members=MEMBERS, hog_partitions=60, hog_churn_mean_ms=1000)
    records = [r for path, part in list_segments(out / "segments") for r in read_segment(path, part)]
    events = replay_records(records).events
    settings = load_settings(overrides={"broker": {"group_overrides": summary["group_overrides"]}})
    by_group: dict = {}
    for ev in events:
        if ev.get("group_id") is not None:
            by_group.setdefault(ev["group_id"], []).append(ev)
    group_id = max(by_group, key=lambda g: len(by_group[g]))
    return group_id, by_group[group_id], settings


def _step(group_id, events, settings, pieces=3):
    """The fold's audit step over ``pieces`` micro-batches, its state through bytes: every row it emitted."""
    step = incremental.GroupAuditStep(settings)
    offsets = sorted({ev["offset"] for ev in events})
    bounds = [offsets[len(offsets) * i // pieces] for i in range(pieces)] + [offsets[-1] + 1]
    stored, out = None, []
    for low, high in zip(bounds, bounds[1:]):
        rows = [("event", group_id, json.dumps(ev, default=str)) for ev in events if low <= ev["offset"] < high]
        more, stored = step(group_id, rows, stored)
        out += more
    return out


def test_members_listed_up_to_the_limit_then_left_out_once(big_group, monkeypatch):
    group_id, events, settings = big_group
    unbounded = _step(group_id, events, settings)
    monkeypatch.setattr(incremental, "TIMELINE_MEMBER_LIMIT", LIMIT)
    bounded = _step(group_id, events, settings)

    def context(rows):
        return [json.loads(p) for kind, _, p in rows if kind == "context"]

    full, lean = context(unbounded), context(bounded)
    assert max(len(json.loads(c["members_json"] or "{}")) for c in full) > LIMIT  # the group outgrew the limit
    # every context row either lists at most LIMIT members or none
    assert all(c["members_json"] is None or len(json.loads(c["members_json"])) <= LIMIT for c in lean)
    size = sum(len(p) for kind, _, p in bounded if kind == "context")
    assert size * 3 < sum(len(p) for kind, _, p in unbounded if kind == "context")
    # the rows the other rules read are the same: findings, rebalances, ownership
    for kind in ("finding", "rebalance", "ownership"):
        assert sorted(p for k, _, p in bounded if k == kind) == sorted(p for k, _, p in unbounded if k == kind)
    notes = [p for kind, _, p in bounded if kind == incremental.NOTE_KIND]
    assert len(notes) == 1 and int(notes[0]) > LIMIT
    assert not [p for kind, _, p in unbounded if kind == incremental.NOTE_KIND]


def test_the_run_warns_once_per_group_and_looks_at_folders_only_otherwise(spark, tmp_path):
    import io

    checkpoint = tmp_path / "checkpoint"
    rows = spark.createDataFrame([("g-big", incremental.NOTE_KIND, "101"), ("g-big", "event", "{}"),
                                  ("g-small", "event", "{}")], "group_id string, kind string, payload string")
    rows.write.partitionBy("kind").parquet(str(checkpoint / "fold_rows" / "batch=0"))
    rows.filter("kind = 'event'").write.partitionBy("kind").parquet(str(checkpoint / "fold_rows" / "batch=1"))
    assert incremental.warn_members_left_out(None, str(checkpoint), [1]) == []  # no Spark asked
    out = io.StringIO()
    lines = incremental.warn_members_left_out(spark, str(checkpoint), [0, 1], file=out)
    assert len(lines) == 1 and out.getvalue().count("\n") == 1
    assert lines[0].startswith("offsets-audit: warning: group g-big reached 101 members")
    assert "offset_commit_by_non_owner" in lines[0]
