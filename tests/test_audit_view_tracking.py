"""What ``GroupView`` keeps up to date as events change it, so a batch end costs what the batch changed: the holder
counts behind ``held`` and ``held_twice``, the unreconciled members behind ``state``, and the members
``changed_members`` names. After every event of Kafka's histories and of a simulated history with every fault kind,
each equals what a pass over every member computes, and no member changed since the last batch end is left out."""
from __future__ import annotations

import pytest

from offsets_audit.audit.engine import GroupAudit
from offsets_audit.audit.rules.base import GroupView, MemberView
from offsets_audit.config import load_settings
from offsets_audit.replay import replay_records
from offsets_audit.replay.state import GroupState, modern_group_state
from offsets_audit.simulate import FAULT_KINDS, simulate
from offsets_audit.sources.segments import list_segments, read_segment
from replay_support import HISTORIES, load_expected


def _kafka_events(name):
    if name == "history-many-groups":
        records = [r for path in sorted((HISTORIES / name).glob("*.expected.jsonl.xz")) for r in load_expected(path)]
    else:
        records = load_expected(HISTORIES / f"{name}-00000000000000000000.expected.jsonl")
    return replay_records(records).events


@pytest.fixture(scope="module")
def simulated_events(tmp_path_factory):
    out = tmp_path_factory.mktemp("tracked")
    simulate(out, groups=10, hours=0.25, seed=5, partitions=3, faults=list(FAULT_KINDS), formats=("segments",))
    records = [r for path, part in list_segments(out / "segments") for r in read_segment(path, part)]
    return replay_records(records).events


def _fingerprint(m):
    return (m.member_epoch, m.previous_member_epoch, m.state, dict(m.assigned), dict(m.pending),
            {k: dict(v) for k, v in m.tasks.items()}, {k: dict(v) for k, v in m.tasks_pending.items()})


def _check(view: GroupView) -> None:
    holdings = [set(m.assigned) | set(m.pending) for m in view.members.values()]
    everything = set().union(*holdings)
    assert view.held() == everything
    assert view.held_twice() == (len(everything) != sum(map(len, holdings)))
    if view.exists and view.group_type != "classic" and not (view.group_type == "streams"
                                                               and view.topology_ready is False):
        assert view.state == modern_group_state(view.members, view.group_epoch, view.assignment_epoch,
                                                view.is_reconciled)


def _walk_checked(events, monkeypatch) -> int:
    """Every group's events one by one, the view checked after each; the batch ends checked for members left out.
    Returns how many batch ends were checked."""
    checked = []
    original = GroupView.batch_checked

    def batch_checked(view):
        named = {m.member_id for m in view.changed_members()}
        before = getattr(view, "_test_snapshot", None)
        for member_id, m in view.members.items():
            if before is None or before.get(member_id) != _fingerprint(m):
                assert member_id in named, f"member {member_id} changed since the last batch end, not named"
        original(view)
        view._test_snapshot = {member_id: _fingerprint(m) for member_id, m in view.members.items()}
        checked.append(1)

    monkeypatch.setattr(GroupView, "batch_checked", batch_checked)
    config = load_settings()
    by_group: dict = {}
    for ev in events:
        if ev.get("group_id") is not None:
            by_group.setdefault(ev["group_id"], []).append(ev)
    for group_id, evs in by_group.items():
        audit = GroupAudit(group_id, config, timeline=True)
        for ev in evs:
            audit.feed([ev])
            if audit.view is not None:
                _check(audit.view)
        audit.finish()
    return len(checked)


@pytest.mark.parametrize("name", ["history-consumer-group", "history-streams-group", "history-assignment-batching",
                                  "history-many-groups"])
def test_tracked_view_equals_a_full_pass_on_kafka_histories(name, monkeypatch):
    assert _walk_checked(_kafka_events(name), monkeypatch) > 0


def test_tracked_view_equals_a_full_pass_with_every_fault(simulated_events, monkeypatch):
    assert _walk_checked(simulated_events, monkeypatch) > 100


def test_a_view_from_an_older_checkpoint_rebuilds_what_it_tracks():
    """A view pickled before it tracked anything has none of the attributes: the class defaults make it rebuild
    them from its members (every member named at the next batch end, the counts and the unreconciled recomputed)."""
    view = GroupView("g", "consumer")
    for attribute in ("touched", "_holders", "_shared", "_unreconciled"):
        view.__dict__.pop(attribute, None)
    view.exists, view.group_epoch, view.assignment_epoch = True, 3, 3
    view.members = {"a": MemberView("a", member_epoch=3, assigned={("t", 0): 3}),
                    "b": MemberView("b", member_epoch=2, assigned={("t", 0): 2, ("t", 1): 2})}
    assert [m.member_id for m in view.changed_members()] == ["a", "b"]
    assert view.held() == {("t", 0), ("t", 1)} and view.held_twice()
    assert view.state == GroupState.RECONCILING


def test_an_audit_from_an_older_checkpoint_shares_its_rebalance_trackers_causes(simulated_events):
    """A ``GroupAudit`` pickled when each cause-tracking family kept its own tracker (no ``batch_families``, no shared
    ``causes``) resumes with the rebalance tracker's one shared, and ends as one walk does."""
    import copy

    config = load_settings()
    by_group: dict = {}
    for ev in simulated_events:
        if ev.get("group_id") is not None:
            by_group.setdefault(ev["group_id"], []).append(ev)
    compared = 0
    for group_id, evs in by_group.items():
        whole = GroupAudit(group_id, config)
        whole.feed(evs)
        whole.finish()
        half = len(evs) // 2
        audit = GroupAudit(group_id, config)
        audit.feed(evs[:half])
        # the layout of an older checkpoint: a tracker per family, driven by the family itself
        del audit.__dict__["batch_families"], audit.__dict__["causes"]
        for family in audit.families:
            if "drives_causes" in family.__dict__:
                del family.__dict__["drives_causes"]
                family.causes = copy.deepcopy(family.causes)
        resumed = GroupAudit.from_bytes(audit.to_bytes(), config)
        assert resumed.causes is resumed.tracker.causes
        resumed.feed(evs[half:])
        resumed.finish()
        assert [f.to_dict() for f in resumed.findings] == [f.to_dict() for f in whole.findings]
        assert resumed.rebalances == whole.rebalances
        compared += 1
    assert compared >= 10
