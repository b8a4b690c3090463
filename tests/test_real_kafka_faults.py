"""Faults a real cluster makes: the broker killed (-9) in the middle of the scenarios and restarted while the
groups carry on, and a copy of its log dir that ends inside a batch.

The scenarios' clients ride out the restart (they reconnect, rejoin, commit again); once they hold their
groups, Kafka's tools describe them. Then the judges: the replay of the log equals that description (the
restart wrote nothing the replay misreads), the audit raises nothing at warning or above (a broker restart is
not a fault of the groups), and a copy cut inside its last batch reads with that batch quarantined and its
records counted as lost, never dropped silently, and still audits clean.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from kafka_broker import DEFAULT_KAFKA_VERSION, KafkaBroker, require_jars
from real_kafka import (
    ScenarioRun, capture, differences, kafka_view, records_below, replay_view, segment_records, topic_names,
)

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

#: Scenarios that keep writing for a while (rebalances, commits, a crash past the session timeout, transactions)
#: so the broker dies while they are under way.
SCENARIOS = ("classic_eager", "consumer_uniform", "consumer_range", "transactions")


def _kill_when_busy(broker: KafkaBroker, records: int, timeout_s: float = 120.0) -> dict[int, int]:
    """kill -9 the broker once ``__consumer_offsets`` holds ``records`` records (the scenarios are mid-way)."""
    deadline = time.monotonic() + timeout_s
    ends: dict[int, int] = {}
    while time.monotonic() < deadline:
        try:
            ends = broker.end_offsets()
        except Exception:  # noqa: BLE001 - the topic is created by the first group's coordinator lookup
            ends = {}
        if sum(ends.values()) >= records:
            break
        time.sleep(0.2)
    broker.kill()
    return ends


@pytest.fixture(scope="module")
def restarted(tmp_path_factory):
    """A broker killed -9 mid-scenario and restarted; the tools' description of the held groups; the log dir."""
    require_jars(DEFAULT_KAFKA_VERSION)
    folder = tmp_path_factory.mktemp("real-kafka-faults")
    broker = KafkaBroker(folder / "broker", DEFAULT_KAFKA_VERSION)
    driver = None
    try:
        broker.start()
        driver = ScenarioRun(broker, folder / "scenarios", "rf", SCENARIOS)
        at_kill = _kill_when_busy(broker, records=40)
        time.sleep(1.0)
        broker.start()
        report = driver.wait_ready()
        described = capture(broker)
        broker.stop()
        driver.kill()
    finally:
        if driver is not None:
            driver.kill()
        broker.kill()
    return {"broker": broker, "folder": folder, "report": report, "capture": described, "at_kill": at_kill,
            "names": topic_names(described.outputs["topics"])}


def test_the_groups_carry_on_through_the_restart(restarted):
    assert restarted["broker"].starts == 2
    assert sum(restarted["at_kill"].values()) >= 40
    assert {name: s["status"] for name, s in restarted["report"].items()} == {name: "ok" for name in SCENARIOS}


def test_replay_after_the_restart_equals_what_kafka_describes(restarted):
    from offsets_audit.replay import replay_records

    quarantine: list = []
    records = segment_records(restarted["broker"].log_dir, quarantine)
    assert quarantine == []
    below = records_below(records, restarted["capture"].end_offsets)
    assert differences(kafka_view(restarted["capture"]),
                       replay_view(replay_records(below), restarted["names"])) == []


def test_the_restart_audits_without_a_finding(restarted):
    from offsets_audit.audit import audit_events
    from offsets_audit.config import load_settings
    from offsets_audit.replay import replay_records

    findings, _ = audit_events(replay_records(segment_records(restarted["broker"].log_dir)).events, load_settings())
    assert [(f.rule, f.group_id, f.message) for f in findings if f.severity in ("warning", "error")] == []


def _cut_inside_last_batch(log_dir: Path, dest: Path) -> tuple[Path, int]:
    """A copy of ``__consumer_offsets`` whose busiest partition ends half-way through its last batch, as a copy
    taken while the broker appends can; returns the cut file and the records of that batch."""
    from offsets_audit.sources.segments import iter_batches

    shutil.copytree(log_dir, dest, ignore=shutil.ignore_patterns("__cluster_metadata*", "*-checkpoint"))
    partitions = sorted(dest.glob("__consumer_offsets-*"),
                        key=lambda folder: sum(p.stat().st_size for p in folder.glob("*.log")))
    # the partition's last segment holding a batch (a segment rolled just before the stop may be empty)
    segment = [p for p in sorted(partitions[-1].glob("*.log")) if p.stat().st_size][-1]
    last = list(iter_batches(segment))[-1]
    with open(segment, "r+b") as handle:
        handle.truncate(last.position + last.size // 2)
    return segment, last.last_offset - last.base_offset + 1


def test_a_copy_cut_inside_its_last_batch_quarantines_it_and_counts_the_loss(restarted, tmp_path):
    """The cut batch becomes one quarantine entry naming the file and how many records it cost; everything
    before it is read and audits clean."""
    from offsets_audit.audit import audit_events
    from offsets_audit.config import load_settings
    from offsets_audit.replay import replay_records

    segment, lost = _cut_inside_last_batch(restarted["broker"].log_dir, tmp_path / "copy")
    quarantine: list = []
    records = segment_records(tmp_path / "copy", quarantine)
    assert [(q["error_code"], Path(q["file"]).name, q["records_lost"]) for q in quarantine] == [
        ("truncated_batch", segment.name, lost)]
    whole = segment_records(restarted["broker"].log_dir)
    assert len(records) + lost == len(whole)
    findings, _ = audit_events(replay_records(records).events, load_settings())
    assert [(f.rule, f.group_id, f.message) for f in findings if f.severity in ("warning", "error")] == []


@pytest.mark.spark
def test_check_on_the_cut_copy_passes_and_counts_the_lost_records(restarted, tmp_path, spark):
    """``offsets-audit check`` over the cut copy: PASS (no finding at warning or above), and its summary
    counts the unreadable batch (a quarantine row) and the records it cost."""
    import json

    from offsets_audit.cli import main

    segment, lost = _cut_inside_last_batch(restarted["broker"].log_dir, tmp_path / "copy")
    summary = tmp_path / "summary.json"
    assert main(["check", "--input", str(tmp_path / "copy"), "--input-format", "segments",
                 "--output", str(tmp_path / "out"), "--fail-on", "warning", "--json-summary", str(summary)]) == 0
    records = json.loads(summary.read_text())["records"]
    assert (records["unreadable"], records["records_lost"], records["by_error_code"]) == (1, lost, {"truncated_batch": 1})
