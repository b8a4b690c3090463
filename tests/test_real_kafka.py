"""A real Apache Kafka broker's ``__consumer_offsets``, written for real clients, judged by Kafka's own tools.

One broker of the version under test (``--kafka-versions``; default the newest) runs every scenario the
version supports at once (``real_kafka.SCENARIOS``: classic, KIP-848 consumer, share and streams groups,
transactional commits, protocol migrations, kafka-consumer-groups deleting and resetting). While the scenarios
hold their groups, Kafka's tools describe them and the live topic is read and dumped to Parquet; then the
broker stops and the judges compare:

* every record of every segment, as our reader and codec print it, with ``kafka-dump-log --offsets-decoder``;
* the replay of the log (up to the offsets the tools described) with ``kafka-consumer-groups``,
  ``kafka-share-groups`` and ``kafka-streams-groups``: every committed offset, group state and epoch, member
  epoch and assignment;
* the live topic (the kafka-python source) with the segments: the same groups and offsets;
* ``offsets-audit check`` on the log dir: the job's tables equal the above, and no finding at warning or above
  (a healthy cluster); and, in the version matrix (``--kafka-versions``, ``make test-kafka-versions``), the live
  topic's Parquet dump (``offsets-audit dump``) through ``offsets-audit run`` likewise. The default suite leaves
  those two Spark jobs to the matrix: its budget is a few minutes for all of this module.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from kafka_broker import KafkaBroker, broker_versions, require_jars, version_key
from real_kafka import (
    Capture, ScenarioRun, admin_commands, capture, differences, job_view, kafka_view, live_records,
    our_dump_log, parse_dump_log, records_below, replay_view, segment_records, supported_scenarios, topic_names,
)

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

PREFIX = "rk"


def pytest_generate_tests(metafunc):
    if "kafka_version" in metafunc.fixturenames:
        metafunc.parametrize("kafka_version", broker_versions(metafunc.config), scope="module")


@dataclass
class RealRun:
    """What one broker's run left for the judges."""

    broker: KafkaBroker
    folder: Path
    scenarios: dict
    expected: list[str]
    admin: list
    capture: Capture
    live: list[dict]
    parquet_dump: Path
    dump_log: str
    names: dict[str, str] = field(default_factory=dict)

    @property
    def log_dir(self) -> Path:
        return self.broker.log_dir


def audit_config(folder: Path, version: str) -> Path:
    """A job config for a broker of ``version`` (what a user states of their cluster), no HTML report."""
    major, minor = version_key(version)[:2]
    path = folder / f"audit-{version}.yaml"
    path.write_text(f"broker:\n  kafka_version: \"{major}.{minor}\"\noutput:\n  html_report: false\n")
    return path


def _matrix(config) -> bool:
    """Whether this is a version-matrix run (``--kafka-versions`` given): it also dumps and runs the dump."""
    return bool(config.getoption("--kafka-versions", default=None))


@pytest.fixture(scope="module")
def real(kafka_version, tmp_path_factory, spark, pytestconfig) -> RealRun:
    from offsets_audit.cli import main

    require_jars(kafka_version)
    folder = tmp_path_factory.mktemp(f"real-kafka-{kafka_version}")
    broker = KafkaBroker(folder / "broker", kafka_version)
    driver = None
    try:
        broker.start()
        expected = supported_scenarios(broker)
        driver = ScenarioRun(broker, folder / "scenarios", PREFIX, expected)
        scenarios = driver.wait_ready()
        admin = broker.run_tools(admin_commands(broker, PREFIX))
        described = capture(broker, driver.groups("share"), driver.groups("streams"))
        described.save(folder / "capture")
        live = live_records(broker.bootstrap, described.end_offsets)
        parquet_dump = folder / "dump"
        if _matrix(pytestconfig):
            ending = json.dumps({"__consumer_offsets": {str(p): o for p, o in described.end_offsets.items()}})
            assert main(["dump", "--bootstrap-server", broker.bootstrap, "--ending-offsets", ending,
                         "--output", str(parquet_dump), "--progress-interval", "600"]) == 0
        # the broker stops while the members are still in their groups: nothing more is written
        broker.stop()
        driver.kill()
        dump_log = broker.run_tools([broker.dump_log_invocation(broker.offsets_segments())])[0].check().stdout
        (folder / "capture" / "dump-log.txt").write_text(dump_log)
    finally:
        if driver is not None:
            driver.kill()
        broker.kill()
    return RealRun(broker, folder, scenarios, expected, admin, described, live, parquet_dump, dump_log,
                   topic_names(described.outputs["topics"]))


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
    ours, quarantine = our_dump_log(real.broker.offsets_segments())
    assert quarantine == []
    assert sorted(theirs) == sorted(ours) and len(ours) > len(real.broker.offsets_partition_dirs())
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
    aborted = _aborted_offsets(segments)
    visible = [(r["partition"], r["offset"], r["key"], r["value"]) for r in segments
               if not r["is_control"] and (r["partition"], r["offset"]) not in aborted]
    assert [(r["partition"], r["offset"], r["key"], r["value"]) for r in real.live] == visible
    live_view = replay_view(replay_records(real.live), real.names)
    assert differences(live_view, replay_view(replay_records(segments), real.names)) == []


def _aborted_offsets(records: list[dict]) -> set[tuple[int, int]]:
    """(partition, offset) of the transactional records whose transaction was aborted."""
    open_: dict[tuple[int, int], list[tuple[int, int]]] = {}
    aborted = set()
    for r in records:
        producer = (r["partition"], r["producer_id"])
        if r["is_control"]:
            if r["control_type"] == "ABORT":
                aborted.update(open_.get(producer, []))
            open_.pop(producer, None)
        elif r["is_transactional"]:
            open_.setdefault(producer, []).append((r["partition"], r["offset"]))
    return aborted


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
                 str(real.parquet_dump), "--input-format", "parquet", "--output", str(output)]) == 0
    assert differences(kafka_view(real.capture), job_view(output, real.names, spark)) == []
    findings = spark.read.parquet(str(output / "findings")).collect()
    assert [(f["rule"], f["group_id"]) for f in findings if f["severity"] in ("warning", "error")] == []


@pytest.mark.spark
def test_check_passes_on_the_log_dir_and_its_tables_equal_the_replay(real, spark):
    """``offsets-audit check --fail-on warning`` over the broker's log dir (every segment, up to the broker's
    stop) passes, and its tables equal the pure replay of the same segments, and Kafka's description when the
    log ends where the tools saw it end."""
    from offsets_audit.cli import main
    from offsets_audit.replay import replay_records

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
