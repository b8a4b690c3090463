"""The assignment-interval what-if (``audit.interval_whatif``): KIP-1263's rule replayed over a group's triggers.

Judged by Kafka first: on every golden history (Kafka's own coordinator, mock clock) the replay at the interval
each group ran with gives back the recorded computations, their number and their AssignmentTimestamps exactly.
Then the model's other answers: a larger interval batches bumps into fewer runs, a streams group waits for its
initial rebalance delay, a departure waits for the next heartbeat, and the recommendation keeps to its budget.
"""
from __future__ import annotations

import collections

import pytest

from offsets_audit.audit import interval_whatif as W
from offsets_audit.audit.model import Event
from offsets_audit.replay import replay_records
from replay_support import HISTORIES, load_expected

#: The intervals the golden groups ran with (group configs are not records: tests/golden/README.md)
GOLDEN_INTERVALS = {"batch-default": 1000, "batch-override-0": 0, "batch-override-3000": 3000}
BROKER_HEARTBEAT_MS = 5000
STREAMS_INITIAL_DELAY_MS = 3000
T0 = 1_754_000_040_000  # a minute boundary


def _groups(name: str) -> tuple[dict[str, list[Event]], int]:
    if name == "history-many-groups":
        records = []
        for path in sorted((HISTORIES / name).glob("*.expected.jsonl.xz")):
            records.extend(load_expected(path))
    else:
        records = load_expected(HISTORIES / f"{name}-00000000000000000000.expected.jsonl")
    by_group: dict[str, list[Event]] = collections.defaultdict(list)
    for raw in replay_records(records).events:
        ev = raw if isinstance(raw, Event) else Event.from_dict(raw)
        by_group[ev.group_id].append(ev)
    end = max(e.timestamp for events in by_group.values() for e in events if e.timestamp is not None)
    return by_group, end


def _replay_recorded(history: W.GroupHistory, interval: int) -> W.Replayed:
    silent = W.silent_stretches(history, interval, STREAMS_INITIAL_DELAY_MS)
    return W.replay(history, interval_ms=interval, heartbeat_interval_ms=BROKER_HEARTBEAT_MS,
                    initial_rebalance_delay_ms=STREAMS_INITIAL_DELAY_MS, silent=silent)


@pytest.mark.parametrize("name", ["history-assignment-batching", "history-consumer-group", "history-streams-group",
                                  "history-many-groups"])
def test_replay_at_the_recorded_interval_gives_back_every_recorded_computation(name):
    by_group, end = _groups(name)
    checked = 0
    for group_id, events in by_group.items():
        history = W.group_history(events, end_time_ms=end)
        if history.group_type not in W.MODERN_GROUP_TYPES or history.bumps == 0:
            continue
        replayed = _replay_recorded(history, GOLDEN_INTERVALS.get(group_id, 1000))
        assert [c.time for c in replayed.computations] == [t for t, _ in history.computations], group_id
        assert W.check_recorded(history, replayed).matches
        checked += 1
    assert checked >= 1


def test_batching_history_counts_and_latencies_at_other_intervals():
    """From batch-override-0's log (every join computed at once), a 1 s interval batches the 12 joins of its first
    burst into one run after the first, as batch-default (1 s) really did; the 4 leaves and joins later too."""
    by_group, end = _groups("history-assignment-batching")
    zero = W.group_history(by_group["batch-override-0"], end_time_ms=end)
    at_zero = _replay_recorded(zero, 0)
    assert at_zero.runs == 16 and zero.bumps == 20
    silent = W.silent_stretches(zero, 0)
    at_one = W.replay(zero, interval_ms=1000, heartbeat_interval_ms=500, silent=silent)
    assert at_one.runs < at_zero.runs
    default = W.group_history(by_group["batch-default"], end_time_ms=end)
    assert at_one.runs == len(default.computations) == 4
    # every bump is answered, none sooner than the rule allows
    assert at_one.unanswered == 0
    first, second = at_one.computations[:2]
    assert first.time == first.bumps[0] and second.time >= first.time + 1000


def test_larger_interval_never_gives_more_runs():
    by_group, end = _groups("history-many-groups")
    for events in list(by_group.values())[:40]:
        history = W.group_history(events, end_time_ms=end)
        if history.group_type not in W.MODERN_GROUP_TYPES or history.bumps == 0:
            continue
        silent = W.silent_stretches(history, 1000, STREAMS_INITIAL_DELAY_MS)
        runs = [W.replay(history, interval_ms=i, heartbeat_interval_ms=BROKER_HEARTBEAT_MS,
                         initial_rebalance_delay_ms=STREAMS_INITIAL_DELAY_MS, silent=silent).runs
                for i in (0, 1000, 5000, 15000)]
        assert runs == sorted(runs, reverse=True), history.group_id


def _ev(kind, t, member=None, group_type="consumer", **details):
    return Event(kind, "g", group_type, 0, t, T0 + t, member, details)


def _join(t, member, epoch, group_type="consumer"):
    return [_ev("member_joined", t, member, group_type), _ev("group_epoch_bumped", t, None, group_type,
                                                             old=epoch - 1, new=epoch)]


def _assign(t, epoch, group_type="consumer"):
    return [_ev("target_assignment_computed", t, None, group_type, assignment_epoch=epoch,
                assignment_timestamp=T0 + t)]


def test_can_compute_next_target_assignment_is_kafkas_rule():
    assert W.can_compute_next_target_assignment(0, 5000, 10)           # no previous assignment
    assert W.can_compute_next_target_assignment(1000, 0, 1001)         # no interval
    assert not W.can_compute_next_target_assignment(1000, 5000, 5999)
    assert W.can_compute_next_target_assignment(1000, 5000, 6000)      # the interval has passed


def test_a_leave_waits_for_the_next_heartbeat_of_a_remaining_member():
    events = [*_join(0, "a", 2), *_assign(0, 2), *_join(100, "b", 3), *_assign(100, 3),
              _ev("member_epoch_advanced", 200, "a", member_epoch=3), _ev("member_epoch_advanced", 300, "b",
                                                                         member_epoch=3),
              _ev("member_left", 10_000, "b"), _ev("group_epoch_bumped", 10_000, None, old=3, new=4)]
    history = W.group_history(events, end_time_ms=T0 + 60_000)
    replayed = W.replay(history, interval_ms=0, heartbeat_interval_ms=5000)
    # a's heartbeats: 200, 5200, 10200 -> the leave's bump at 10000 is answered at 10200
    assert [c.time - T0 for c in replayed.computations] == [0, 100, 10_200]


def test_streams_initial_rebalance_delay_comes_first():
    events = [*_join(0, "a", 2, "streams"), *_join(500, "b", 3, "streams"),
              _ev("member_epoch_advanced", 1000, "a", "streams", member_epoch=1)]
    history = W.group_history(events, end_time_ms=T0 + 60_000)
    replayed = W.replay(history, interval_ms=0, heartbeat_interval_ms=5000, initial_rebalance_delay_ms=3000)
    # the timer scheduled by the first join (group empty) computes for both joins at 3000
    assert [(c.time - T0, [b - T0 for b in c.bumps]) for c in replayed.computations] == [(3000, [0, 500])]
    as_consumer = W.group_history([Event(e.event, "g", "consumer", 0, e.offset, e.timestamp, e.member_id,
                                         e.details) for e in events], end_time_ms=T0 + 60_000)
    assert W.replay(as_consumer, interval_ms=0, heartbeat_interval_ms=5000,
                    initial_rebalance_delay_ms=3000).runs == 2


def test_unanswered_bumps_count_with_their_wait_so_far():
    events = [*_join(0, "a", 2), *_assign(0, 2), *_join(1000, "b", 3)]
    history = W.group_history(events, end_time_ms=T0 + 4000)
    replayed = W.replay(history, interval_ms=15_000, heartbeat_interval_ms=5000)
    assert replayed.runs == 1 and replayed.unanswered == 1
    assert sorted(replayed.latencies()) == [0, 3000]


def test_what_if_rows_recommend_the_smallest_interval_within_budget():
    """A group bumping every 200 ms for a minute with 100 ms assignor runs: interval 0 runs 300 times (half the
    coordinator's minute); 1 s and more fit a 5 % budget with at most one heartbeat interval of added latency."""
    events = []
    for i in range(300):
        events += _join(i * 200, f"m{i}", i + 2)
        events += _assign(i * 200, i + 2)
    history = W.group_history(events, end_time_ms=T0 + 70_000)
    rows = W.what_if_rows(history, W.GroupIntervals(0, 5000, interval_source="group config"), run_ms=100.0,
                          candidates=(0, 1000, 3000, 5000, 15000), budget=W.Budget(max_share=0.05))
    by_interval = {r["interval_ms"]: r for r in rows}
    assert by_interval[0]["candidate"] == "recorded" and by_interval[0]["replay_matches_log"]
    assert by_interval[0]["runs"] == 300 and by_interval[0]["peak_minute_share"] == pytest.approx(0.5)
    assert by_interval[3000]["runs"] < by_interval[1000]["runs"] < by_interval[0]["runs"]
    assert [r["interval_ms"] for r in rows if r["recommended"]] == [3000]
    assert not by_interval[1000]["meets_budget"] and by_interval[3000]["meets_budget"]
    assert not by_interval[15000]["within_latency"]
    # with a heartbeat interval of 1 s only 1 s is within one heartbeat of added latency: the least time there
    short = W.what_if_rows(history, W.GroupIntervals(0, 1000), run_ms=100.0, budget=W.Budget(max_share=0.05))
    assert [(r["interval_ms"], r["meets_budget"]) for r in short if r["recommended"]] == [(1000, False)]
    cluster = W.cluster_rows(rows)
    recommended = [r for r in cluster if r["candidate"] == "recommended"]
    assert recommended[0]["runs_saved"] == 300 - by_interval[3000]["runs"]


def test_a_group_within_budget_at_its_own_interval_is_told_to_keep_it():
    """No false alarm: a healthy group (a few bumps, quick runs) at Kafka's default of 1 s is within the budget at
    every candidate, 0 included; the recommendation is its own interval, not the smallest one."""
    events = []
    for i in range(4):
        events += _join(i * 20_000, f"m{i}", i + 2)
        events += _assign(i * 20_000, i + 2)
    history = W.group_history(events, end_time_ms=T0 + 90_000)
    rows = W.what_if_rows(history, W.GroupIntervals(1000, 5000, interval_source="broker default"), run_ms=2.0,
                          candidates=(0, 1000, 3000), budget=W.Budget(max_share=0.05))
    assert all(r["meets_budget"] for r in rows)
    assert [(r["interval_ms"], r["candidate"]) for r in rows if r["recommended"]] == [(1000, "recorded")]
    recommended = [r for r in W.cluster_rows(rows) if r["candidate"] == "recommended"]
    assert recommended[0]["runs_saved"] == 0 and recommended[0]["added_p95_ms"] == 0


def test_a_classic_group_or_a_group_without_bumps_has_no_rows():
    assert W.what_if_rows(W.GroupHistory("g", "classic", steps=[(0, 0, 2, (True, True))]),
                          W.GroupIntervals(0, 5000), run_ms=1.0) == []
    assert W.what_if_rows(W.group_history([_ev("member_joined", 0, "a")]), W.GroupIntervals(0, 5000),
                          run_ms=1.0) == []


def _golden_interval_settings():
    """Settings whose group overrides give each golden group the assignment interval it ran with."""
    from offsets_audit.config import load_settings

    return load_settings(overrides={"broker": {"group_overrides": {
        g: {"consumer.assignment.interval.ms": ms} for g, ms in GOLDEN_INTERVALS.items()}}})


@pytest.mark.parametrize("k", [2, 5])
@pytest.mark.parametrize("name", ["history-assignment-batching", "history-streams-group", "history-many-groups"])
def test_the_what_if_kept_in_an_incremental_state_gives_the_batch_rows(name, k):
    """An incremental run keeps each group's what-if history in its stored audit state (``GroupAudit``, cut into
    ``k`` slices, through bytes each time): its rows at the log's end are the batch walk's, field for field."""
    from offsets_audit.audit.engine import GroupAudit

    by_group, end = _groups(name)
    settings = _golden_interval_settings()
    compared = 0
    for group_id, events in by_group.items():
        batch = W.what_if_rows_of_group(events, settings.broker, run_ms=1.5, end_time_ms=end)
        state = None
        for i in range(k):
            piece = events[len(events) * i // k:len(events) * (i + 1) // k]
            audit = (GroupAudit.from_bytes(state, settings) if state is not None
                     else GroupAudit(group_id, settings, timeline=True, what_if=True))
            audit.feed(piece)
            audit.take()
            state = audit.to_bytes()
        resumed = GroupAudit.from_bytes(state, settings)
        assert resumed.what_if is not None
        rows = W.what_if_rows_of_history(resumed.what_if.history(end), settings.broker, run_ms=1.5)
        assert rows == batch, group_id
        compared += bool(rows)
    assert compared >= 1


def test_a_log_that_breaks_its_interval_says_why_the_replay_differs():
    """Kafka's rule never computes sooner than the interval after the last assignment: a log that did (the
    simulator's early_assignment fault, the demo's svc-8-consumer) cannot be given back by the replay, and the
    recorded row says so instead of a bare mismatch."""
    events = [*_join(0, "a", 2), *_assign(0, 2), *_join(250, "b", 3), *_assign(250, 3), *_join(3000, "c", 4),
              *_assign(3000, 4)]
    history = W.group_history(events, end_time_ms=T0 + 9000)
    assert W.early_computations(history, 1000) == [250]
    rows = W.what_if_rows(history, W.GroupIntervals(1000, 5000, interval_source="group config"), run_ms=1.0)
    recorded = [r for r in rows if r["candidate"] == "recorded"][0]
    assert recorded["replay_matches_log"] is False
    assert "sooner" in recorded["replay_note"] and "assignment_interval_violated" in recorded["replay_note"]
    assumed = W.what_if_rows(history, W.GroupIntervals(1000, 5000, interval_known=False), run_ms=1.0)
    assert "assignment_interval_overridden" in [r for r in assumed if r["candidate"] == "recorded"][0]["replay_note"]
    # a log that keeps the interval has no note
    kept = W.group_history([*_join(0, "a", 2), *_assign(0, 2), *_join(2000, "b", 3), *_assign(2000, 3)],
                           end_time_ms=T0 + 9000)
    rows = W.what_if_rows(kept, W.GroupIntervals(1000, 5000), run_ms=1.0)
    assert all(r["replay_note"] is None for r in rows)


@pytest.mark.parametrize("name", ["history-assignment-batching", "history-streams-group"])
def test_the_what_if_history_keeps_each_member_id_once_and_resumes_a_state_that_kept_them_in_its_steps(name):
    """The history's steps number the members (an incremental state would otherwise hold a member's id once per
    heartbeat record of it), and a builder stored before they were numbered (its steps hold the ids) resumes to
    the batch walk's rows."""
    import pickle

    by_group, end = _groups(name)
    settings = _golden_interval_settings()
    compared = 0
    for group_id, events in by_group.items():
        batch = W.what_if_rows_of_group(events, settings.broker, run_ms=1.5, end_time_ms=end)
        builder = W.HistoryBuilder()
        half = len(events) // 2
        builder.feed(events[:half])
        assert builder.ids is not None
        stored = pickle.dumps(builder)
        assert all(stored.count(member.encode()) == 1 for member in builder.ids), group_id
        # the same builder as a state stored before members were numbered
        names = {number: member for member, number in builder.ids.items()}
        if builder.acc is not None:
            builder.acc.steps = [(t, kind, names[s] if kind in (W._BEAT, W._GONE) and s is not None else s, flags)
                                 for t, kind, s, flags in builder.acc.steps]
        builder.members = {names[n] for n in builder.members}
        del builder.ids
        older = pickle.loads(pickle.dumps(builder))
        assert older.ids is None
        older.feed(events[half:])
        assert W.what_if_rows_of_history(older.history(end), settings.broker, run_ms=1.5) == batch, group_id
        compared += bool(batch)
    assert compared >= 1
