"""Assignor re-runs chained the way the coordinator ran them (``rerun.RerunChain``, ``current_order`` column).

Each golden assignor scenario (steps 0..N of one group, ``tests/golden/README.md``) is turned into the
``target_assignments`` rows a replay would give: one row per step, with the step's input as the members and the
previous target, and the step's expected output as the recorded target. The previous target is the golden input's
sorted JSON, i.e. an order that is *not* the Java order Kafka iterated -- as when record order is lost -- so the
history-dependent steps only match when the re-run carries the previous re-run's Java-ordered output.

The golden generator lists members in its own order, not in the coordinator's ``TimelineHashMap`` order that
``inputs.MemberOrder`` reproduces, and its subscribed topic ids in its own order, not in the order of the
coordinator's ``TopicIds`` over the member's names (``inputs.subscription_iteration_order``), so these tests keep
the input's orders (``_golden_member_order``).
"""
from __future__ import annotations

import collections
import json

import pytest

from golden_files import GOLDEN, open_golden
from offsets_audit.assignors import inputs, rerun, run
from offsets_audit.assignors.rerun import ORDER_CHAINED, ORDER_NOT_SENSITIVE, ORDER_RECORDS, audit_group
from offsets_audit.assignors.topic_metadata import TopicMetadata

# Steps whose input alone does not give Kafka's iteration order (see test_assignors_uniform.py).
HISTORY_DEPENDENT = {
    "uniform": {("uniform-20260822-1", 3), ("uniform-20260822-3", 1), ("uniform-20260822-3", 3),
                ("uniform-20260822-13", 2), ("uniform-20260822-18", 1)},
    "simple": {("simple-20260822-3", 3), ("simple-20260822-9", 3)},
}


def _scenarios(assignor: str) -> dict[str, list[dict]]:
    with open_golden(GOLDEN / "assignors" / f"{assignor}.jsonl") as handle:
        cases = [json.loads(line) for line in handle if line.strip()]
    out = collections.defaultdict(list)
    for case in cases:
        out[case["case_id"].rsplit("-step", 1)[0]].append(case)
    return {sid: sorted(steps, key=lambda c: c["step"]) for sid, steps in out.items()
            if not any(s["expected"].get("error") for s in steps)}


SCENARIOS = {name: _scenarios(name) for name in ("uniform", "simple")}


def _time(step: dict) -> int:
    return 1000 * (step["step"] + 1)


def history_rows(assignor: str, steps: list[dict]) -> list[dict]:
    """``target_assignments`` rows of one scenario, one per step, in log order."""
    group_type = "share" if assignor == "simple" else "consumer"
    rows = []
    for step in steps:
        case = step["input"]
        names = {t["id"]: t["name"] for t in case["topics"]}
        members = [{"member_id": m["member_id"], "member_epoch": 1, "instance_id": m.get("instance_id"),
                    "rack_id": m.get("rack_id"), "server_assignor": assignor,
                    "subscribed_topic_names": m.get("subscribed_topic_names")
                    or [names.get(t, t) for t in m["subscribed_topic_ids"]]} for m in case["members"]]
        initialized = None
        if group_type == "share":
            allowed = case.get("assignable_partitions")
            initialized = ([{"topicId": t, "partitions": p} for t, p in allowed.items()] if allowed is not None
                           else [{"topicId": t["id"], "partitions": list(range(t["partitions"]))}
                                 for t in case["topics"]])
        rows.append({
            "group_id": "g", "group_type": group_type, "assignment_epoch": step["step"] + 2,
            "assignment_timestamp": _time(step), "partition": 0, "offset": step["step"], "metadata_hash": None,
            "members": members, "target": step["expected"]["members"],
            "previous_target": {m["member_id"]: m["current_assignment"] for m in case["members"]
                                if m["current_assignment"]},
            "initialized_topics": initialized})
    return rows


def topic_versions(steps: list[dict]) -> TopicMetadata:
    """Each step's topics valid from its time; a topic gone at a step is a version without an id."""
    out, seen = [], set()
    for step in steps:
        here = {t["name"] for t in step["input"]["topics"]}
        out += [dict(t, valid_from_ms=_time(step)) for t in step["input"]["topics"]]
        out += [{"name": n, "id": None, "partitions": 0, "valid_from_ms": _time(step)} for n in seen - here]
        seen |= here
    return TopicMetadata(out)


@pytest.fixture
def _golden_member_order(monkeypatch):
    monkeypatch.setattr(inputs.MemberOrder, "order", lambda self, members, overlay=True, converted=False: members)
    # likewise the topics: the generator's subscribed-id order, not the coordinator's ``TopicIds`` over names
    monkeypatch.setattr(inputs, "subscription_iteration_order",
                        lambda member, resolved: list(member.get("subscribed_topic_names") or ()))
    # and the generator handed Kafka's share assignor each member's ids as a HashSet<Uuid>, not as the coordinator's
    # TopicIds view a rebuilt input stands for: the simple assignor takes them as a golden input's
    build = inputs.consumer_case_input

    def golden_case_input(*args, **kwargs):
        case = build(*args, **kwargs)
        case.pop("subscribed_topic_order", None)
        return case

    monkeypatch.setattr(inputs, "consumer_case_input", golden_case_input)


def _audit(assignor: str, sid: str) -> list[dict]:
    steps = SCENARIOS[assignor][sid]
    return audit_group(history_rows(assignor, steps), topic_versions(steps))


@pytest.mark.parametrize("assignor", ["uniform", "simple"])
def test_every_golden_scenario_re_run_as_a_history_matches_at_every_step(assignor, _golden_member_order):
    mismatches = []
    for sid in SCENARIOS[assignor]:
        rows = _audit(assignor, sid)
        assert [r["current_order"] for r in rows][:1] in ([ORDER_RECORDS], [])
        mismatches += [(sid, r["assignment_epoch"] - 2) for r in rows if not r["match"]]
    assert mismatches == []


@pytest.mark.parametrize("assignor", ["uniform", "simple"])
def test_history_dependent_steps_match_because_the_chain_carries_java_order(assignor, _golden_member_order):
    for sid, step in sorted(HISTORY_DEPENDENT[assignor]):
        row = _audit(assignor, sid)[step]
        assert (row["match"], row["current_order"]) == (True, ORDER_CHAINED), (sid, step)


@pytest.mark.parametrize("assignor", ["uniform", "simple"])
def test_without_the_chain_exactly_the_history_dependent_steps_mismatch(assignor, _golden_member_order,
                                                                       monkeypatch):
    monkeypatch.setattr(rerun.RerunChain, "carried", lambda self: None)
    mismatched = set()
    for sid in SCENARIOS[assignor]:
        rows = _audit(assignor, sid)
        assert {r["current_order"] for r in rows} == {ORDER_RECORDS}
        mismatched |= {(sid, r["assignment_epoch"] - 2) for r in rows if not r["match"]}
    assert mismatched == HISTORY_DEPENDENT[assignor]


def test_a_mismatch_breaks_the_chain_and_the_next_re_run_starts_from_record_order(_golden_member_order):
    sid = "uniform-20260822-3"
    steps = SCENARIOS["uniform"][sid]
    rows = history_rows("uniform", steps)
    first = rows[0]["target"]
    member, assignment = next((m, a) for m, a in first.items() if a)
    other = next(m for m in first if m != member)
    rows[0]["target"] = dict(first, **{member: {}, other: {**first[other], **assignment}})  # a faulty step 0
    out = audit_group(rows, topic_versions(steps))
    assert out[0]["match"] is False
    assert out[1]["current_order"] == ORDER_RECORDS


def test_range_re_runs_say_the_order_does_not_matter():
    steps = SCENARIOS["uniform"]["uniform-20260822-0"]
    rows = [dict(r, members=[dict(m, server_assignor="range") for m in r["members"]])
            for r in history_rows("uniform", steps)]
    out = audit_group(rows, topic_versions(steps))
    assert {r["current_order"] for r in out} == {ORDER_NOT_SENSITIVE}


@pytest.mark.parametrize("name", ["streams-sticky", "sticky", "streams_sticky", "Streams-Sticky"])
def test_run_accepts_the_golden_and_kafka_names_of_the_streams_assignor(name):
    with open_golden(GOLDEN / "assignors" / "streams_sticky.jsonl") as handle:
        case = json.loads(handle.readline())
    assert case["assignor"] == "streams-sticky"
    assert run(name, case["input"]) == case["expected"]


@pytest.mark.parametrize("name", ["uniform", "range", "simple", "UNIFORM"])
def test_run_accepts_the_partition_assignors_by_kafka_name(name):
    base = name.lower()
    with open_golden(GOLDEN / "assignors" / f"{base}.jsonl") as handle:
        case = json.loads(handle.readline())
    assert run(name, case["input"]) == case["expected"]


# -- the Spark edge keeps record order -------------------------------------------------------------------------

def _group_records() -> list[dict]:
    """A consumer group whose member holds two topics; its target record lists them in a non-sorted order."""
    from offsets_audit.codec.records import encode_record

    topic_b, topic_a = "zzzzzzzzzzzzzzzzzzzzzw", "AAAAAAAAAAAAAAAAAAAAAQ"
    records = []

    def add(record_type, key, value, version=0):
        k, v = encode_record(record_type, key, value, version)
        records.append({"key": k, "value": v, "partition": 0, "offset": len(records), "timestamp_ms": 1000})

    member = {"groupId": "g", "memberId": "m1"}
    for epoch in (2, 3):
        add(3, {"groupId": "g"}, {"epoch": epoch, "metadataHash": 0})
        add(7, member, {"topicPartitions": [{"topicId": topic_b, "partitions": [5, 1]},
                                            {"topicId": topic_a, "partitions": [0]}]})
        add(6, {"groupId": "g"}, {"assignmentEpoch": epoch, "assignmentTimestamp": 1000 * epoch})
    return records


def test_spark_replay_keeps_the_record_order_of_target_assignments():
    import pandas as pd

    from offsets_audit.replay.fold import GroupFold
    from offsets_audit.replay.spark import fold_frame

    out = fold_frame(GroupFold("g"), pd.DataFrame(_group_records()))
    targets = [json.loads(payload) for kind, _, payload in out if kind == "target"]
    assert len(targets) == 2
    for column in ("target", "previous_target"):
        held = json.loads(targets[1][column])["m1"]
        assert list(held) == ["zzzzzzzzzzzzzzzzzzzzzw", "AAAAAAAAAAAAAAAAAAAAAQ"]
        assert held["zzzzzzzzzzzzzzzzzzzzzw"] == [5, 1]


@pytest.mark.spark
def test_spark_assignor_audit_chains_like_the_pure_core(spark):
    """The Spark edge runs ``audit_group`` per group on the executors: same rows, same chain, same orders."""
    from offsets_audit.assignors import spark as assignor_spark
    from offsets_audit.replay.spark import TARGET_ASSIGNMENTS_DDL, _JSON_COLUMNS_OF_TARGETS

    steps = SCENARIOS["uniform"]["uniform-20260822-1"]  # step 3 needs the chain, also in coordinator member order
    rows = history_rows("uniform", steps)
    snapshot = topic_versions(steps)
    expected = audit_group(rows, snapshot)
    columns = [c.split()[0] for c in TARGET_ASSIGNMENTS_DDL.split(", ")]
    encoded = [tuple(json.dumps(r.get(c)) if c in _JSON_COLUMNS_OF_TARGETS else r.get(c) for c in columns)
               for r in rows]
    frame = spark.createDataFrame(encoded, TARGET_ASSIGNMENTS_DDL)
    topics = spark.createDataFrame(pd_topics(snapshot))
    got = sorted((r.asDict() for r in assignor_spark.audit(frame, topics).collect()),
                 key=lambda r: r["assignment_epoch"])
    assert [(r["match"], r["current_order"]) for r in got] == [(r["match"], r["current_order"]) for r in expected]
    assert ORDER_CHAINED in {r["current_order"] for r in got}


def pd_topics(snapshot: TopicMetadata):
    import pandas as pd

    rows = [dict(t, partition_racks=json.dumps(t["partition_racks"])) for versions in snapshot._versions.values()
            for t in versions]
    return pd.DataFrame(rows)


def test_a_chain_trimmed_to_its_last_steps_still_carries_the_order(_golden_member_order, monkeypatch):
    """Only the last ``MAX_STEPS`` inputs are kept (memory on long histories); two already reproduce every step."""
    monkeypatch.setattr(rerun.RerunChain, "MAX_STEPS", 2)
    for assignor in ("uniform", "simple"):
        for sid in SCENARIOS[assignor]:
            assert all(r["match"] for r in _audit(assignor, sid)), sid
