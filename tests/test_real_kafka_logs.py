"""Real brokers' ``__consumer_offsets``, kept in the repository, judged again by the outputs Kafka's own tools gave.

``tests/real_kafka_logs/<version>/`` holds what a ``test_real_kafka`` run on that Kafka release left (see the
README there): the segments its broker wrote for the scenarios' real clients, and what ``kafka-dump-log``,
``kafka-consumer-groups`` and the share and streams group tools printed about them. These tests need no JVM, so
every release of the matrix is checked in the default suite: each record prints as kafka-dump-log printed it,
the replay equals the tools' description, and the audit (with the assignor re-runs) finds nothing at warning or
above.
"""

from __future__ import annotations

import json

import pytest

from kafka_broker import version_key
from real_kafka import (
    VENDORED, differences, kafka_view, our_dump_log, parse_dump_log, records_below, replay_view, segment_records,
    topic_names, vendored_capture,
)

#: Folders of a whole run (with the tools' outputs); others hold only one scenario's segments, kept for one test.
VERSIONS = sorted((p.name for p in VENDORED.iterdir() if (p / "tools").is_dir()), key=version_key) \
    if VENDORED.is_dir() else []


@pytest.fixture(scope="module", params=VERSIONS)
def vendored(request):
    folder = VENDORED / request.param
    return folder, vendored_capture(folder)


def test_every_release_of_the_matrix_is_kept():
    assert {"3.9.1", "4.0.2", "4.2.1", "4.4.0"} <= set(VERSIONS)


def test_every_record_prints_as_kafka_dump_log_printed_it(vendored):
    folder, described = vendored
    theirs = parse_dump_log(described.outputs["dump-log"])
    ours, quarantine = our_dump_log(sorted(folder.glob("__consumer_offsets-*/*.log")))
    assert quarantine == [] and sorted(theirs) == sorted(ours)
    assert [(name, offset) for name in theirs for offset in sorted(set(theirs[name]) | set(ours[name]))
            if theirs[name].get(offset) != ours[name].get(offset)] == []


def test_replay_equals_the_tools_description(vendored):
    from offsets_audit.replay import replay_records

    folder, described = vendored
    records = records_below(segment_records(folder), described.end_offsets)
    view = replay_view(replay_records(records), topic_names(described.outputs["topics"]))
    assert differences(kafka_view(described), view) == []


def test_audit_and_assignor_re_runs_find_nothing(vendored):
    """A healthy cluster: no finding at warning or above, the assignor re-runs included (every recorded target
    either matches a re-run of the group's assignor or, for a classic group's online upgrade, is the classic
    members' own assignment)."""
    from offsets_audit.assignors.rerun import audit_group
    from offsets_audit.audit import assignor_findings, audit_events
    from offsets_audit.config import load_settings
    from offsets_audit.replay import replay_records

    folder, _ = vendored
    major, minor = version_key(folder.name)[:2]
    config = load_settings().replace(broker={"kafka_version": f"{major}.{minor}"})
    result = replay_records(segment_records(folder))
    findings, _ = audit_events(result.events, config)
    reruns = [row for fold in result.groups.values() if fold.target_assignment_rows()
              for row in audit_group(fold.target_assignment_rows(), kafka_version=config.broker.kafka_version)]
    findings += assignor_findings(reruns, config.rules)
    assert [(f.rule, f.group_id, f.message) for f in findings if f.severity in ("warning", "error")] == []
    scenarios = json.loads((folder / "scenarios.json").read_text())
    if "migration" in scenarios:
        upgrade = [row for row in reruns if row["group_id"].endswith("-migration-upgraded")]
        assert upgrade[0]["kind"] == "not_rerun" and upgrade[0]["match"] is None
        assert all(row["match"] for row in upgrade[1:] if row["kind"] == "rerun")


def _reruns(folder, kafka_version):
    from offsets_audit.assignors.rerun import audit_group
    from offsets_audit.replay import replay_records

    result = replay_records(segment_records(folder))
    return [row for fold in result.groups.values() if fold.target_assignment_rows()
            for row in audit_group(fold.target_assignment_rows(), kafka_version=kafka_version)
            if row["kind"] == "rerun"]


def test_kafka_3_9_re_runs_its_own_uniform_assignor_for_different_subscriptions():
    """``3.9.1-mixed`` holds a uniform group whose members subscribe to different topics (``consumer_mixed``),
    which Kafka 3.9 hands out with the heterogeneous builder 4.0 replaced: one of its targets is not what 4.0's rule
    gives. Re-run as 3.9 every target matches; as 4.0 that one differs; with the version not configured 3.x's rule
    is tried and the row says so (before, this was an ``assignor_mismatch`` on a healthy 3.9 cluster)."""
    folder = VENDORED / "3.9.1-mixed"

    def mixed(version):
        return [row for row in _reruns(folder, version) if row["group_id"] == "rk-consumer_mixed-group"]

    assert len(mixed("3.9")) >= 3 and all(row["match"] for row in mixed("3.9"))
    differing = [row["assignment_epoch"] for row in mixed("4.0") if not row["match"]]
    assert differing == [3]
    unknown = mixed(None)
    assert all(row["match"] for row in unknown)
    assert [row["assignment_epoch"] for row in unknown if "3.x" in (row["notes"] or "")] == differing


def test_kafka_3_9_re_runs_its_own_uniform_assignor():
    """Kafka 3.9's homogeneous uniform builder gives the extra partitions to the first members it iterates, even a
    member that joined empty (4.0 and later let such a member pass its extra one on to an owner), and it iterates
    a default ``HashMap`` of the members (4.0 and later: the group's table), so when two member ids share a bucket
    the order they went in decides. The kept 3.9.1 logs hold targets where each matters (a KIP-848 member joining
    a converted group; ``3.9.1-migration``: the converting heartbeat's own target, whose two converted members
    share a bucket). Re-run as the brokers' release does, every target matches; re-run as 4.x would, those do not;
    with the version not configured, the 3.x builder is tried after the newest and the row says so."""
    expected = {"3.9.1": [("rk-migration-downgraded", 3)], "3.9.1-migration": [("rk-migration-upgraded", 3)]}
    for name, differing in expected.items():
        folder = VENDORED / name
        assert all(row["match"] for row in _reruns(folder, "3.9")), name
        assert [(row["group_id"], row["assignment_epoch"]) for row in _reruns(folder, "4.0")
                if not row["match"]] == differing, name
    unknown = _reruns(VENDORED / "3.9.1", None)
    assert all(row["match"] for row in unknown)
    assert [(row["group_id"], row["assignment_epoch"]) for row in unknown if "3.x" in (row["notes"] or "")] \
        == [("rk-migration-downgraded", 3)]
