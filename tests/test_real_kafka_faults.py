"""Faults a real cluster makes: the broker killed (-9) in the middle of the scenarios and restarted while the
groups carry on, and a copy of its log that ends inside a batch.

The session's run of the scenarios (``real_kafka.real_kafka_run``) kills its broker once the scenarios have
written a few dozen records and starts it again; the scenarios' clients ride out the restart (they reconnect,
rejoin, commit again) and, once they hold their groups, Kafka's tools describe them. ``test_real_kafka`` judges
that run's log against the tools (decode, replay, the pure audit: the restart wrote nothing the replay misreads
and nothing the audit calls a fault). Here: the restart happened mid-way and every scenario carried on; a copy
cut inside its last batch reads with that batch quarantined and its records counted as lost, never dropped
silently, and still audits clean; and ``offsets-audit check`` over that cut copy (the default suite's one Spark
job over a real broker's log) passes, counts the loss, and writes the tables the pure replay of the same copy
gives, equal to Kafka's description for every group the cut left whole.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from real_kafka import (
    KILL_AFTER_RECORDS, audit_config, differences, job_view, kafka_view, records_below, replay_view, segment_records,
)

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def test_the_groups_carry_on_through_the_restart(real_kafka_run):
    restart = real_kafka_run.restart
    assert restart is not None and restart["starts_after"] == restart["starts_before"] + 1
    assert restart["records_at_kill"] >= restart["records_before"] + KILL_AFTER_RECORDS
    outcome = {name: (s["status"], s["error"]) for name, s in real_kafka_run.scenarios.items()}
    assert outcome == {name: ("ok", None) for name in real_kafka_run.expected}


def _cut_inside_last_batch(log_dir: Path, dest: Path) -> tuple[Path, int]:
    """A copy of ``__consumer_offsets`` whose busiest partition ends half-way through its last batch, as a copy
    taken while the broker appends can; returns the cut file and the records of that batch."""
    from offsets_audit.sources.segments import iter_batches

    shutil.copytree(log_dir, dest)
    partitions = sorted(dest.glob("__consumer_offsets-*"),
                        key=lambda folder: sum(p.stat().st_size for p in folder.glob("*.log")))
    # the partition's last segment holding a batch (a segment rolled just before the copy may be empty)
    segment = [p for p in sorted(partitions[-1].glob("*.log")) if p.stat().st_size][-1]
    last = list(iter_batches(segment))[-1]
    with open(segment, "r+b") as handle:
        handle.truncate(last.position + last.size // 2)
    return segment, last.last_offset - last.base_offset + 1


@pytest.fixture(scope="module")
def cut(real_kafka_run, tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("cut-copy")
    segment, lost = _cut_inside_last_batch(real_kafka_run.log_dir, folder / "copy")
    return {"folder": folder, "copy": folder / "copy", "segment": segment, "lost": lost,
            "partition": int(segment.parent.name.rsplit("-", 1)[1])}


def test_a_copy_cut_inside_its_last_batch_quarantines_it_and_counts_the_loss(real_kafka_run, cut):
    """The cut batch becomes one quarantine entry naming the file and how many records it cost; everything
    before it is read and audits clean."""
    from offsets_audit.audit import audit_events
    from offsets_audit.config import load_settings
    from offsets_audit.replay import replay_records

    quarantine: list = []
    records = segment_records(cut["copy"], quarantine)
    assert [(q["error_code"], Path(q["file"]).name, q["records_lost"]) for q in quarantine] == [
        ("truncated_batch", cut["segment"].name, cut["lost"])]
    assert len(records) + cut["lost"] == len(segment_records(real_kafka_run.log_dir))
    findings, _ = audit_events(replay_records(records).events, load_settings())
    assert [(f.rule, f.group_id, f.message) for f in findings if f.severity in ("warning", "error")] == []


@pytest.mark.spark
def test_check_on_the_cut_copy_passes_counts_the_loss_and_equals_kafka(real_kafka_run, cut, spark):
    """``offsets-audit check --fail-on warning`` over the cut copy: PASS (no finding at warning or above); its
    summary counts the unreadable batch (a quarantine row) and the records it cost; its tables equal the pure
    replay of the same copy, and Kafka's description for the groups of the partitions the cut left whole."""
    import json

    from offsets_audit.cli import main
    from offsets_audit.replay import replay_records

    run = real_kafka_run
    summary = cut["folder"] / "summary.json"
    output = cut["folder"] / "out"
    assert main(["check", "--config", str(audit_config(cut["folder"], run.broker.version)), "--input",
                 str(cut["copy"]), "--input-format", "segments", "--output", str(output), "--fail-on", "warning",
                 "--json-summary", str(summary)]) == 0
    records = json.loads(summary.read_text())["records"]
    assert (records["unreadable"], records["records_lost"], records["by_error_code"]) == (
        1, cut["lost"], {"truncated_batch": 1})
    tables = job_view(output, run.names, spark)
    copied = segment_records(cut["copy"])
    assert differences(replay_view(replay_records(copied), run.names), tables) == []
    whole = segment_records(run.log_dir)
    ends = {}
    for r in whole:
        ends[r["partition"]] = r["offset"] + 1
    in_cut = _groups_of(r for r in whole if r["partition"] == cut["partition"])
    described = kafka_view(run.capture)
    groups = [g for g in described["groups"] if g not in in_cut]
    assert in_cut and groups
    if {p: o for p, o in ends.items() if p != cut["partition"]} == {
            p: o for p, o in run.capture.end_offsets.items() if p != cut["partition"]}:
        below = records_below(copied, run.capture.end_offsets)
        assert differences(described, replay_view(replay_records(below), run.names), groups) == []
        assert differences(described, tables, groups) == []


def _groups_of(records) -> set[str]:
    """The groups whose records are among ``records`` (a group lives in one ``__consumer_offsets`` partition)."""
    from offsets_audit.codec.records import decode_record

    groups = set()
    for r in records:
        if not r["is_control"]:
            key = decode_record(r["key"], r["value"]).key
            groups.add(key.get("group", key.get("groupId")))
    return groups - {None}
