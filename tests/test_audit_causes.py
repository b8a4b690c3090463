"""Why did the group rebalance: every group-epoch bump of Kafka's golden histories and of the simulator
gets exactly the causes its driver action explains (audit/causes.py, docs/rules.md "Rebalance causes").

The expected causes are derived independently of the audit: from the golden driver's ``events`` (what
the client or the broker did, and the log-end offset after it) and from the records of the log itself
(decoded with the codec), never from the replay events the audit reads.
"""
from __future__ import annotations

import collections
import json

import pytest

from audit_events import History
from golden_files import open_golden
from offsets_audit.audit import audit_events
from offsets_audit.audit.causes import CAUSES, summarize_causes
from offsets_audit.codec import decode_record
from offsets_audit.replay import replay_records
from replay_support import HISTORIES, load_expected

DRIVEN = ["history-consumer-group", "history-streams-group", "history-assignment-batching"]
MEMBER_METADATA_TYPES = (5, 10, 19)


def _state(name: str) -> dict:
    with open_golden(HISTORIES / f"{name}.state.json") as fh:
        return json.load(fh)


def _records(name: str) -> list[dict]:
    return load_expected(HISTORIES / f"{name}-00000000000000000000.expected.jsonl")


def expected_causes(name: str) -> dict[tuple[str, int], dict[str, set]]:
    """(group id, bump offset) -> {member id or None: causes}, from the driver's events and the log.

    Each driver action wrote the records between the previous action's log end and its own
    ``next_offset``. An action that wrote a group-epoch record explains it:

    * a heartbeat of a member never seen before: ``member_joined`` (streams: and ``process_joined`` when
      no live member has its process id yet);
    * a leave, or the session-timeout timer of a member: ``member_left`` (streams: ``process_left`` when
      it was the last live member of its process);
    * a heartbeat of a known member whose ``*MemberMetadata`` record in that action changes its
      subscribed topics: ``subscription_changed``;
    * a heartbeat of a known member after the driver changed topic metadata (``metadata`` events since
      the group's previous bump) with no member record: ``topic_metadata_changed``.
    """
    records = _records(name)
    decoded = []
    for r in records:
        if r.get("is_control"):
            continue
        d = decode_record(r["key"], r["value"])
        decoded.append((r["offset"], d))
    events = _state(name)["events"]
    expected: dict = {}
    live: dict[str, dict[str, str | None]] = collections.defaultdict(dict)   # group -> member -> process
    subscriptions: dict[tuple, tuple] = {}
    metadata_since_bump: dict[str, bool] = collections.defaultdict(bool)
    pending_metadata = False
    start = 0
    for e in events:
        end = e["next_offset"]
        kind, detail = e["kind"], e["detail"]
        if kind == "metadata":
            pending_metadata = True
        written = [(o, d) for o, d in decoded if start <= o < end]
        start = max(start, end)
        group = detail.get("group")
        if kind == "timer" and detail["key"].startswith("session-timeout-"):
            key = detail["key"][len("session-timeout-"):]
            group = next(g for g in live if key.startswith(g + "-"))
            member, kind = key[len(group) + 1:], "leave"
        else:
            member = detail.get("member")
        if pending_metadata:
            for g in live:
                metadata_since_bump[g] = True
            pending_metadata = False
        bumps = [(o, d) for o, d in written if d.record_type in (3, 11, 17) and d.value is not None]
        members_meta = {d.key["memberId"]: d.value for o, d in written
                        if d.record_type in MEMBER_METADATA_TYPES and d.value is not None}
        causes: dict = {}
        if kind.endswith("-heartbeat") and group is not None:
            known = member in live[group]
            process = detail.get("process")
            if not known:
                causes[member] = {"member_joined"}
                if name == "history-streams-group" and process not in live[group].values():
                    causes[member].add("process_joined")
                live[group][member] = process
            elif member in members_meta and tuple(members_meta[member].get("subscribedTopicNames") or ()) \
                    != subscriptions.get((group, member)):
                causes[member] = {"subscription_changed"}
            elif metadata_since_bump[group]:
                causes[None] = {"topic_metadata_changed"}
        elif kind.endswith("-leave") or kind == "leave":
            process = live[group].pop(member, None)
            causes[member] = {"member_left"}
            if name == "history-streams-group" and process not in live[group].values():
                causes[member].add("process_left")
        elif kind == "delete-groups":
            live.pop(group, None)
        for mid, value in members_meta.items():
            subscriptions[(group, mid)] = tuple(value.get("subscribedTopicNames") or ())
        if bumps:
            assert len(bumps) == 1, f"driver action {e} wrote {len(bumps)} epoch records"
            assert causes, f"driver action {e} bumped the group epoch at offset {bumps[0][0]} for no derived cause"
            expected[(group, bumps[0][0])] = causes
            metadata_since_bump[group] = False
    return expected


def _rows(name: str) -> list[dict]:
    return audit_events(replay_records(_records(name)).events)[1]


@pytest.mark.parametrize("name", DRIVEN)
def test_every_golden_bump_has_the_causes_its_driver_action_explains(name):
    expected = expected_causes(name)
    rows = _rows(name)
    assert len(rows) == len(expected) > 0
    for r in rows:
        want = expected[(r["group_id"], r["bump_offset"])]
        assert set(r["causes"]) == set().union(*want.values()), (r["group_epoch"], r["causes"], want)
        got = {m["member_id"]: set(m["causes"]) for m in r["cause_members"]}
        assert got == {m: c for m, c in want.items() if m is not None}, (r["group_epoch"], got, want)
        for m in r["cause_members"]:
            assert m["client_id"] and m["client_host"], m   # every culprit is named by its client


def test_golden_many_groups_history_has_no_unknown_cause():
    records = []
    for path in sorted((HISTORIES / "history-many-groups").glob("*.expected.jsonl.xz")):
        records.extend(load_expected(path))
    _, rows = audit_events(replay_records(records).events)
    causes = collections.Counter(c for r in rows for c in r["causes"])
    assert rows and causes["unknown"] == 0
    assert set(causes) <= set(CAUSES)


def test_rebalance_causes_table_counts_per_cause_and_per_client():
    rows = _rows("history-consumer-group")
    table = summarize_causes(rows)
    per_cause = {r["cause"]: r["rebalances"] for r in table if r["level"] == "group_day_cause"}
    assert per_cause == {"member_joined": 5, "member_left": 2, "topic_metadata_changed": 1,
                         "subscription_changed": 1}
    clients = [r for r in table if r["level"] == "client_day"]
    assert [(c["client_id"], c["client_host"], c["rebalances"], c["groups"]) for c in clients] == [
        ("client-ConsumerGroupHeartbeat", "localhost/127.0.0.1", 8, 1)]


# -- hand-built operations: what Kafka writes for each cause (GroupMetadataManager) ------------------


def _bump(h: History, old: int, new: int, old_hash: int = 1, new_hash: int = 1, **extra):
    return h.add("group_epoch_bumped", old=old, new=new, old_metadata_hash=old_hash, metadata_hash=new_hash, **extra)


def _member(h: History, mid: str, topics=("t",), **identity):
    details = {"client_id": "app", "client_host": "/10.0.0.1", "rack_id": None, "instance_id": None,
               "subscribed_topic_names": list(topics), "subscribed_topic_regex": "", "server_assignor": None}
    details.update(identity)
    return h.add("member_joined", mid, **details)


def _causes(h: History) -> list[list[str]]:
    return [r["causes"] for r in audit_events(h.events)[1]]


def _base() -> History:
    h = History()
    h.created()
    _member(h, "a")
    _bump(h, 0, 2, 0, 1)
    h.epoch("a", 2, 0)
    return h


def test_static_replacement_with_a_subscription_change_names_both():
    h = _base()
    _member(h.after(1000), "s1", instance_id="i-1")
    _bump(h, 2, 3)
    h.epoch("s1", 3, 0)
    h.after(1000).epoch("s1", -2, 3)          # ConsumerGroupHeartbeat leave with epoch -2: no bump
    h.after(1000).add("member_fenced_by_tombstone", "s1")
    h.add("member_left", "s1", instance_id="i-1", client_id="app", client_host="/10.0.0.1")
    _member(h, "s2", instance_id="i-1")
    h.epoch("s2", 0, 0)
    h.add("member_metadata_changed", "s2", changed=["subscribed_topic_names"], old={"subscribed_topic_names": ["t"]},
          new={"subscribed_topic_names": ["t", "u"]}, instance_id="i-1", client_id="app", client_host="/10.0.0.1")
    _bump(h, 3, 4, 1, 2)
    rows = audit_events(h.events)[1]
    assert [r["causes"] for r in rows] == [["member_joined"], ["member_joined"],
                                           ["static_member_replaced", "subscription_changed"]]
    assert [(m["member_id"], m["causes"]) for m in rows[-1]["cause_members"]] == [
        ("s2", ["static_member_replaced", "subscription_changed"])]


def test_a_rack_change_of_a_consumer_member_does_not_explain_a_bump():
    """``hasMemberSubscriptionChanged`` writes the record but bumps only for subscribed topic names."""
    h = _base()
    h.after(1000).add("member_metadata_changed", "a", changed=["rack_id"], old={"rack_id": "r1"},
                      new={"rack_id": "r2"})
    _bump(h, 2, 3)
    assert _causes(h)[-1] == ["unknown"]


def test_topic_growth_is_a_metadata_hash_change_with_the_same_subscriptions():
    h = _base()
    _bump(h.after(1000), 2, 3, 1, 7)
    assert _causes(h)[-1] == ["topic_metadata_changed"]


def test_regex_resolution_and_assignor_change():
    h = _base()
    h.after(1000).add("regex_resolution_changed", regular_expression="t.*", topics=["t", "t2"])
    _bump(h, 2, 3, 1, 5)
    h.after(1000).add("member_metadata_changed", "a", changed=["server_assignor"], old={"server_assignor": None},
                      new={"server_assignor": "range"})
    _bump(h, 3, 4)
    assert _causes(h)[-2:] == [["regex_resolution_changed"], ["assignor_changed"]]


def test_several_bumps_in_one_batch_get_causes_per_epoch():
    """Two operations appended at the same time: a join, then another member's leave."""
    h = _base()
    h.after(1000)
    _member(h, "b")
    _bump(h, 2, 3)
    h.epoch("b", 2, 0)
    h.add("member_fenced_by_tombstone", "a")
    h.add("member_left", "a", client_id="app", client_host="/10.0.0.1")
    _bump(h, 3, 4)
    rows = audit_events(h.events)[1]
    assert [(r["causes"], [m["member_id"] for m in r["cause_members"]]) for r in rows[1:]] == [
        (["member_joined"], ["b"]), (["member_left"], ["a"])]


def test_a_bump_no_record_explains_is_unknown():
    h = _base()
    _bump(h.after(1000), 2, 3)
    assert _causes(h)[-1] == ["unknown"]


def test_share_bump_after_partitions_got_initialized():
    h = History(group_type="share")
    h.created()
    _member(h, "a")
    _bump(h, 0, 2, 0, 1)
    h.after(500).add("share_state_partition_metadata", initialized_topics=["t"], changed=True)
    _bump(h.after(500), 2, 3)
    assert _causes(h) == [["member_joined"], ["share_partitions_initialized"]]


# -- the simulator: scripted stories and a random cluster ----------------------------------------------------


def _simulated_rows(appends, group_overrides=None):
    from offsets_audit.config import load_settings
    from offsets_audit.simulate.writer import encode

    records, offset = [], 0
    for append in appends:
        for record in append.records:
            key, value = encode(record)
            records.append({"partition": 0, "offset": offset, "timestamp": append.time_ms, "key": key,
                            "value": value})
            offset += 1
    config = load_settings(overrides={"broker": {"group_overrides": group_overrides or {}}})
    return audit_events(replay_records(records).events, config)


@pytest.mark.parametrize("name", ["scale_up", "rolling_restart", "crash", "subscription_change", "topic_growth",
                                  "static_replacement"])
def test_scripted_simulator_scenario_produces_exactly_its_causes(name):
    from offsets_audit.simulate.scenarios import SCRIPTED_SCENARIOS, scripted_scenario

    findings, rows = _simulated_rows(scripted_scenario(name), {"causes-app": {"assignment_interval_ms": 0}})
    assert [r["causes"] for r in rows] == SCRIPTED_SCENARIOS[name]
    assert findings == [] and all(r["complete"] for r in rows)
    for r in rows:
        if r["causes"] == ["topic_metadata_changed"]:
            assert r["cause_members"] == []            # no member did it: the topic grew
        else:
            assert len(r["cause_members"]) == 1
            m = r["cause_members"][0]
            assert m["causes"] == r["causes"] and m["client_id"].startswith("orders-app-") and m["client_host"]
    if name == "crash":
        assert rows[-1]["cause_members"][0]["client_id"] == "orders-app-1"


def test_random_simulated_cluster_has_no_unknown_cause(tmp_path):
    from offsets_audit.simulate import simulate
    from offsets_audit.sources.segments import list_segments, read_segment

    summary = simulate(tmp_path, formats=("segments",), groups=20, hours=0.25, seed=6, partitions=12)
    records = [r for path, part in list_segments(tmp_path / "segments") for r in read_segment(path, part)]
    from offsets_audit.config import load_settings

    config = load_settings(overrides={"broker": {"group_overrides": summary["group_overrides"]}})
    _, rows = audit_events(replay_records(records).events, config)
    causes = collections.Counter(c for r in rows for c in r["causes"])
    assert causes["unknown"] == 0 and {"member_joined", "member_left"} <= set(causes), causes


# -- findings name the causes and the culprits ----------------------------------------------------------------


def test_rebalance_storm_names_the_dominant_causes_and_culprits():
    h = _base()
    epoch = 2
    for i in range(40):                            # a crash-looping client joins and is fenced again and again
        mid = f"flap-{i}"
        _member(h.after(30_000), mid, client_id="billing-worker", client_host="/10.0.0.9")
        _bump(h, epoch, epoch + 1)
        h.epoch(mid, epoch + 1, 0)
        h.after(30_000).add("member_fenced_by_tombstone", mid)
        h.add("member_left", mid, client_id="billing-worker", client_host="/10.0.0.9")
        _bump(h, epoch + 1, epoch + 2)
        epoch += 2
    findings, _ = audit_events(h.events)
    storm = next(f for f in findings if f.rule == "rebalance_storm")
    assert "member_joined" in storm.message and "member_left" in storm.message
    assert "billing-worker@/10.0.0.9" in storm.message
    assert storm.details["top_culprits"][0] == {"client": "billing-worker@/10.0.0.9", "rebalances": 60}
    assert {c["cause"] for c in storm.details["dominant_causes"]} == {"member_joined", "member_left"}


def test_group_stuck_in_state_names_the_bump_that_started_it():
    h = _base()
    h.target(2)                                     # Stable at epoch 2
    h.after(10)
    _member(h, "b", client_id="etl", client_host="/10.1.1.1")
    _bump(h, 2, 3)                                  # ASSIGNING from here on: no target assignment follows
    h.after(400_000).commit("t", 0, 1)
    findings, _ = audit_events(h.events)
    stuck = next(f for f in findings if f.rule == "group_stuck_in_state")
    assert "after bumps caused by member_joined (1); top culprits etl@/10.1.1.1 (1)" in stuck.message
    assert stuck.details["dominant_causes"] == [{"cause": "member_joined", "rebalances": 1}]


# -- the report ---------------------------------------------------------------------------------------------


def test_report_shows_causes_over_time_top_culprits_and_annotated_timelines():
    from offsets_audit.audit.report import render_report

    rows = _rows("history-consumer-group")
    h = _base()                                   # a client id is user input: it must come out escaped
    _member(h.after(1000), "evil", client_id="<script>alert(1)</script>", client_host="/10.6.6.6")
    _bump(h, 2, 3)
    rows += audit_events(h.events)[1]
    html = render_report({"run_id": "r", "findings": [], "rebalances": rows, "latency_summary": [],
                          "timelines": {"orders-app": []}})
    section = html[html.index('id="causes"'):html.index('id="timelines"')]
    assert "Rebalance causes per" in section and "Top culprits" in section
    assert "client-ConsumerGroupHeartbeat</td><td>localhost/127.0.0.1</td><td>8</td>" in section
    assert 'aria-label="Why orders-app rebalanced"' in section
    for cause in ("member_joined", "member_left", "topic_metadata_changed", "subscription_changed"):
        assert f">{cause}</text>" in section or f": {cause}" in section
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_streams_member_metadata_changes_that_bump():
    """``hasStreamsMemberMetadataChanged``: a dynamic member bumps on any change, a static one on rack,
    client tags, process id or topology epoch only."""
    h = History(group_type="streams")
    h.created()
    _member(h, "dyn", process_id="p1")
    _member(h, "sta", process_id="p1", instance_id="i-1")
    _bump(h, 0, 2, 0, 1)
    h.epoch("sta", 2, 0)

    def change(mid, field, old, new):
        h.after(1000).add("member_metadata_changed", mid, changed=[field], old={field: old}, new={field: new},
                          client_id="app", client_host="/10.0.0.1")

    change("dyn", "client_host", "/10.0.0.1", "/10.0.0.2")
    _bump(h, 2, 3)
    change("sta", "rack_id", None, "rack-b")
    _bump(h, 3, 4)
    change("sta", "process_id", "p1", "p2")
    _bump(h, 4, 5)
    rows = audit_events(h.events)[1]
    assert [r["causes"] for r in rows] == [["member_joined", "process_joined"], ["member_metadata_changed"],
                                           ["rack_changed"], ["process_joined", "member_metadata_changed"]]


def test_classic_generations_name_the_members_that_joined_or_left():
    """Classic groups: one row per generation; expected causes from consecutive GroupMetadata records of
    the log (decoded with the codec): member ids that appeared or disappeared, a static instance id under
    a new member id, a new protocol."""
    records = []
    for path in sorted((HISTORIES / "history-many-groups").glob("*.expected.jsonl.xz")):
        records.extend(load_expected(path))
    expected = {}
    previous: dict = {}
    for r in records:
        if r.get("is_control"):
            continue
        d = decode_record(r["key"], r["value"])
        if d.record_type != 2:
            continue
        group = d.key["group"]
        if d.value is None:
            previous.pop(group, None)
            continue
        members = {m["memberId"]: m for m in d.value.get("members") or ()}
        old = previous.get(group)
        previous[group] = (d.value["generation"], members, d.value.get("protocol"))
        if old is None or d.value["generation"] <= old[0]:
            if old is not None or d.value["generation"] != 1:
                continue
            old = (0, {}, None)
        causes: dict = {}
        joined = set(members) - set(old[1])
        left = set(old[1]) - set(members)
        for mid in sorted(joined):
            instance = members[mid].get("groupInstanceId")
            replaced = [o for o in left if instance and old[1][o].get("groupInstanceId") == instance]
            causes[mid] = {"static_member_replaced"} if replaced else {"member_joined"}
            left -= set(replaced)
        for mid in left:
            causes[mid] = {"member_left"}
        expected[(group, r["offset"])] = causes
    rows = [r for r in audit_events(replay_records(records).events)[1] if r["group_type"] == "classic"]
    assert len(rows) == len(expected) > 20
    for r in rows:
        want = expected[(r["group_id"], r["bump_offset"])]
        assert {m["member_id"]: set(m["causes"]) for m in r["cause_members"]} == want
        assert set(r["causes"]) == set().union(*want.values()) and r["complete"]
        assert all(m["client_id"] and m["client_host"] for m in r["cause_members"])


def test_a_downgrade_to_classic_is_group_converted():
    h = _base()
    h.after(1000).add("group_type_changed", old_type="consumer", new_type="classic")
    h.group_type = "classic"
    h.add("classic_generation_changed", old_generation=None, generation=3, protocol_type="consumer",
          protocol="range", leader="c1", members=["c1"])
    h.offset -= 1                                   # the events of one GroupMetadata record share its offset
    h.add("member_joined", "c1", instance_id=None, client_id="app", client_host="/10.0.0.1")
    h.after(5000).add("classic_generation_changed", old_generation=3, generation=4, protocol_type="consumer",
                      protocol="range", leader="c1", members=["c1", "c2"])
    h.offset -= 1
    h.add("member_joined", "c2", instance_id=None, client_id="app", client_host="/10.0.0.2")
    rows = audit_events(h.events)[1]
    assert [(r["group_type"], r["group_epoch"], r["causes"]) for r in rows] == [
        ("consumer", 2, ["member_joined"]), ("classic", 3, ["group_converted"]), ("classic", 4, ["member_joined"])]


def test_causes_do_not_depend_on_the_order_of_one_records_events():
    """Spark hands over the events of one record in any order (it sorts by partition and offset only)."""
    records = []
    for path in sorted((HISTORIES / "history-many-groups").glob("*.expected.jsonl.xz"))[:10]:
        records.extend(load_expected(path))
    events = replay_records(records).events
    shuffled = sorted(reversed(events), key=lambda e: (e["group_id"], e["partition"], e["offset"],
                                                       e["event"] not in ("group_created", "group_type_changed")))
    in_order = sorted(events, key=lambda e: (e["group_id"], e["partition"], e["offset"]))
    assert shuffled != in_order
    key = lambda r: (r["group_id"], r["group_epoch"], r["bump_offset"])  # noqa: E731
    assert sorted(audit_events(shuffled)[1], key=key) == sorted(audit_events(in_order)[1], key=key)
