"""Losses are not cluster errors. Findings after quarantined records of their group's
partition say so (``data_gap``), their severity is capped unless ``check.trust_after_gap``, and the verdict
line counts quarantined rows and lost records; ``check.fail_on_quarantine`` fails the gate on any loss."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from offsets_audit import tables
from offsets_audit.commands.check import fails_on_losses, json_summary, junit_xml, verdict_line
from offsets_audit.audit.gaps import mark_data_gaps
from offsets_audit.config import load_settings

FINDING_COLUMNS = "id string, group_id string, group_type string, rule string, severity string, time timestamp, " \
                  "message string, evidence array<string>, details string"


def _finding(fid, group, severity, evidence):
    return (fid, group, "consumer", "member_epoch_skipped", severity, None, "epoch jumped", evidence, "{}")


@pytest.mark.spark
@pytest.mark.parametrize("trust", [False, True])
def test_findings_after_a_gap_on_their_partition_are_marked_and_capped(spark, trust):
    findings = spark.createDataFrame([
        _finding("after-unknown-gap", "g1", "error", ["3:100", "3:120"]),   # gap at 3:50, group unknown
        _finding("before-gap", "g2", "error", ["3:40"]),                    # gap comes later
        _finding("other-partition", "g3", "error", ["4:500"]),
        _finding("other-groups-gap", "g4", "error", ["5:900"]),             # the bad record is g5's
        _finding("warning-after-gap", "g1", "warning", ["3:130"]),
        _finding("no-evidence", "g1", "error", []),
    ], FINDING_COLUMNS)
    quarantined = spark.createDataFrame([
        (3, None, 50, None),        # unreadable bytes: no offset, the bad header's base offset, no group
        (3, 60, None, None),
        (5, 800, None, "g5"),       # an undecodable value of another group
    ], "partition int, offset long, batch_base_offset long, group_id string")
    marked = mark_data_gaps(findings, quarantined, trust_after_gap=trust)
    assert [f.name for f in marked.schema.fields] == tables.schema("findings").fieldNames()
    rows = {r["id"]: r for r in marked.collect()}
    assert {i for i, r in rows.items() if r["data_gap"]} == {"after-unknown-gap", "warning-after-gap"}
    assert rows["after-unknown-gap"]["data_gap_quarantined"] == 2 and rows["before-gap"]["data_gap_quarantined"] == 0
    gap = rows["after-unknown-gap"]
    assert "after a data gap: 2 quarantined record(s) on partition 3" in gap["message"]
    if trust:
        assert gap["severity"] == "error" and "capped" not in gap["message"]
    else:
        assert gap["severity"] == "warning"
        assert "severity capped from error to warning; set check.trust_after_gap: true" in gap["message"]
    assert rows["warning-after-gap"]["severity"] == "warning"
    assert {rows[i]["severity"] for i in ("before-gap", "other-partition", "other-groups-gap", "no-evidence")} \
        == {"error"}


RECORDS = {"read": 120, "decoded": 100, "quarantined": 18, "records_lost": 49}
GAP_FINDING = {"id": "a", "rule": "member_epoch_skipped", "severity": "warning", "group_id": "g", "message": "m",
               "evidence": ["3:1"], "data_gap": True}


def test_verdict_counts_quarantined_rows_and_lost_records():
    line = verdict_line([GAP_FINDING], "error", "r", RECORDS)
    assert line == ("offsets-audit check: PASS run r: 1 finding(s), none at or above 'error'; input: 18 quarantined, "
                    "49 lost; 1 finding(s) after a data gap")
    clean = verdict_line([], "error", "c", {"read": 5, "decoded": 5, "quarantined": 0})   # no records_lost key yet
    assert clean == "offsets-audit check: PASS run c: 0 finding(s), none at or above 'error'; input: 0 quarantined, 0 lost"


def test_fail_on_quarantine_fails_the_gate_on_any_loss():
    assert fails_on_losses(RECORDS, True) and not fails_on_losses(RECORDS, False)
    assert not fails_on_losses({"quarantined": 0}, True)
    line = verdict_line([], "error", "r", RECORDS, fail_on_quarantine=True)
    assert line.startswith("offsets-audit check: FAIL run r: records were lost; input: 18 quarantined, 49 lost")
    assert json_summary([], "error", "r", {"records": RECORDS}, True)["verdict"] == "fail"
    assert json_summary([], "error", "r", {"records": RECORDS}, False)["verdict"] == "pass"
    suite = ET.fromstring(junit_xml([], load_settings().rules, "error", "r", records=RECORDS,
                                    fail_on_quarantine=True)).find("testsuite")
    case = [c for c in suite.findall("testcase") if c.get("name") == "input_complete"][0]
    assert case.find("failure") is not None and suite.get("failures") == "1"


def _corrupt_a_group_batch(segments_root):
    """Flip one byte inside the middle batch of consumer-group records of the busiest partition: its CRC
    no longer matches, so the batch is quarantined and the replay of that group misses its records."""
    import struct

    from offsets_audit.sources.segments import read_segment

    best = None
    for path in sorted(segments_root.rglob("*.log")):
        partition = int(path.parent.name.rsplit("-", 1)[1])
        group_batches = sorted({r["batch_base_offset"] for r in read_segment(path, partition=partition)
                                if r["key"] and struct.unpack(">h", r["key"][:2])[0] >= 3})
        if best is None or len(group_batches) > len(best[1]):
            best = (path, group_batches)
    path, group_batches = best
    target = group_batches[len(group_batches) // 2]
    data = bytearray(path.read_bytes())
    position = 0
    while position + 12 <= len(data):
        base_offset, length = struct.unpack(">qi", data[position:position + 12])
        if base_offset == target:
            data[position + 61 + 3] ^= 0xFF            # inside the records, past the CRC'd header fields
            path.write_bytes(bytes(data))
            return path, target
        position += 12 + length
    raise AssertionError(f"batch {target} not found in {path}")


@pytest.mark.spark
@pytest.mark.slow
def test_corruption_alone_does_not_fail_the_gate_and_the_verdict_counts_it(spark, tmp_path):
    """A damaged copy of a healthy history: `check` must not FAIL with error findings right after the
    quarantined batch, and the verdict mentions the quarantine."""
    import io
    import json
    from contextlib import redirect_stdout

    import yaml

    from offsets_audit.cli import main
    from offsets_audit.simulate import simulate

    simulate(str(tmp_path / "sim"), groups=5, hours=0.5, partitions=4, seed=7, formats=("segments",))
    _corrupt_a_group_batch(tmp_path / "sim" / "segments")
    (tmp_path / "ci.yaml").write_text(yaml.safe_dump({
        "output": {"path": str(tmp_path / "out"), "html_report": False},
        "check": {"fail_on": "error", "json_summary": str(tmp_path / "check.json")}}))
    stdout = io.StringIO()
    with redirect_stdout(stdout):
        code = main(["check", "--config", str(tmp_path / "ci.yaml"), "--input", str(tmp_path / "sim" / "segments"),
                     "--input-format", "segments", "--run-id", "damaged"])
    verdict = stdout.getvalue().strip().splitlines()[-1]
    summary = json.loads((tmp_path / "check.json").read_text())
    # A batch whose CRC fails is an unreadable stretch: its records are counted lost (sources' records_lost),
    # records of batches that read but do not decode are quarantined; the verdict names both.
    assert summary["records_quarantined"] + summary["records_lost"] >= 1
    assert code == 0 and verdict.startswith("offsets-audit check: PASS run damaged:"), verdict
    assert (f"input: {summary['records_quarantined']:,} quarantined, {summary['records_lost']:,} lost"
            in verdict)
    from offsets_audit.sinks import read_table

    findings = read_table(spark, str(tmp_path / "out"), "findings", "damaged", "parquet").collect()
    assert not [f for f in findings if f["severity"] == "error"]
    # The job caches the log compacted, the display-only columns on quarantine rows alone (codec.spark.compact):
    # the damaged stretch still says where it was and why.
    quarantine = read_table(spark, str(tmp_path / "out"), "quarantine", "damaged", "parquet").collect()
    assert quarantine and all(q["source_file"] and (q["read_error_message"] or q["error_message"]) for q in quarantine)
    print(verdict, [(f["rule"], f["severity"], f["data_gap"]) for f in findings])
