"""``offsets-audit check``: verdict, JUnit XML and JSON summary; one real run over the golden batching log."""
from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET

import pytest
import yaml

from offsets_audit.commands.check import failing, junit_xml, verdict_line
from offsets_audit.audit.rules.registry import RULES
from offsets_audit.config import load_settings
from replay_support import HISTORIES

F_ERROR = {"id": "a1", "rule": "assignment_interval_violated", "severity": "error", "group_id": "g",
           "message": "too soon", "evidence": ["3:50", "3:61"]}
F_WARN = {"id": "b2", "rule": "rebalance_storm", "severity": "warning", "group_id": "h", "message": "storm",
          "evidence": ["1:7"]}


def test_fail_on_threshold():
    assert failing([F_ERROR, F_WARN], "error") == [F_ERROR]
    assert failing([F_ERROR, F_WARN], "warning") == [F_ERROR, F_WARN]
    assert failing([F_ERROR, F_WARN], "never") == []
    assert verdict_line([F_WARN], "error", "r").startswith("offsets-audit check: PASS")
    assert verdict_line([F_ERROR], "error", "r") == (
        "offsets-audit check: FAIL run r: 1 finding(s) at or above 'error' (assignment_interval_violated 1)")


def test_junit_one_testcase_per_rule_with_evidence():
    settings = load_settings(overrides={"rules": {"classic_rebalance_rate_high": {"enabled": False}}})
    root = ET.fromstring(junit_xml([F_ERROR, F_WARN], settings.rules, "error", "r"))
    suite = root.find("testsuite")
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert set(cases) == set(RULES) and suite.get("tests") == str(len(RULES))
    failure = cases["assignment_interval_violated"].find("failure")
    assert failure is not None and "3:50, 3:61" in failure.text and suite.get("failures") == "1"
    assert cases["rebalance_storm"].find("failure") is None and "storm" in cases["rebalance_storm"].find("system-out").text
    assert cases["classic_rebalance_rate_high"].find("skipped") is not None


@pytest.mark.spark
def test_check_command_fails_the_build_on_the_batching_history(spark, tmp_path, capsys):
    """With a group-configs snapshot that says batch-override-0 runs on the 1000 ms default (its override
    forgotten), its assignments break it. (Without a snapshot the interval is not known: one info finding.)"""
    from offsets_audit.cli import main
    from offsets_audit.sources import read

    logs = tmp_path / "logs" / "__consumer_offsets-0"
    logs.mkdir(parents=True)
    shutil.copy(HISTORIES / "history-assignment-batching-00000000000000000000.log", logs / "00000000000000000000.log")
    dump = tmp_path / "dump"
    read(spark, {"kind": "segments", "path": str(logs.parent)}).write.parquet(str(dump))
    ci = yaml.safe_load(open("conf/ci.yaml"))
    ci["output"] = {"path": str(tmp_path / "out"), "format": "parquet", "html_report": True}
    ci["check"] = {"fail_on": "error", "junit_xml": str(tmp_path / "junit.xml"),
                   "json_summary": str(tmp_path / "summary.json")}
    snapshot = tmp_path / "group-configs.json"
    snapshot.write_text(json.dumps({"complete": True, "broker": {"group.consumer.assignment.interval.ms": "1000"},
                                    "groups": {"batch-override-3000": {"consumer.assignment.interval.ms": "3000"}}}))
    ci["broker"] = {"group_configs": str(snapshot)}
    config_path = tmp_path / "ci.yaml"
    config_path.write_text(yaml.safe_dump(ci))

    code = main(["check", "--config", str(config_path), "--input", str(dump), "--run-id", "ci-1"])
    out = capsys.readouterr().out.strip().splitlines()
    assert code == 1
    assert out[-1].startswith("offsets-audit check: FAIL run ci-1:") and "assignment_interval_violated" in out[-1]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["verdict"] == "fail" and summary["failing_rules"] == ["assignment_interval_violated"]
    assert summary["findings_by_rule"]["assignment_interval_violated"]["error"] >= 10
    case = [c for c in ET.parse(tmp_path / "junit.xml").getroot().iter("testcase")
            if c.get("name") == "assignment_interval_violated"][0]
    assert "batch-override-0" in case.find("failure").text and "evidence __consumer_offsets partition:offset 0:" in case.find("failure").text
    report = (tmp_path / "out" / "report" / "ci-1.html").read_text()
    assert "Epoch timeline: batch-override-0" in report and report.count("<svg") >= 5
