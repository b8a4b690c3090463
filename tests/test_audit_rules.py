"""One test per audit rule: an event history that breaks it and one that must not (docs/rules.md)."""
from __future__ import annotations


import pytest

from audit_events import History, stable_group
from offsets_audit.audit import RULES, assignor_findings, audit_group, rule_settings
from offsets_audit.config import load_settings
from offsets_audit.errors import UserError

BASE = load_settings()


def config(**broker):
    return BASE.replace(broker=broker)


def fired(events, cfg=None, end_time_ms=None):
    findings, _ = audit_group(events, cfg or BASE, end_time_ms=end_time_ms)
    return [f.rule for f in findings]


def test_every_rule_has_a_test_here():
    names = {n[len("test_"):] for n in globals() if n.startswith("test_")}
    assert set(RULES) <= names


def test_group_epoch_decreased():
    h = stable_group(History())
    h.after(10).bump(2, 1)
    assert fired(h.events).count("group_epoch_decreased") == 1
    ok = stable_group(History())
    ok.after(10).add("group_deleted")
    ok.created()
    ok.bump(0, 2)
    assert "group_epoch_decreased" not in fired(ok.events)


def test_assignment_epoch_ahead_of_group_epoch():
    h = stable_group(History())
    h.after(2000).target(5, group_epoch=2)
    assert "assignment_epoch_ahead_of_group_epoch" in fired(h.events)
    assert "assignment_epoch_ahead_of_group_epoch" not in fired(stable_group(History()).events)


def test_member_epoch_ahead_of_assignment_epoch():
    h = stable_group(History())
    h.after(10).epoch("a", 3, 2)
    assert "member_epoch_ahead_of_assignment_epoch" in fired(h.events)
    ok = stable_group(History())
    ok.after(10).bump(2, 3)
    ok.after(1000).target(3)
    ok.epoch("a", 3, 2)
    assert "member_epoch_ahead_of_assignment_epoch" not in fired(ok.events)


def test_previous_member_epoch_inconsistent():
    h = stable_group(History())
    h.after(10).bump(2, 3)
    h.after(1000).target(3)
    h.epoch("a", 3, 1, old=2)          # stored previous epoch is not the epoch it had
    assert "previous_member_epoch_inconsistent" in fired(h.events)
    bad = stable_group(History())
    bad.after(10).epoch("a", 2, 5, old=2, state="UNREVOKED_PARTITIONS")   # previous above current
    assert "previous_member_epoch_inconsistent" in fired(bad.events)
    ok = stable_group(History())       # Kafka writes previous == epoch while revoking (golden history)
    ok.after(10).epoch("a", 2, 2, old=2, state="UNREVOKED_PARTITIONS")
    assert "previous_member_epoch_inconsistent" not in fired(ok.events)


def test_partition_epoch_ahead_of_member_epoch():
    h = stable_group(History())
    h.after(10).owns("a", {"T1": {"0": 2, "1": 7}})
    assert "partition_epoch_ahead_of_member_epoch" in fired(h.events)
    assert "partition_epoch_ahead_of_member_epoch" not in fired(stable_group(History()).events)


def test_new_group_epoch_unexpected():
    h = History()
    h.created()
    h.joined("a")
    h.bump(0, 1)                        # pre-KIP-1263 numbering on a 4.3 broker
    h.target(1)
    assert "new_group_epoch_unexpected" in fired(h.events, config(kafka_version="4.3"))
    assert "new_group_epoch_unexpected" not in fired(h.events, config(kafka_version="4.2"))
    assert "new_group_epoch_unexpected" not in fired(stable_group(History()).events, config(kafka_version="4.3"))
    # unknown version: both numberings are Kafka's, and no message says "Kafka None"
    assert "new_group_epoch_unexpected" not in fired(h.events, config(kafka_version=None))
    odd = History()
    odd.created()
    odd.joined("a")
    odd.bump(0, 5)
    findings, _ = audit_group(odd.events, config(kafka_version=None))
    [finding] = [f for f in findings if f.rule == "new_group_epoch_unexpected"]
    assert "None" not in finding.message and "unknown" in finding.message


def test_new_group_epoch_unexpected_knows_streams_groups_start_at_2_before_kip_1263():
    """A real Kafka 4.2 broker writes the first epoch of a streams group as 2 (its consumer and share groups
    start at 1): no finding for it there, one for a streams group starting at 1."""
    h = History(group_type="streams")
    h.created()
    h.joined("a")
    h.bump(0, 2)
    h.target(2)
    assert "new_group_epoch_unexpected" not in fired(h.events, config(kafka_version="4.2"))
    assert "new_group_epoch_unexpected" not in fired(h.events, config(kafka_version="4.4"))
    one = History(group_type="streams")
    one.created()
    one.joined("a")
    one.bump(0, 1)
    one.target(1)
    assert "new_group_epoch_unexpected" in fired(one.events, config(kafka_version="4.2"))


def test_new_group_epoch_unexpected_exempts_groups_converted_from_classic_and_back():
    """Kafka converts in one batch: the old group's tombstones, then the new group's records; the converted
    group keeps the classic generation (here 1) as its group and assignment epoch."""
    h = History(group_type="classic")
    h.add("group_created", simple=False)
    h.add("classic_generation_changed", old_generation=None, generation=1, protocol_type="consumer",
          protocol="range", leader="a", members=["a"])
    h.after(5000)
    h.add("group_deleted")                                    # GroupMetadata tombstone ...
    h.group_type = "consumer"
    h.created()                                               # ... and the consumer group, same append
    h.joined("a")
    h.bump(0, 1)
    h.target(1)
    h.epoch("a", 1, 0, old=0)
    h.after(1000).bump(1, 2)
    h.after(1000).target(2)
    h.after(60_000)
    h.add("group_deleted")                                    # back to classic, one batch again
    h.group_type = "classic"
    h.add("group_created", simple=False)
    h.add("classic_generation_changed", old_generation=None, generation=3, protocol_type="consumer",
          protocol="range", leader="a", members=["a"])
    findings, _ = audit_group(h.events, config(kafka_version="4.3"))
    assert [f.rule for f in findings if f.severity in ("warning", "error")] == []
    # the same records without the tombstone in the same append: a new group, judged as one
    fresh = History()
    fresh.created()
    fresh.joined("a")
    fresh.bump(0, 1)
    fresh.target(1)
    assert "new_group_epoch_unexpected" in fired(fresh.events, config(kafka_version="4.3"))


def test_assignment_interval_violated():
    h = stable_group(History())
    h.after(10).bump(2, 3)
    h.after(500).target(3)              # 510 ms after the previous assignment, interval 1000
    known = config(group_overrides={"g": {"assignment_interval_ms": 1000}})
    assert "assignment_interval_violated" in fired(h.events, known)
    assert "assignment_interval_violated" not in fired(h.events, config(group_overrides={"g": {"assignment_interval_ms": 0}}))
    # -1 = the broker default, which a group config may override unseen: an info finding, not an error
    assert "assignment_interval_violated" not in fired(h.events, config(group_overrides={"g": {"assignment_interval_ms": -1}}))
    # a captured snapshot makes the interval known: the group's own config, else the broker default
    snapshot = {"complete": True, "broker": {"group.consumer.assignment.interval.ms": "1000"}, "groups": {}}
    findings, _ = audit_group(h.events, config(group_configs=snapshot))
    [finding] = [f for f in findings if f.rule == "assignment_interval_violated"]
    assert "group.consumer.assignment.interval.ms=1000" in finding.message
    snapshot["groups"] = {"g": {"consumer.assignment.interval.ms": {"value": "0", "source": "DYNAMIC_GROUP_CONFIG"}}}
    assert not {"assignment_interval_violated", "assignment_interval_overridden"} & set(
        fired(h.events, config(group_configs=snapshot)))
    ok = stable_group(History())
    ok.after(10).bump(2, 3)
    ok.after(990).target(3)
    assert "assignment_interval_violated" not in fired(ok.events, known)


def test_assignment_interval_overridden():
    """No snapshot: a group configured with consumer.assignment.interval.ms=0 must not raise an error per
    assignment, only one info finding naming its smallest gap and what it was judged against."""
    h = stable_group(History())
    for epoch, gap in ((3, 300), (4, 40), (5, 700)):
        h.after(5).bump(epoch - 1, epoch)
        h.after(gap).target(epoch)
    findings, _ = audit_group(h.events, BASE)
    assert [f.rule for f in findings if f.severity != "info"] == []
    [finding] = [f for f in findings if f.rule == "assignment_interval_overridden"]
    assert finding.severity == "info"
    assert "interval appears overridden (smallest gap 45 ms)" in finding.message
    assert "no group configs snapshot" in finding.details["judged_against"]
    assert finding.details["assignments_sooner"] == 3
    assert "assignment_interval_overridden" not in fired(stable_group(History()).events)


def test_assignment_timestamp_zero_unexpected():
    h = stable_group(History())
    h.after(10).bump(2, 3)
    h.after(1000).target(3, timestamp=0)
    assert "assignment_timestamp_zero_unexpected" in fired(h.events)
    assert "assignment_timestamp_zero_unexpected" not in fired(h.events, config(kafka_version="4.2"))
    ok = stable_group(History(), members=("a",))     # the last member leaves: Kafka writes timestamp 0
    ok.after(10).left("a")
    ok.bump(2, 3)
    ok.target(3, timestamp=0)
    assert "assignment_timestamp_zero_unexpected" not in fired(ok.events)


def test_assignment_timestamp_before_group_epoch_bump():
    h = stable_group(History())
    h.after(5000).bump(2, 3)
    h.after(100).target(3, timestamp=h.now - 3000)
    assert "assignment_timestamp_before_group_epoch_bump" in fired(h.events)
    ok = stable_group(History())
    ok.after(5000).bump(2, 3)
    ok.after(100).target(3)
    assert "assignment_timestamp_before_group_epoch_bump" not in fired(ok.events)


def test_assignment_timestamp_after_record_time():
    h = stable_group(History())
    h.after(5000).bump(2, 3)
    h.target(3, timestamp=h.now + 50)
    assert "assignment_timestamp_after_record_time" in fired(h.events)
    assert "assignment_timestamp_after_record_time" not in fired(stable_group(History()).events)


def test_partition_owned_twice():
    h = stable_group(History())
    h.after(10).owns("b", {"T1": {"2": 2, "3": 2, "0": 2}})
    found = fired(h.events)
    assert found.count("partition_owned_twice") == 1
    ok = stable_group(History())       # a partition moves: revoked by a first, then given to b
    ok.after(10).bump(2, 3)
    ok.after(1000).target(3)
    ok.owns("a", {"T1": {"1": 2}}, pending={"T1": {"0": 2}})
    ok.after(10).owns("a", {"T1": {"1": 2}})
    ok.after(10).owns("b", {"T1": {"0": 3, "2": 2, "3": 2}})
    assert "partition_owned_twice" not in fired(ok.events)


def _streams():
    h = History(group_type="streams")
    h.created()
    h.joined("m1", process_id="p1")
    h.joined("m2", process_id="p1")
    h.joined("m3", process_id="p2")
    h.bump(0, 2)
    h.target(2)
    for m in ("m1", "m2", "m3"):
        h.epoch(m, 2, 0)
    return h


def test_streams_task_held_twice_in_process():
    h = _streams()
    h.tasks("m1", active={"0": {"0": 2}})
    h.tasks("m2", standby={"0": {"0": 2}})           # same process holds task 0_0 twice
    assert "streams_task_held_twice_in_process" in fired(h.events)
    ok = _streams()
    ok.tasks("m1", active={"0": {"0": 2}})
    ok.tasks("m3", standby={"0": {"0": 2}})          # standby on another process: what standbys are for
    ok.after(10).tasks("m1", standby={"0": {"1": 2}}, pending={"active": {"0": {"1": 2}}, "standby": {}, "warmup": {}})
    assert "streams_task_held_twice_in_process" not in fired(ok.events)


def test_assignment_outside_subscription():
    cfg = load_settings(overrides={"rules": {"assignment_outside_subscription": {"enabled": True}}}).replace(
        topic_ids={"t": "T1", "other": "T2"})
    h = stable_group(History())
    h.after(10).owns("a", {"T1": {"0": 2, "1": 2}, "T2": {"0": 2}})
    assert "assignment_outside_subscription" in fired(h.events, cfg)
    assert "assignment_outside_subscription" not in fired(stable_group(History()).events, cfg)


def test_warmup_task_not_promoted():
    h = _streams()
    h.tasks("m1", warmup={"0": {"0": 2}})
    h.add("member_task_offsets", "m1", task_offsets={"0": {"0": 995}}, task_end_offsets={"0": {"0": 1000}})
    h.after(10).bump(2, 3)
    h.after(1000).target(3)
    assert "warmup_task_not_promoted" in fired(h.events)
    ok = _streams()
    ok.tasks("m1", warmup={"0": {"0": 2}})
    ok.add("member_task_offsets", "m1", task_offsets={"0": {"0": 0}}, task_end_offsets={"0": {"0": 10 ** 6}})
    ok.after(10).bump(2, 3)
    ok.after(1000).target(3)
    assert "warmup_task_not_promoted" not in fired(ok.events)


def test_assignor_mismatch():
    settings = BASE.rules
    rows = [{"group_id": "g", "group_type": "consumer", "assignment_epoch": 5, "assignor": "uniform",
             "confidence": "metadata_verified", "match": False, "moved_partitions": 3, "partition": 0, "offset": 42,
             "timestamp": 1_754_000_000_000, "kind": "rerun"},
            {"group_id": "g", "assignment_epoch": 5, "assignor": "range", "confidence": "high", "match": None,
             "kind": "what_if", "same_as_recorded": False},
            {"group_id": "g", "assignment_epoch": 8, "assignor": "uniform", "confidence": "high", "match": False,
             "error": "IllegalStateException"},
            {"group_id": "g", "assignment_epoch": 6, "assignor": "uniform", "confidence": "low", "match": False},
            {"group_id": "g", "assignment_epoch": 7, "assignor": "uniform", "confidence": "high", "match": True}]
    found = assignor_findings(rows, settings)
    assert [f.rule for f in found] == ["assignor_mismatch"]
    assert found[0].evidence == ["0:42"] and "3 partition(s)" in found[0].message


def test_offset_committed_backwards():
    h = stable_group(History())
    h.after(10).commit("t", 0, 100)
    h.after(10).commit("t", 0, 90)
    assert "offset_committed_backwards" in fired(h.events)
    ok = History(group_type="classic")   # no members: an admin reset of an empty group
    ok.add("group_created", simple=True)
    ok.commit("t", 0, 100)
    ok.commit("t", 0, 90)
    assert "offset_committed_backwards" not in fired(ok.events)


def test_offset_commit_by_non_owner():
    h = stable_group(History())
    h.after(10).commit("t", 3, 100, topic_id="T1")     # b owns T1-3
    h.after(10).commit("t", 9, 100, topic_id="T1")     # nobody owns T1-9
    assert fired(h.events).count("offset_commit_by_non_owner") == 1
    ok = stable_group(History())
    ok.after(10).commit("t", 3, 100, topic_id="AAAAAAAAAAAAAAAAAAAAAA")   # topic id unknown: no verdict
    ok.commit("t", 9, 100)
    assert "offset_commit_by_non_owner" not in fired(ok.events)


def test_transactional_offset_pending_too_long():
    h = stable_group(History())
    h.after(10).add("txn_offset_pending", topic="t", partition=0, producer_id=7, committed_offset=5)
    h.after(20 * 60_000).commit("t", 1, 10)
    assert "transactional_offset_pending_too_long" in fired(h.events)
    ok = stable_group(History())
    ok.after(10).add("txn_offset_pending", topic="t", partition=0, producer_id=7, committed_offset=5)
    ok.after(1000).add("txn_offset_committed", topic="t", partition=0, producer_id=7, committed_offset=5, applied=True)
    assert "transactional_offset_pending_too_long" not in fired(ok.events, end_time_ms=ok.now + 3_600_000)


def test_a_transaction_pending_too_long_is_reported_once_until_its_marker():
    """The pending map holds a transaction's first commit of a key; reported, the transaction stays reported: its
    producer's later commits of the key before the marker are the same transaction (the Spark rule tracks one
    row per transaction). After the marker the key's next transactional commit is a new one."""
    h = stable_group(History())
    h.after(10).add("txn_offset_pending", topic="t", partition=0, producer_id=7, committed_offset=5)
    h.after(20 * 60_000).add("txn_offset_pending", topic="t", partition=0, producer_id=7, committed_offset=6)
    h.after(20 * 60_000).add("txn_offset_pending", topic="t", partition=0, producer_id=7, committed_offset=7)
    h.after(20 * 60_000).commit("t", 1, 10)
    assert fired(h.events).count("transactional_offset_pending_too_long") == 1
    h.after(10).add("txn_offset_committed", topic="t", partition=0, producer_id=7, committed_offset=7, applied=True)
    h.after(10).add("txn_offset_pending", topic="t", partition=0, producer_id=7, committed_offset=8)
    h.after(20 * 60_000).commit("t", 1, 11)
    assert fired(h.events).count("transactional_offset_pending_too_long") == 2


def test_a_marker_that_applies_nothing_still_moves_the_groups_clock():
    """A transactional commit not applied (below the stored one) is an event of the group at its marker's time:
    another producer's transaction pending since more than the limit is reported there."""
    h = stable_group(History())
    h.after(10).add("txn_offset_pending", topic="t", partition=0, producer_id=7, committed_offset=5)
    h.add("txn_offset_pending", topic="t", partition=1, producer_id=8, committed_offset=1)
    h.after(20 * 60_000).add("txn_offset_committed", topic="t", partition=1, producer_id=8, committed_offset=1,
                             applied=False)
    findings, _ = audit_group(h.events, BASE, end_time_ms=h.now + 3_600_000)
    assert [(f.rule, f.time) for f in findings if f.rule == "transactional_offset_pending_too_long"] == [
        ("transactional_offset_pending_too_long", h.now)]   # at the marker, not at the log's end


def _classic(generation, members, protocol="range", leader=None, old=None, **extra):
    return dict(generation=generation, old_generation=old, protocol_type="consumer", protocol=protocol,
                leader=members[0] if leader is None and members else leader, members=members, **extra)


def test_classic_generation_decreased():
    h = History(group_type="classic")
    h.created()
    h.add("classic_generation_changed", **_classic(3, ["x"], old=None))
    h.after(10).add("classic_generation_changed", **_classic(2, ["x"], old=3))
    assert "classic_generation_decreased" in fired(h.events)
    ok = History(group_type="classic")
    ok.created()
    ok.add("classic_generation_changed", **_classic(3, ["x"]))
    ok.add("group_deleted")
    ok.created()
    ok.add("classic_generation_changed", **_classic(1, ["x"]))
    assert "classic_generation_decreased" not in fired(ok.events)


def test_classic_protocol_not_supported():
    h = History(group_type="classic")
    h.created()
    h.add("classic_generation_changed", **_classic(1, ["x", "y"], protocol="range",
                                                   supported_protocols={"x": ["range"], "y": ["roundrobin"]}))
    h.add("classic_generation_changed", **_classic(2, ["x"], protocol=None))
    assert fired(h.events).count("classic_protocol_not_supported") == 2
    ok = History(group_type="classic")
    ok.created()
    ok.add("classic_generation_changed", **_classic(1, ["x", "y"], supported_protocols={"x": ["range"], "y": ["range"]}))
    ok.add("classic_generation_changed", **_classic(2, [], protocol=None, leader=None))
    assert "classic_protocol_not_supported" not in fired(ok.events)


def test_classic_leader_not_member():
    h = History(group_type="classic")
    h.created()
    h.add("classic_generation_changed", **_classic(1, ["x"], leader="z"))
    assert "classic_leader_not_member" in fired(h.events)
    ok = History(group_type="classic")
    ok.created()
    ok.add("classic_generation_changed", **_classic(1, ["x", "y"], leader="y"))
    assert "classic_leader_not_member" not in fired(ok.events)


def test_classic_rebalance_rate_high():
    h = History(group_type="classic")
    h.created()
    for g in range(1, 40):
        h.after(60_000).add("classic_generation_changed", **_classic(g, ["x"], old=g - 1))
    assert fired(h.events).count("classic_rebalance_rate_high") == 1
    ok = History(group_type="classic")
    ok.created()
    for g in range(1, 40):
        ok.after(300_000).add("classic_generation_changed", **_classic(g, ["x"], old=g - 1))
    assert "classic_rebalance_rate_high" not in fired(ok.events)


def test_coordinator_partition_hogged():
    """A group whose assignor runs take most of a busy minute of its partition's coordinator, beside other groups."""
    from offsets_audit.audit import coordinator_load as L

    t0 = 1_754_000_040_000
    rows = [{"group_id": "big", "group_type": "consumer", "partition": 3, "offset": i, "timestamp": t0 + i * 1000,
             "assignment_epoch": i + 2, "assignment_timestamp": t0 + i * 1000, "num_members": 500,
             "assignor": "uniform", "rerun_cpu_ms": 200.0} for i in range(30)]
    runs = L.runs_of(rows, L.TimeFactors({"uniform": L.Factor(1.0, 1.0, 1.0)}))
    load = L.partition_load(runs)
    hogged = L.hogged_findings(load, runs, ["big", "orders"], L.HoggedThresholds())
    assert [(f.rule, f.group_id, f.details["partition"], f.details["neighbours"]) for f in hogged] == [
        ("coordinator_partition_hogged", "big", 3, ["orders"])]
    assert L.hogged_findings(load, runs, ["big"], L.HoggedThresholds()) == []   # alone on its partition


def test_rebalance_storm():
    h = stable_group(History(), members=("a",))
    for e in range(3, 80):
        h.after(30_000).bump(e - 1, e)
    assert fired(h.events).count("rebalance_storm") == 1
    ok = stable_group(History(), members=("a",))
    for e in range(3, 30):
        ok.after(120_000).bump(e - 1, e)
    assert "rebalance_storm" not in fired(ok.events)


def test_group_stuck_in_state():
    h = stable_group(History())
    h.after(10).bump(2, 3)             # ASSIGNING from here on: no target assignment follows
    h.after(400_000).commit("t", 0, 1)
    assert "group_stuck_in_state" in fired(h.events)
    ok = stable_group(History())
    ok.after(10).bump(2, 3)
    ok.after(1000).target(3)
    for m in ("a", "b"):
        ok.epoch(m, 3, 2)
    ok.after(400_000).commit("t", 0, 1)
    assert "group_stuck_in_state" not in fired(ok.events)


def test_rules_can_be_switched_off_and_reweighted():
    h = stable_group(History())
    h.after(10).bump(2, 1)
    cfg = load_settings(overrides={"rules": {"group_epoch_decreased": {"severity": "info"}}})
    findings, _ = audit_group(h.events, cfg)
    assert [(f.rule, f.severity) for f in findings if f.rule == "group_epoch_decreased"] == [("group_epoch_decreased", "info")]
    cfg = load_settings(overrides={"rules": {"group_epoch_decreased": {"enabled": False}}})
    assert "group_epoch_decreased" not in fired(h.events, cfg)


def test_rule_config_mistakes_name_the_key():
    with pytest.raises(UserError, match="rebalance_storm"):
        rule_settings({"rebalance_strom": {"max_per_hour": 5}})
    with pytest.raises(UserError, match="max_per_hour"):
        rule_settings({"rebalance_storm": {"max_per_hours": 5}})
    with pytest.raises(UserError, match="max_per_hour"):
        load_settings(overrides={"rules": {"rebalance_storm": {"max_per_hours": 5}}})
    with pytest.raises(UserError, match="negative"):
        rule_settings({"rebalance_storm": {"max_per_hour": -5}})


def test_finding_ids_do_not_depend_on_the_run():
    h = stable_group(History())
    h.after(10).bump(2, 1)
    a, _ = audit_group(h.events, BASE)
    b, _ = audit_group(list(h.events), BASE)
    assert [f.id for f in a] == [f.id for f in b]
    assert a[0].evidence == ["0:3", "0:9"]     # the bump to epoch 2 and the one back to 1


def test_conf_defaults_list_every_rule_with_its_defaults():
    from offsets_audit.config import load_defaults

    conf = load_defaults()["rules"]
    assert set(conf) == set(RULES)
    for rule_id, spec in RULES.items():
        assert conf[rule_id] == {"enabled": spec.enabled, "severity": spec.severity, **spec.thresholds}, rule_id


def test_docs_describe_every_rule():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "rules.md").read_text()
    assert all(f"`{rule_id}`" in text for rule_id in RULES)


def test_emit_raises_on_an_unknown_rule_id():
    from offsets_audit.audit.rules.base import AuditContext

    ctx = AuditContext(BASE, "g")
    with pytest.raises(KeyError, match="offset_went_backwards"):
        ctx.emit("offset_went_backwards", None, 0, "message", [])
