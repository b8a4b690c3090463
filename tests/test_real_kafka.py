"""A real Apache Kafka broker's ``__consumer_offsets``, written for real clients, judged by Kafka's own tools.

One broker of the version under test runs every scenario the version supports at once (``real_kafka.SCENARIOS``:
classic, KIP-848 consumer, share and streams groups, transactional commits, protocol migrations,
kafka-consumer-groups deleting and resetting). While the scenarios hold their groups, Kafka's tools describe
them, ``__consumer_offsets`` is copied and read live; then the judges compare:

* every record of every segment, as our reader and codec print it, with ``kafka-dump-log --offsets-decoder``;
* the replay of the log (up to the offsets the tools described) with ``kafka-consumer-groups``,
  ``kafka-share-groups`` and ``kafka-streams-groups``: every committed offset, group state and epoch, member
  epoch and assignment;
* the live topic (the kafka-python source) with the segments: the same groups and offsets;
* the pure audit of the log: no finding at warning or above (a healthy cluster).

The default suite judges the session's one run (``real_kafka.real_kafka_run``: the session's broker, killed
-9 and restarted in the middle of the scenarios, which ``test_real_kafka_faults`` judges too, together with the
default suite's one Spark ``check``). The version matrix (``--kafka-versions``, ``make test-kafka-versions``)
starts a broker of each version and also runs ``offsets-audit check`` on its log and ``offsets-audit run`` on
the live topic's Parquet dump (``offsets-audit dump``): their tables equal the tools' description.
"""

from __future__ import annotations

import pytest

import kafka_matrix
from kafka_broker import KafkaBroker, broker_versions, require_jars
from real_kafka import (
    RealRun, aborted_offsets, audit_config, differences, job_view, kafka_view, our_dump_log, parse_dump_log,
    records_below, replay_view, run_scenarios, segment_records,
)

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

PREFIX = "rk"


def pytest_generate_tests(metafunc):
    if "kafka_version" in metafunc.fixturenames:
        metafunc.parametrize("kafka_version", broker_versions(metafunc.config), scope="module")


def _matrix(config) -> bool:
    """Whether this is a version-matrix run (``--kafka-versions`` given): a broker per version, and the Spark
    jobs on its log and on the live topic's dump."""
    return bool(config.getoption("--kafka-versions", default=None))


@pytest.fixture(scope="module")
def real(kafka_version, tmp_path_factory, request, pytestconfig) -> RealRun:
    if not _matrix(pytestconfig):
        return request.getfixturevalue("real_kafka_run")
    require_jars(kafka_version)
    folder = tmp_path_factory.mktemp(f"real-kafka-{kafka_version}")
    broker = KafkaBroker(folder / "broker", kafka_version)
    try:
        broker.start()
        run = run_scenarios(broker, folder, PREFIX, parquet_dump=folder / "dump")
        kafka_matrix.scenarios_ran(kafka_version, run.scenarios)
        return run
    finally:
        broker.kill()


def test_every_scenario_runs_against_the_broker(real):
    outcome = {name: (s["status"], s["error"]) for name, s in real.scenarios.items()}
    assert outcome == {name: ("ok", None) for name in real.expected}


def test_kafka_consumer_groups_deletes_and_resets_the_empty_groups(real):
    for run in real.admin:
        run.check()
    described = kafka_view(real.capture)
    base = f"{PREFIX}-admin_groups"
    assert f"{base}-deleted" not in described["groups"]
    assert {k[1] for k in described["offsets"] if k[0] == f"{base}-delete-offsets"} == {f"{base}-second"}
    assert {v["offset"] for k, v in described["offsets"].items()
            if k[0] == f"{base}-reset" and k[1] == f"{base}-second"} == {0}


def test_segments_decode_as_kafka_dump_log_prints_them(real):
    """Every record of every segment: our key and payload text equal kafka-dump-log --offsets-decoder's, every
    transaction marker equal, and no offset one side has that the other lacks."""
    theirs = parse_dump_log(real.dump_log)
    ours, quarantine = our_dump_log(sorted(real.log_dir.glob("__consumer_offsets-*/*.log")))
    assert quarantine == []
    assert sorted(theirs) == sorted(ours) and len(ours) > len(list(real.log_dir.glob("__consumer_offsets-*")))
    mismatches = [(name, offset, theirs[name].get(offset), ours[name].get(offset))
                  for name in theirs for offset in sorted(set(theirs[name]) | set(ours[name]))
                  if theirs[name].get(offset) != ours[name].get(offset)]
    assert mismatches == []
    assert sum(len(entries) for entries in ours.values()) > 150


def test_replay_equals_what_kafka_describes(real):
    """The replay of the log up to the described offsets: every committed offset kafka-consumer-groups
    --describe --offsets shows, every group's state and epochs (--state), every member's epochs and assignments
    (--members --verbose), and the share and streams groups' tools likewise."""
    records = records_below(segment_records(real.log_dir), real.capture.end_offsets)
    from offsets_audit.replay import replay_records

    described = kafka_view(real.capture)
    assert described["offsets"] and described["members"]
    assert differences(described, replay_view(replay_records(records), real.names)) == []


def test_live_topic_replays_like_the_segments(real):
    """__consumer_offsets read live (kafka-python, read_committed) holds the segments' committed records and
    replays to the same groups, members and offsets."""
    from offsets_audit.replay import replay_records

    segments = records_below(segment_records(real.log_dir), real.capture.end_offsets)
    aborted = aborted_offsets(segments)
    visible = [(r["partition"], r["offset"], r["key"], r["value"]) for r in segments
               if not r["is_control"] and (r["partition"], r["offset"]) not in aborted]
    assert [(r["partition"], r["offset"], r["key"], r["value"]) for r in real.live] == visible
    live_view = replay_view(replay_records(real.live), real.names)
    assert differences(live_view, replay_view(replay_records(segments), real.names)) == []


def test_the_pure_audit_finds_nothing_on_a_healthy_cluster(real):
    from offsets_audit.audit import audit_events
    from offsets_audit.config import load_settings
    from offsets_audit.replay import replay_records

    config = load_settings(audit_config(real.folder, real.broker.version))
    findings, _ = audit_events(replay_records(segment_records(real.log_dir)).events, config)
    assert [(f.rule, f.group_id, f.message) for f in findings if f.severity in ("warning", "error")] == []


@pytest.mark.spark
def test_run_on_the_parquet_dump_equals_what_kafka_describes(real, spark, pytestconfig):
    """``offsets-audit run`` over the Parquet dump of the live topic: its group_state, members and offsets
    tables equal the tools' description, and its findings table has nothing at warning or above."""
    from offsets_audit.cli import main

    if not _matrix(pytestconfig):
        pytest.skip("the live topic's Parquet dump and its run are two more Spark jobs: make test-kafka-versions")
    output = real.folder / "run-dump"
    assert main(["run", "--config", str(audit_config(real.folder, real.broker.version)), "--input",
                 str(real.folder / "dump"), "--input-format", "parquet", "--output", str(output)]) == 0
    assert differences(kafka_view(real.capture), job_view(output, real.names, spark)) == []
    findings = spark.read.parquet(str(output / "findings")).collect()
    assert [(f["rule"], f["group_id"]) for f in findings if f["severity"] in ("warning", "error")] == []


@pytest.mark.spark
def test_check_passes_on_the_log_dir_and_its_tables_equal_the_replay(real, spark, pytestconfig):
    """``offsets-audit check --fail-on warning`` over the broker's log (every segment of the copy) passes, and
    its tables equal the pure replay of the same segments, and Kafka's description when the log ends where the
    tools saw it end."""
    from offsets_audit.cli import main
    from offsets_audit.replay import replay_records

    if not _matrix(pytestconfig):
        pytest.skip("the default suite's one Spark check is test_real_kafka_faults' (over the same run's log, cut "
                    "inside its last batch): make test-kafka-versions")

    output = real.folder / "check-segments"
    assert main(["check", "--config", str(audit_config(real.folder, real.broker.version)), "--input",
                 str(real.log_dir), "--input-format", "segments", "--output", str(output),
                 "--fail-on", "warning"]) == 0
    records = segment_records(real.log_dir)
    tables = job_view(output, real.names, spark)
    assert differences(replay_view(replay_records(records), real.names), tables) == []
    ends = {}
    for r in records:
        ends[r["partition"]] = r["offset"] + 1
    if ends == real.capture.end_offsets:  # nothing was written between the tools' description and the stop
        assert differences(kafka_view(real.capture), tables) == []


def test_compare_command_agrees_on_the_broker_log_dir(real, capsys):
    """``python tests/real_kafka.py compare`` (what a user runs on a copy of their cluster's log dir) finds
    every comparison agreeing on this broker's log dir and the tools' saved outputs."""
    from real_kafka import compare_log_dir

    assert compare_log_dir(real.log_dir, real.broker.version, real.folder / "capture", real.folder / "compare") == 0
    printed = capsys.readouterr().out
    assert "0 differ from kafka-dump-log; 0 quarantined" in printed
    assert "0 at warning or above" in printed and "replay: 0 difference(s)" in printed
