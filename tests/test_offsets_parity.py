"""Parity: the pure core and the Spark path give the same offsets, group tables, events and findings.

The Spark path keeps offset commits columnar (``replay.commit_log`` and the offset rules as SQL in
``audit.offsets_spark``); the pure core replays them one by one (``replay.offsets.OffsetStore``,
``audit.rules.offsets``). Inputs: every golden history (one ``__consumer_offsets`` partition each), with a
transactional tail on the consumer-group history (an aborted commit, a tombstone between a commit and its
marker, a backwards transactional commit, commits pending too long and one left open, a commit by no owner), and
a simulated history with every fault kind.
"""
from __future__ import annotations

import collections
import contextlib
import datetime as dt
import json

import pytest

from offsets_audit.audit import audit_events
from offsets_audit.codec.records import encode_record
from offsets_audit.config import load_settings
from offsets_audit.replay import replay_records
from replay_support import HISTORIES, load_expected, planned_as_a_small_log, source_df

pytestmark = pytest.mark.spark

GOLDEN_NAMES = ["history-assignment-batching", "history-consumer-group", "history-simple-and-txn-commits",
                "history-streams-group"]
MINUTE = 60_000


def _commit(partition, offset, ts, topic, tp, committed, producer_id=-1, group="orders-app"):
    key, value = encode_record(1, {"group": group, "topic": topic, "partition": tp},
                               None if committed is None else
                               {"offset": committed, "leaderEpoch": -1, "metadata": "", "commitTimestamp": ts},
                               None if committed is None else 3)
    return {"key": key, "value": value, "partition": partition, "offset": offset, "timestamp": ts,
            "producer_id": producer_id, "is_control": False, "control_type": None}


def _marker(partition, offset, ts, producer_id, control_type):
    key = (0).to_bytes(2, "big") + (1 if control_type == "COMMIT" else 0).to_bytes(2, "big")
    return {"key": key, "value": (0).to_bytes(2, "big") + (0).to_bytes(4, "big"), "partition": partition,
            "offset": offset, "timestamp": ts, "producer_id": producer_id, "is_control": True,
            "control_type": control_type}


def transactional_tail(partition: int, start: int, t: int) -> list[dict]:
    """Offset records after the consumer-group history's end (offset ``start``, time ``t``)."""
    o = iter(range(start, start + 100))
    return [
        _commit(partition, next(o), t + 1, "orders", 2, 1),                           # backwards
        _commit(partition, next(o), t + 2, "orders", 99, 7),                          # no member owns orders-99
        _commit(partition, next(o), t + 3, "payments", 0, 1, producer_id=5000),
        _marker(partition, next(o), t + 4, 5000, "ABORT"),                            # aborted: no verdict
        _commit(partition, next(o), t + 5, "payments", 1, 3, producer_id=5001),
        _commit(partition, next(o), t + 6, "payments", 1, None),                      # tombstone before the marker
        _marker(partition, next(o), t + 7, 5001, "COMMIT"),
        _commit(partition, next(o), t + 10, "payments", 2, 5, producer_id=5002),
        _commit(partition, next(o), t + 11, "orders", 3, 5, producer_id=5002),
        _commit(partition, next(o), t + 20 * MINUTE, "orders", 4, 9900),              # both pending > 15 min here
        _marker(partition, next(o), t + 21 * MINUTE, 5002, "COMMIT"),
        _commit(partition, next(o), t + 22 * MINUTE, "payments", 0, 8, producer_id=5003),   # never resolved
        _commit(partition, next(o), t + 23 * MINUTE, "orders", 2, 0, producer_id=5004),
        _commit(partition, next(o), t + 23 * MINUTE, "orders", 2, 0, producer_id=5004),     # same key twice
        _marker(partition, next(o), t + 24 * MINUTE, 5004, "COMMIT"),                 # applied, backwards
        _commit(partition, next(o), t + 25 * MINUTE, "orders", 0, 1, producer_id=5005),
        _commit(partition, next(o), t + 25 * MINUTE, "orders", 1, 1, producer_id=5005),
        _marker(partition, next(o), t + 45 * MINUTE, 5005, "COMMIT"),                 # late, no clock between
        _commit(partition, next(o), t + 50 * MINUTE, "orders", 5, 9999),
    ]


def golden_records() -> list[dict]:
    records = []
    for index, name in enumerate(GOLDEN_NAMES):
        rows = load_expected(HISTORIES / f"{name}-00000000000000000000.expected.jsonl")
        for r in rows:
            r["partition"] = index
        records.extend(rows)
        if name == "history-consumer-group":
            records.extend(transactional_tail(index, rows[-1]["offset"] + 1, rows[-1]["timestamp"]))
    return records


def _both(spark, records, config, *, tallied_clock: bool = False, record_count: int | None = None,
          segments=None, adaptive: bool = False):
    """The pure replay and audit of ``records``, and the Spark replay's tables and audit's findings; with
    ``tallied_clock`` the pending rule's clock bound is the job's (``offsets_spark.clock_blocks`` of its record
    tallies), else the rule's own aggregate of the events; ``record_count``: the log's size as the job tells the
    audit (``audit(..., records=...)``), unknown without it. ``segments``: a folder of the same records as log
    segments, read as the job reads it (marked, compact, commits packed: ``codec.packing``). The replay and audit
    plan as the job plans them on a log this small (``plans.plain_execution_for_a_small_log``), or with
    ``adaptive`` as it plans a large log's."""
    from offsets_audit.audit import spark as audit_spark
    from offsets_audit.audit.offsets_spark import clock_blocks
    from offsets_audit.codec.source import read_decoded
    from offsets_audit.codec.spark import compact, decode, split
    from offsets_audit.job import _tallies
    from offsets_audit.replay import spark as replay_spark

    # the job releases its stage caches when it ends; these calls do not, so each starts from an empty cache
    # instead of piling every earlier case's persisted tables into the driver's heap
    spark.catalog.clearCache()
    pure = replay_records(records)
    end = max(e["timestamp"] for e in pure.events if e["timestamp"] is not None)
    findings, _ = audit_events(pure.events, config, end_time_ms=end)
    if segments is None:
        decoded_all = decode(source_df(spark, records))
    else:
        decoded_all = compact(read_decoded(spark, {"kind": "segments", "path": str(segments)}, with_decoded_record=True,
                                           compact=True, pack_commits=True))
    with contextlib.nullcontext() if adaptive else planned_as_a_small_log(spark, len(records)):
        decoded, _ = split(decoded_all)
        tables = replay_spark.replay(decoded)
        audited = audit_spark.audit(tables, None, config, records=record_count,
                                    clock_blocks=clock_blocks(_tallies(decoded_all)) if tallied_clock else None)
        got = {name: tables[name].collect() for name in ("group_state", "members", "group_events", "offsets")}
        got["findings"] = audited["findings"].collect()
    return pure, findings, got


def _assert_same(pure, findings, got):
    # offsets: committed and pending, every column the pure store knows
    committed = {(r["group_id"], r["topic"], r["partition"]): (r["committed_offset"], r["record_offset"],
                                                               r["committed_leader_epoch"], r["metadata"])
                 for r in got["offsets"] if r["status"] == "committed"}
    assert committed == {k: (c["committed_offset"], c["record_offset"], c["committed_leader_epoch"], c["metadata"])
                         for k, c in pure.offsets.committed.items()}
    pending = sorted((r["producer_id"], r["group_id"], r["topic"], r["partition"], r["record_offset"])
                     for r in got["offsets"] if r["status"] == "pending")
    assert pending == sorted((r["producer_id"], r["group_id"], r["topic"], r["partition"], r["record_offset"])
                             for r in pure.offsets.pending_rows())
    # group tables and group events
    state = {r["group_id"]: r.asDict() for r in got["group_state"]}
    assert set(state) == set(pure.groups)
    for group_id, fold in pure.groups.items():
        expected = fold.state_row()
        assert {k: state[group_id][k] for k in expected} == expected
    members = sorted((m["group_id"], m["member_id"], m["member_epoch"]) for f in pure.groups.values()
                     for m in f.member_rows())
    assert sorted((r["group_id"], r["member_id"], r["member_epoch"]) for r in got["members"]) == members
    offset_kinds = {"offset_committed", "offset_expired_or_deleted", "txn_offset_pending", "txn_offset_committed",
                    "txn_offset_aborted"}
    events = sorted((e["partition"], e["offset"], e["event"], e["member_id"] or "", json.dumps(e["details"], sort_keys=True))
                    for e in pure.events if e["event"] not in offset_kinds)
    assert sorted((r["partition"], r["offset"], r["event"], r["member_id"] or "",
                   json.dumps(json.loads(r["details"]), sort_keys=True)) for r in got["group_events"]) == events
    _assert_same_findings(findings, got)


def _assert_same_findings(findings, got):
    """The findings, every field."""
    spark_findings = sorted((r["id"], r["rule"], r["group_id"], r["severity"],
                             None if r["time"] is None else int(r["time"].replace(tzinfo=dt.timezone.utc).timestamp() * 1000),
                             r["message"], tuple(r["evidence"]), r["details"]) for r in got["findings"])
    pure_findings = sorted((f.id, f.rule, f.group_id, f.severity, f.time, f.message, tuple(f.evidence),
                            f.to_dict()["details"]) for f in findings)
    assert spark_findings == pure_findings


def test_golden_histories_with_a_transactional_tail(spark):
    config = load_settings().replace(
        broker={"group_overrides": {"batch-override-0": {"assignment_interval_ms": 0}}},
        topic_ids={"orders": "tdSMm_pWjo9nwTbCqMDntA", "payments": "YEmEmknrDMNB0wEESWyKEA"})
    # planned as a large log's (adaptive execution), as Kafka-made records reach the audit at scale
    pure, findings, got = _both(spark, golden_records(), config, adaptive=True)
    rules = sorted(f.rule for f in findings)
    # the tail's verdicts: two backwards commits (plain, then transactional), one by no owner, three pending
    assert rules.count("offset_committed_backwards") >= 2
    assert "offset_commit_by_non_owner" in rules
    pending = [f for f in findings if f.rule == "transactional_offset_pending_too_long"]
    assert len(pending) == 3, [(f.message, f.evidence) for f in pending]
    assert not [f for f in findings if f.rule == "offset_committed_backwards" and "to 1" in f.message
                and "payments-0" in f.message]   # the ABORTed commit is no commit
    _assert_same(pure, findings, got)


@pytest.mark.parametrize("packed", [False, True], ids=["rows", "read-packed"])
def test_simulated_history_with_every_fault_kind(spark, tmp_path, packed):
    """The simulated history, as rows, and read from its segments as the job reads them (commits packed): the
    non-owner rule judges a packed run whole or commit by commit, the pending rule's clock counts every commit."""
    from offsets_audit.simulate import FAULT_KINDS, simulate
    from offsets_audit.sources.segments import list_segments, read_segment

    info = simulate(tmp_path, groups=12, hours=0.25, seed=3, partitions=4, faults=list(FAULT_KINDS),
                    formats=("segments",))
    records = [r for path, part in list_segments(tmp_path / "segments") for r in read_segment(path, part)]
    config = load_settings(overrides={"broker": {"group_overrides": info.get("group_overrides") or {},
                                                "group_overrides_complete": True}})
    state = json.loads((tmp_path / "model_state.json").read_text())
    config = config.replace(topic_ids={t["name"]: t["topic_id"] for t in state["topics"]})
    pure, findings, got = _both(spark, records, config, tallied_clock=packed, record_count=len(records) if packed else None,
                                segments=tmp_path / "segments" if packed else None)
    assert {f.rule for f in findings} >= {"partition_owned_twice", "assignment_interval_violated"}
    _assert_same(pure, findings, got)


@pytest.mark.parametrize("bits, span", [(0, 1), pytest.param(20, 64, marks=pytest.mark.full)])
def test_the_pending_rules_coarse_clock_only_decides_what_is_searched(spark, monkeypatch, bits, span):
    """The pending rule bounds each transaction by its blocks' latest times and searches only the suspects:
    with a block per offset and every resolved transaction past the span (all bounded by the range join), or
    one block for the whole log (every transaction a suspect), the findings are the pure core's."""
    from offsets_audit.audit import offsets_spark

    monkeypatch.setattr(offsets_spark, "BLOCK_BITS", bits)
    monkeypatch.setattr(offsets_spark, "_MAX_SPAN", span)
    config = load_settings().replace(topic_ids={"orders": "tdSMm_pWjo9nwTbCqMDntA",
                                                 "payments": "YEmEmknrDMNB0wEESWyKEA"})
    records = [r for r in golden_records() if r["partition"] == GOLDEN_NAMES.index("history-consumer-group")]
    pure, findings, got = _both(spark, records, config)
    assert len([f for f in findings if f.rule == "transactional_offset_pending_too_long"]) == 3
    _assert_same(pure, findings, got)


def test_another_groups_late_event_makes_a_suspect_that_the_search_clears(spark, monkeypatch):
    """The pending rule's blocks bound every group's events at once: another group's record past a transaction's
    threshold, inside the transaction's span, makes it a suspect (the group's own events would not). The search
    then reads the transaction's own group's events only, finds none past the threshold before the marker, and
    reports nothing, as the pure core."""
    from offsets_audit.audit import offsets_spark

    searched = []
    original = offsets_spark._first_late_events
    monkeypatch.setattr(offsets_spark, "_first_late_events",
                        lambda tracked, clock: searched.append(tracked) or original(tracked, clock))
    t = 1_700_000_000_000
    records = [
        _commit(0, 0, t, "orders", 0, 1),
        _commit(0, 1, t, "orders", 0, 1, group="other-app"),
        _commit(0, 2, t + 1, "orders", 0, 2, producer_id=7000),
        _commit(0, 3, t + 20 * MINUTE, "orders", 0, 3, group="other-app"),   # another group, past the threshold
        _marker(0, 4, t + 2, 7000, "COMMIT"),  # resolved at once (a clock that ran back: a leader moved)
    ]
    config = load_settings()
    pure, findings, got = _both(spark, records, config)
    assert not [f for f in findings if f.rule == "transactional_offset_pending_too_long"]
    _assert_same(pure, findings, got)
    assert [r["group_id"] for s in searched for r in s.collect()] == ["orders-app"]  # a suspect, cleared


@pytest.mark.parametrize("seed, tallied_clock", [(3, False), pytest.param(17, True, marks=pytest.mark.full)])
def test_the_pending_rule_judges_the_transactions_of_hot_blocks_only(spark, monkeypatch, seed, tallied_clock):
    """The pending rule tracks only the transactions of "hot" start blocks (``offsets_spark._judged``): those whose
    span holds a time past the block's earliest commit time plus the limit, and the open ones. On histories whose
    clocks run back and jump ahead (transactional and plain commits of two groups per partition, markers COMMIT
    and ABORT, blocks of four offsets) the findings are the pure walk's, and some transactions were left out. The
    clock's bound per block is the events' own, or (``tallied_clock``) the job's: every decoded record's latest time
    per block (``job._tallies``), at least as high, which can only add suspects."""
    import random

    from offsets_audit.audit import offsets_spark

    monkeypatch.setattr(offsets_spark, "BLOCK_BITS", 2)
    judged = []
    original = offsets_spark._judged
    monkeypatch.setattr(offsets_spark, "_judged", lambda *args: judged.append(original(*args)) or judged[-1])
    rng = random.Random(seed)
    t = 1_700_000_000_000
    records = []
    for partition in (0, 1):
        open_producers: set[int] = set()
        for offset in range(150):
            at = t + offset * MINUTE // 2 + rng.choice([0, 0, 0, 0, -20 * MINUTE, 17 * MINUTE])
            producer = rng.choice([7000, 7001, 7002, -1])
            if producer in open_producers and rng.random() < 0.35:
                records.append(_marker(partition, offset, at, producer, rng.choice(["COMMIT", "COMMIT", "ABORT"])))
                open_producers.discard(producer)
                continue
            group = f"{rng.choice(['orders-app', 'billing-app'])}-{partition}"
            records.append(_commit(partition, offset, at, "orders", rng.randrange(3), rng.randrange(1, 100),
                                   producer_id=producer, group=group))
            if producer != -1:
                open_producers.add(producer)
    config = load_settings()
    pure, findings, got = _both(spark, records, config, tallied_clock=tallied_clock)
    _assert_same_findings(findings, got)
    assert [f for f in findings if f.rule == "transactional_offset_pending_too_long"]
    transactional = sum(1 for r in records if r["producer_id"] != -1 and not r["is_control"])
    assert 0 < judged[-1].count() < transactional


def test_a_small_log_tracks_every_transaction_with_the_same_findings(spark, monkeypatch):
    """Told the log is small (``records`` below ``HOT_BLOCKS_MIN_RECORDS``, as the job tells it its count), the
    audit tracks every transaction without the hot-block prefilter (``_judged``, stages that pay only on large logs)
    and finds what the pure walk finds: a transaction left open past the limit, another resolved in time."""
    from offsets_audit.audit import offsets_spark

    def never(*args):
        raise AssertionError("a small log's audit ran the hot-block prefilter")

    monkeypatch.setattr(offsets_spark, "_judged", never)
    t = 1_700_000_000_000
    records = [
        _commit(0, 0, t, "orders", 0, 1, producer_id=7000),
        _commit(0, 1, t + MINUTE, "orders", 1, 5, producer_id=7001),
        _marker(0, 2, t + 2 * MINUTE, 7001, "COMMIT"),
        _commit(0, 3, t + 30 * MINUTE, "orders", 2, 9),
    ]
    pure, findings, got = _both(spark, records, load_settings(), record_count=len(records))
    _assert_same_findings(findings, got)
    assert [f.rule for f in findings] == ["transactional_offset_pending_too_long"]


def test_pending_transactions_of_a_group_in_two_partitions(spark):
    """A group whose records lie in two ``__consumer_offsets`` partitions, a transaction of one producer and key in
    each: each is tracked on its own though both markers sit at the same offset (the pending rule once merged the
    two and reported the lesser record offset only), and of a key's commits left open in both partitions the
    earlier partition's is tracked, as the walk does in log order. The transactions are aborted and the plain
    commits' keys differ between the partitions: the two offset stores order one key's commits across partitions
    differently, which is not what this test is about."""
    t = 1_700_000_000_000
    records = [
        _commit(0, 0, t, "orders", 1, 1, group="split"),
        _commit(0, 1, t + 1, "orders", 0, 5, producer_id=7, group="split"),
        _commit(0, 2, t + 1, "orders", 0, 6, producer_id=8, group="split-open"),   # never resolved
        _commit(0, 3, t + 20 * MINUTE, "orders", 1, 2, group="split"),             # past the first's limit
        _marker(0, 4, t + 21 * MINUTE, 7, "ABORT"),
        _commit(1, 0, t, "orders", 0, 3, producer_id=7, group="split"),
        _commit(1, 1, t, "orders", 0, 4, producer_id=8, group="split-open"),       # never resolved, lower offset
        _commit(1, 2, t + 20 * MINUTE, "orders", 2, 3, group="split"),
        _commit(1, 3, t + 20 * MINUTE, "orders", 3, 1, group="split"),
        _marker(1, 4, t + 21 * MINUTE, 7, "ABORT"),                                # the same offset as partition 0's
    ]
    pure, findings, got = _both(spark, records, load_settings())
    pending = sorted((f.group_id, f.evidence[0]) for f in findings if f.rule == "transactional_offset_pending_too_long")
    assert len(pending) == 3 and [g for g, _ in pending].count("split") == 2, pending
    # The findings only: the two offset stores differ on a key left pending in two partitions (the commit log keeps
    # the later one, the pure store both). Kafka writes a group's records to one partition while the topic's
    # partition count stays, so neither is Kafka's; the pending rule tracks as the walk does either way.
    _assert_same_findings(findings, got)


def test_the_commit_log_takes_previous_from_the_last_applied_commit(spark):
    """``previous_*`` is the last *applied* commit of the key's segment: a transactional commit whose marker
    comes after a later plain commit is effective but not applied, and is not what the next commit follows. A
    group in two ``__consumer_offsets`` partitions (same record offsets) applies the earlier partition's first."""
    from offsets_audit.codec.spark import decode, split
    from offsets_audit.replay.commit_log import resolve_commits

    t = 1_700_000_000_000
    records = [
        _commit(0, 10, t, "orders", 0, 100, producer_id=7),
        _commit(0, 11, t + 1, "orders", 0, 50),
        _marker(0, 12, t + 2, 7, "COMMIT"),                  # effective at 12, record offset 10 < 11: not applied
        _commit(0, 13, t + 3, "orders", 0, 40),              # follows 50 (at 0/11), not 100
        _commit(0, 11, t, "payments", 0, 50, group="split"),
        _commit(1, 11, t, "payments", 0, 60, group="split"),  # same record offset, later partition
        _commit(1, 12, t + 1, "payments", 0, 70, group="split"),
    ]
    decoded, _ = split(decode(source_df(spark, records)))
    got = {(r["group_id"], r["record_partition"], r["record_offset"]):
           (r["outcome"], r["applied"], r["previous_committed_offset"], r["previous_partition"], r["previous_offset"])
           for r in resolve_commits(decoded).collect()}
    assert got == {
        ("orders-app", 0, 10): ("txn_committed", False, 50, 0, 11),
        ("orders-app", 0, 11): ("committed", True, None, None, None),
        ("orders-app", 0, 13): ("committed", True, 50, 0, 11),
        ("split", 0, 11): ("committed", True, None, None, None),
        ("split", 1, 11): ("committed", False, 50, 0, 11),
        ("split", 1, 12): ("committed", True, 50, 0, 11),
    }


def _digest_records(*, unique_offsets: bool = False) -> list[dict]:
    """The golden histories with their transactional tail, a backwards transactional commit, groups in two
    partitions and commits naming topic ids. Two records share a position unless ``unique_offsets`` (a log)."""
    t = 1_700_000_000_000
    records = golden_records() + [
        _commit(10, 10, t, "orders", 0, 100, producer_id=7, group="txn-behind"),
        _commit(10, 11, t + 1, "orders", 0, 50, group="txn-behind"),
        _marker(10, 12, t + 2, 7, "COMMIT"),
        _commit(10, 13, t + 3, "orders", 0, 40, group="txn-behind"),
        _commit(10, 14 if unique_offsets else 11, t, "payments", 0, 50, group="split"),
        _commit(11, 11, t, "payments", 0, 60, group="split"),
        _commit(11, 12, t + 1, "payments", 0, 70, group="split"),
        # two partitions again: the later partition's plain commit is stored after the earlier one's transactional
        # commit, whose marker has a higher offset than it
        _commit(12, 10, t, "orders", 0, 100, producer_id=8, group="late-marker"),
        _marker(12, 30, t + 2, 8, "COMMIT"),
        _commit(13, 20, t + 1, "orders", 0, 200, group="late-marker"),
    ]
    # commits naming topic ids (value version 4): the first by position counts, not a tombstone's or a zero id
    named = [(14, 10, "orders", 1, "AAAAAAAAAAAAAAAAAAAAAA"), (14, 11, "orders", 0, "tdSMm_pWjo9nwTbCqMDntA"),
             (14, 12, "orders", 1, "YEmEmknrDMNB0wEESWyKEA"), (15, 10, "payments", 0, "YEmEmknrDMNB0wEESWyKEA")]
    for partition, offset, topic, tp, topic_id in named:
        key, value = encode_record(1, {"group": "named", "topic": topic, "partition": tp},
                                   {"offset": offset, "leaderEpoch": -1, "metadata": "", "commitTimestamp": t,
                                    "topicId": topic_id}, 4)
        records.append({"key": key, "value": value, "partition": partition, "offset": offset, "timestamp": t,
                        "producer_id": -1, "is_control": False, "control_type": None})
    return records


def test_the_digest_and_the_decoded_commits_stand_for_the_whole_log(spark):
    """What the batch audit keeps of the commit log (``resolve_commits(..., digest=True)``) plus the decoded commit
    records give the offset rules and the offsets snapshot the same rows as the whole log: on the golden histories
    with their transactional tail, and on a backwards transactional commit and a group in two partitions."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from offsets_audit.codec.spark import decode, split
    from offsets_audit.replay.commit_log import (COMMIT_DIGEST_DDL, COMMIT_LOG_DDL, COMMIT_RECORDS_DDL, ResolvedCommits,
                                                 commit_records, digest_snapshot, offsets_snapshot, resolve_commits)

    records = _digest_records()
    decoded, _ = split(decode(source_df(spark, records)))
    log = resolve_commits(decoded).persist()
    digest = resolve_commits(decoded, digest=True).persist()
    try:
        whole, kept = ResolvedCommits.of_log(log), ResolvedCommits.of_digest(digest, commit_records(decoded))
        assert digest.count() < log.count()
        for df, ddl in ((log, COMMIT_LOG_DDL), (digest, COMMIT_DIGEST_DDL), (commit_records(decoded),
                                                                             COMMIT_RECORDS_DDL)):
            assert df.schema.simpleString() == T._parse_datatype_string(ddl).simpleString()

        def rows(df):
            return sorted((tuple(r) for r in df.collect()), key=repr)

        assert rows(digest_snapshot(digest)) == rows(offsets_snapshot(log))
        assert [r["committed_offset"] for r in offsets_snapshot(log).filter(F.col("group_id") == "late-marker")
                .collect()] == [200]
        assert rows(kept.applied()) == rows(whole.applied())
        assert rows(kept.events()) == rows(whole.events())
        assert kept.latest_time() == whole.latest_time()
        groups = log.select("group_id").distinct()
        first_ids = rows(kept.first_topic_ids(groups))
        assert first_ids == rows(whole.first_topic_ids(groups))
        assert [(g, topic, tuple(first)) for g, topic, first in first_ids if g == "named"] == [
            ("named", "orders", (14, 11, "tdSMm_pWjo9nwTbCqMDntA")), ("named", "payments", (15, 10, "YEmEmknrDMNB0wEESWyKEA"))]
        backwards = F.col("applied") & (F.col("committed_offset") < F.col("previous_committed_offset"))
        transactional = F.col("outcome").startswith("txn_")
        # the digest's ``previous_*``: on applied rows only, where the backwards rule reads them
        previous = ("previous_committed_offset", "previous_partition", "previous_offset")
        on_applied = log.select(*[F.when(F.coalesce(F.col("applied"), F.lit(False)), F.col(c)).alias(c)
                                  if c in previous else c for c in log.columns])
        for only in (backwards, transactional):
            assert rows(digest.filter(only).select(*log.columns)) == rows(on_applied.filter(only))
        assert log.filter(transactional & F.col("previous_committed_offset").isNotNull() & ~F.col("applied")).count()
        assert ("txn-behind", 40) in rows(digest.filter(backwards).select("group_id", "committed_offset"))
    finally:
        log.unpersist()
        digest.unpersist()


def test_backwards_commit_of_a_group_without_members_follows_only_with_members(spark):
    """An admin's reset of a simple group (no members ever): reported only with ``only_with_members`` false, by the
    pure core, the batch audit and the incremental run's form of the rules (no ``members_context``) alike."""
    from pyspark.sql import functions as F

    from offsets_audit.audit import spark as audit_spark
    from offsets_audit.audit.offsets_spark import TIMELINE_DDL, offset_findings
    from offsets_audit.codec.spark import decode, split
    from offsets_audit.replay import spark as replay_spark

    t = 1_700_000_000_000
    records = [_commit(0, 0, t, "orders", 0, 100, group="reset-app"),
               _commit(0, 1, t + 1, "orders", 0, 90, group="reset-app")]
    pure = replay_records(records)
    # planned as the job plans a log this small
    with planned_as_a_small_log(spark, len(records)):
        decoded, _ = split(decode(source_df(spark, records)))
        tables = replay_spark.replay(decoded)
        events = tables.group_events.select(*audit_spark.EVENT_COLUMNS).filter(F.col("group_id").isNotNull())
        # the walk's timeline does not depend on the offset rules' settings: walked once
        timeline = audit_spark.walk_groups(events, load_settings(), t + 1).filter(
            F.col("kind").isin("context", "ownership")).select(
            "group_id", "kind", *[c.split()[0] for c in TIMELINE_DDL.split(", ")]).persist()
        # the incremental audit reads its commit log from the checkpoint (a leaf), not through the replay's lineage
        commit_log = tables.offset_commits.persist()
        for only in (True, False):
            config = load_settings(overrides={"rules": {"offset_committed_backwards": {"only_with_members": only}}})
            expected = [] if only else ["offset_committed_backwards"]
            assert [f.rule for f in audit_events(pure.events, config, end_time_ms=t + 1)[0]] == expected
            audited = audit_spark.audit(tables, None, config)
            assert [r["rule"] for r in audited["findings"].collect()] == expected
            audited.release()
            cached: list = []  # as the incremental audit calls it: the rules' intermediates persisted, read once each
            incremental_form = offset_findings(
                commit_log, events.select("group_id", "partition", "offset", "timestamp"), timeline,
                config.rules, config.topic_ids, t + 1, cached=cached)
            assert [r["rule"] for r in incremental_form.collect()] == expected
            for frame in cached:
                frame.unpersist()
        timeline.unpersist()
        commit_log.unpersist()


def _write_segments(root, records) -> None:
    """``records`` (``_commit`` / ``_marker`` dicts) as log segments, one per partition, one batch per record at its
    own offset (a transactional commit in a transactional batch of its producer)."""
    from offsets_audit.sources.segment_writer import SegmentWriter, encode_batch, encode_control_batch

    by_partition: dict = {}
    for r in records:
        by_partition.setdefault(r["partition"], []).append(r)
    for partition, rows in by_partition.items():
        rows.sort(key=lambda r: r["offset"])
        with SegmentWriter.create(root, partition, base_offset=rows[0]["offset"]) as writer:
            for r in rows:
                if r["is_control"]:
                    writer.append_raw([encode_control_batch(r["control_type"], r["offset"], r["producer_id"], 0, 0,
                                                            r["timestamp"])])
                    continue
                txn = r["producer_id"] not in (None, -1)
                writer.append_raw([encode_batch([(r["key"], r["value"])], r["offset"], r["timestamp"],
                                                producer_id=r["producer_id"] if txn else -1,
                                                producer_epoch=0 if txn else -1, transactional=txn)])


@pytest.mark.full  # many cases, each a Spark read; the marks themselves: test_segments_spark
def test_the_digest_is_the_same_without_the_commits_the_reader_marks_mid_run(spark, tmp_path):
    """The segments reader marks plain commits in the middle of a run of their key (``commit_mid_run``) and the
    digest leaves them out: its rows equal the digest of the same records without the mark, on the golden
    histories and ``_digest_records``' cases written as segments, plus long runs with a backwards commit, a
    marker and another key's commits inside, runs of a key with its own transactional commits resolved (committed,
    aborted) by markers inside them, and a group whose later partition's commits all fail to apply."""
    from pyspark.sql import functions as F

    from offsets_audit.codec.packing import elements
    from offsets_audit.codec.source import read_decoded
    from offsets_audit.codec.spark import COMMIT_MID_RUN_COLUMN, MARK_COLUMNS, split
    from offsets_audit.replay.commit_log import ResolvedCommits, commit_records, commit_runs, resolve_commits, run_commit

    t = 1_700_000_000_000
    committed = [10, 20, 30, 25, 40, 50, 60, 70, 80, 90]
    records = _digest_records(unique_offsets=True)
    records += [_commit(16, o, t + o, "orders", 0, c, group="runs") for o, c in enumerate(committed)]
    records += [_commit(16, 20 + o, t + 20 + o, "orders", o % 2, 100 + o, group="runs") for o in range(12)]
    records += [_commit(16, 40, t + 40, "orders", 9, 1, producer_id=5, group="runs"), _marker(16, 45, t + 45, 5, "COMMIT")]
    records += [_commit(16, 41 + o if o < 4 else 42 + o, t + 50 + o, "orders", 0, 200 + o, group="runs")
                for o in range(8)]
    # a transactional commit of a key resolved (COMMIT, then ABORT) by markers inside a run of the same key
    records += [_commit(16, 60, t + 60, "orders", 3, 500, producer_id=9, group="runs")]
    records += [_commit(16, 61 + o, t + 61 + o, "orders", 3, 600 + o, group="runs") for o in range(4)]
    records += [_marker(16, 65, t + 65, 9, "COMMIT")]
    records += [_commit(16, 66 + o, t + 66 + o, "orders", 3, 610 + o, group="runs") for o in range(4)]
    records += [_commit(16, 70, t + 70, "orders", 3, 700, producer_id=11, group="runs")]
    records += [_commit(16, 71 + o, t + 71 + o, "orders", 3, 800 + o, group="runs") for o in range(4)]
    records += [_marker(16, 75, t + 75, 11, "ABORT")]
    records += [_commit(16, 76 + o, t + 76 + o, "orders", 3, 810 + o, group="runs") for o in range(4)]
    records += [_commit(17, 100 + o, t + o, "payments", 0, 1000 + o, group="spread") for o in range(8)]
    records += [_commit(18, 10 + o, t + 20 + o, "payments", 0, 2000 + o, group="spread") for o in range(8)]
    _write_segments(tmp_path / "log", records)

    read = read_decoded(spark, {"kind": "segments", "path": str(tmp_path / "log")}, with_decoded_record=True)
    decoded, quarantined = split(read)
    assert quarantined.count() == 0
    assert decoded.filter(COMMIT_MID_RUN_COLUMN).count() >= 20
    marked = resolve_commits(decoded, digest=True)
    plain = resolve_commits(decoded.drop(*MARK_COLUMNS), digest=True)

    def rows(df):
        return sorted((tuple(r) for r in df.collect()), key=repr)

    assert rows(marked) == rows(plain)
    not_applied = marked.filter((F.col("group_id") == "spread") & ~F.col("applied")).select("record_offset")
    assert [r[0] for r in rows(not_applied)] == list(range(10, 18))
    backwards = marked.filter((F.col("group_id") == "runs") & (F.col("committed_offset") < F.col(
        "previous_committed_offset"))).select("record_offset", "previous_committed_offset")
    assert rows(backwards) == [(3, 30)]
    inside = marked.filter((F.col("group_id") == "runs") & (F.col("topic_partition") == 3)
                           & F.col("outcome").startswith("txn_")).select("record_offset", "outcome", "applied")
    assert rows(inside) == [(60, "txn_committed", False), (70, "txn_aborted", None)]

    # Read as the job reads it, commits packed (``codec.packing``): the same digest, and the offset rules read the
    # same commits from it and the runs, taken apart for the group whose later partition's commits fail to apply.
    packed_read, _ = split(read_decoded(spark, {"kind": "segments", "path": str(tmp_path / "log")},
                                        with_decoded_record=True, compact=True, pack_commits=True))
    runs = commit_runs(packed_read)
    assert runs.filter(F.col("group_id") == "spread").count() >= 2 and runs.count() >= 5
    digest = resolve_commits(packed_read, digest=True)
    assert rows(digest) == rows(marked)
    whole = ResolvedCommits.of_log(resolve_commits(decoded))
    kept = ResolvedCommits.of_digest(digest, commit_records(packed_read, runs_apart=True), runs=runs)
    assert rows(kept.applied()) == rows(whole.applied())
    assert rows(kept.events()) == rows(whole.events())
    # a run's commits share its value's topic id (``commit_runs``' own column), read beside the run here
    run_topic_ids = runs.select("group_id", "topic", "topic_partition", F.col("record_partition").alias("partition"),
                                F.col("first_offset").alias("offset"), F.col("topic_id").alias("_topic_id"))
    whole_runs = kept.applied_runs().join(run_topic_ids, ["group_id", "topic", "topic_partition", "partition", "offset"])
    whole_runs = whole_runs.select("*", F.explode(elements(F.col("_run"))).alias("_c"))
    commit = run_commit(F.col("_c"))
    whole_runs = whole_runs.select("group_id", "topic", "topic_partition", commit["committed_offset"],
                                   F.col("_topic_id").alias("topic_id"), "partition",
                                   commit["record_offset"].alias("offset"), commit["timestamp"].alias("time"))
    assert not whole_runs.filter(F.col("group_id") == "spread").count()
    assert rows(kept.applied(runs_apart=True).unionByName(whole_runs)) == rows(whole.applied())


def _interleaved_runs() -> list[dict]:
    """The consumer-group history with runs of plain commits threaded through it: after each of its records a
    commit of orders-99 (no member ever owns it), then of orders-0 and orders-1 (owned by turns, and by none before
    the first assignment), the commit of orders-5 half-way naming the topic's id; then, once the group is stable, runs
    of orders-2 (owned throughout) and orders-99. Renumbered: one partition, every record at its own offset."""
    name = "history-consumer-group"
    history = load_expected(HISTORIES / f"{name}-00000000000000000000.expected.jsonl")
    records: list[dict] = []
    committed = iter(range(1, 100_000))
    for i, row in enumerate(history):
        records.append(dict(row, partition=0, offset=len(records)))
        t = row["timestamp"]
        for tp in (99, 0, 1):
            records.append(_commit(0, len(records), t, "orders", tp, next(committed)))
        if i == len(history) // 2:
            key, value = encode_record(1, {"group": "orders-app", "topic": "orders", "partition": 5},
                                       {"offset": next(committed), "leaderEpoch": -1, "metadata": "",
                                        "commitTimestamp": t, "topicId": "tdSMm_pWjo9nwTbCqMDntA"}, 4)
            records.append({**records[-1], "key": key, "value": value, "offset": len(records)})
    t = history[-1]["timestamp"]
    for n in range(12):
        for tp in (2, 99):
            records.append(_commit(0, len(records), t + n, "orders", tp, next(committed)))
    return records


@pytest.mark.parametrize("configured_ids", [False, True], ids=["named-by-a-commit", "configured"])
def test_packed_runs_are_judged_whole_or_commit_by_commit(spark, tmp_path, configured_ids):
    """The reader packs a key's mid-run commits (``codec.packing``); the non-owner rule judges a packed run whole
    when its first and last commits lie in one owned interval and its topic's id is known at its first (or at none
    of them), else commit by commit. Runs through the consumer-group history's rebalances, runs of a partition no
    member owns, runs across the commit that first names the topic's id: the pure core's findings, exactly."""
    from pyspark.sql import functions as F

    from offsets_audit.codec.source import read_decoded
    from offsets_audit.codec.spark import PACKED_COLUMN

    records = _interleaved_runs()
    _write_segments(tmp_path / "log", records)
    packed = read_decoded(spark, {"kind": "segments", "path": str(tmp_path / "log")}, with_decoded_record=True,
                          compact=True, pack_commits=True).filter(F.col(PACKED_COLUMN).isNotNull())
    assert {r["topic_partition"] for r in packed.collect()} >= {0, 1, 2, 99}
    config = load_settings()
    if configured_ids:
        config = config.replace(topic_ids={"orders": "tdSMm_pWjo9nwTbCqMDntA", "payments": "YEmEmknrDMNB0wEESWyKEA"})
    pure, findings, got = _both(spark, records, config, tallied_clock=True, segments=tmp_path / "log")
    by_partition = collections.Counter(f.details["partition"] for f in findings if f.rule == "offset_commit_by_non_owner")
    # orders-99 from the commit naming the id on (from the start, with the id configured); orders-0 and orders-1
    # while no member owned them (judged only with the id configured: it is named after that); orders-2 never
    assert by_partition[99] > len(records) // 8 and 2 not in by_partition
    assert (by_partition[0] > 0 and by_partition[1] > 0) == configured_ids
    _assert_same(pure, findings, got)
