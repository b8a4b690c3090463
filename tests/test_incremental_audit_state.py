"""The resumable per-group audit (``audit.engine.GroupAudit``): cut a group's events anywhere, store the state
as bytes between the pieces, and the findings and rebalances are those of one walk (``audit_group``), ids
included; what only the end of the log produces comes from ``finish`` and is reported as provisional."""
from __future__ import annotations

import json

import pytest

from offsets_audit.audit.engine import GroupAudit, GroupTimeline, audit_group
from offsets_audit.config import load_settings
from offsets_audit.replay import replay_records
from offsets_audit.simulate import FAULT_KINDS, simulate
from offsets_audit.sources.segments import list_segments, read_segment
from replay_support import HISTORIES, load_expected


@pytest.fixture(scope="module")
def faulted_events(tmp_path_factory):
    out = tmp_path_factory.mktemp("faulted")
    summary = simulate(out, groups=10, hours=0.25, seed=3, partitions=3, faults=list(FAULT_KINDS),
                       formats=("segments",))
    records = [r for path, part in list_segments(out / "segments") for r in read_segment(path, part)]
    config = load_settings(overrides={"broker": {"group_overrides": summary["group_overrides"]}})
    return replay_records(records).events, config


def _golden_events():
    records = load_expected(HISTORIES / "history-consumer-group-00000000000000000000.expected.jsonl")
    return replay_records(records).events, load_settings()


def _by_group(events):
    groups: dict = {}
    for ev in events:
        if ev.get("group_id") is not None:
            groups.setdefault(ev["group_id"], []).append(ev)
    return groups


def _rows(findings, rebalances, context, ownership):
    return (sorted(json.dumps(f.to_dict(), sort_keys=True) for f in findings),
            sorted(json.dumps(r, sort_keys=True, default=str) for r in rebalances),
            sorted(json.dumps(r, sort_keys=True) for r in context),
            sorted(json.dumps(r, sort_keys=True) for r in ownership))


def _sliced(events, config, k, end_time_ms):
    """Feed ``k`` consecutive slices (by offset), through bytes each time; completed rows of every slice plus the
    last slice's provisional ones."""
    offsets = sorted({ev["offset"] for ev in events})
    bounds = [offsets[len(offsets) * i // k] for i in range(k)] + [offsets[-1] + 1]
    state, done = None, ([], [], [], [])
    for low, high in zip(bounds, bounds[1:]):
        piece = [ev for ev in events if low <= ev["offset"] < high]
        audit = (GroupAudit.from_bytes(state, config) if state is not None
                 else GroupAudit(events[0]["group_id"], config, timeline=True))
        audit.feed(piece)
        for collected, new in zip(done, audit.take()):
            collected.extend(new)
        provisional = audit.provisional(end_time_ms)
        state = audit.to_bytes()
    return _rows(done[0] + provisional[0], done[1] + provisional[1], done[2], done[3])


@pytest.mark.parametrize("source", ["simulated-faults", "golden-consumer-group"])
@pytest.mark.parametrize("k", [1, 3, 10])
def test_audit_fed_in_slices_through_bytes_equals_one_walk(source, k, faulted_events):
    events, config = faulted_events if source == "simulated-faults" else _golden_events()
    end_time_ms = max(ev["timestamp"] for ev in events if ev.get("timestamp") is not None)
    findings_seen = 0
    for group_id, group_events in _by_group(events).items():
        timeline = GroupTimeline()
        findings, rebalances = audit_group(group_events, config, end_time_ms=end_time_ms, timeline=timeline)
        findings_seen += len(findings)
        expected = _rows(findings, rebalances, timeline.context, timeline.ownership)
        assert _sliced(group_events, config, k, end_time_ms) == expected, group_id
    if source == "simulated-faults":
        assert findings_seen > 0


def test_provisional_tail_is_not_kept_in_the_state(faulted_events):
    """``provisional`` leaves the state as it was: an open rebalance reported provisionally is still timed once
    when the records that close it come."""
    events, config = faulted_events
    group_id, group_events = max(_by_group(events).items(), key=lambda kv: len(kv[1]))
    audit = GroupAudit(group_id, config)
    audit.feed(group_events[: len(group_events) // 2])
    before = audit.to_bytes()
    audit.provisional(None)
    assert audit.to_bytes() == before


def test_state_of_another_format_is_refused():
    with pytest.raises(ValueError, match="another version"):
        GroupAudit.from_bytes(b"\x09junk", load_settings())


def test_provisional_tail_holds_until_its_horizon(faulted_events):
    """``provisional_until(c)`` says how long the tail computed for end time ``c`` holds: at every later end time
    where the tail differs, the horizon has been reached (so carrying a group's tail to a later run whose clock
    is below it is exact), and with a timer running or fired the horizon is finite."""
    events, config = faulted_events
    end = max(ev["timestamp"] for ev in events if ev.get("timestamp") is not None)
    finite = changed = 0
    for group_id, group_events in _by_group(events).items():
        for cut in (len(group_events) // 3, len(group_events) * 2 // 3, len(group_events)):
            audit = GroupAudit(group_id, config, timeline=True)
            audit.feed(group_events[:cut])
            audit.take()
            clock = max((ev["timestamp"] for ev in group_events[:cut] if ev.get("timestamp") is not None),
                        default=end)
            findings, rebalances, horizon = audit.provisional_until(clock)
            here = _rows(findings, rebalances, [], [])
            finite += horizon is not None
            assert horizon is None or horizon > clock
            probes = {clock + 1, clock + 60_000, clock + 3_600_000, clock + 86_400_000 * 30}
            if horizon is not None:
                probes |= {horizon - 1, horizon, horizon + 1}
            for later in sorted(p for p in probes if p >= clock):
                there = _rows(*audit.provisional(later), [], [])
                if there != here:
                    changed += 1
                    assert horizon is not None and later >= horizon, (group_id, cut, clock, later, horizon)
    assert finite > 0 and changed > 0


_MEMBER_FIELDS = ("members_json", "member_evidence")


@pytest.mark.parametrize("source", ["simulated-faults", "golden-consumer-group"])
def test_timeline_without_members_is_the_full_one_less_its_member_only_rows(source, faulted_events):
    """``GroupTimeline(members=False)`` (the batch audit's first walk): the same findings, rebalances and ownership
    rows; its context rows are the full timeline's with the members left out and the rows that changed nothing
    else dropped, so the context in force at any position holds the same type, epochs and member flags."""
    events, config = faulted_events if source == "simulated-faults" else _golden_events()
    end_time_ms = max(ev["timestamp"] for ev in events if ev.get("timestamp") is not None)
    fewer = 0
    for group_id, group_events in _by_group(events).items():
        full, lean = GroupTimeline(), GroupTimeline(members=False)
        with_members = audit_group(group_events, config, end_time_ms=end_time_ms, timeline=full)
        without = audit_group(group_events, config, end_time_ms=end_time_ms, timeline=lean)
        assert _rows(*with_members, [], full.ownership) == _rows(*without, [], lean.ownership), group_id
        assert all(row[f] is None for row in lean.context for f in _MEMBER_FIELDS)
        expected, last = [], None
        for row in full.context:
            kept = {k: v for k, v in row.items() if k not in _MEMBER_FIELDS}
            signature = {k: v for k, v in kept.items() if k not in ("partition", "offset", "seq")}
            if signature != last:
                expected.append({**kept, **{f: None for f in _MEMBER_FIELDS}})
                last = signature
        assert lean.context == expected, group_id
        fewer += len(full.context) - len(lean.context)
    assert fewer > 0
