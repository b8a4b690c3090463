"""No false alarms on Kafka's own histories, audited as a user would run it (no group configs, no overrides).

Per history, the findings of warning or error severity it really contains:

* ``history-assignment-batching``: ``offset_committed_backwards`` (warning): the golden driver commits some offsets
  backwards on purpose, which Kafka accepts and the rule is there to report. Its group ``batch-override-0`` runs
  with ``consumer.assignment.interval.ms=0``, a group config the log does not hold: without a snapshot that is
  one ``assignment_interval_overridden`` *info* finding, never an error.
* every other history: none.

And every assignor re-run the audit trusts (confidence ``metadata_provided`` or better: the history's topic
snapshot given) gives the recorded target.
"""
from __future__ import annotations

import collections

import pytest

from offsets_audit.assignors.rerun import audit_group as rerun_group
from offsets_audit.assignors.topic_metadata import TopicMetadata, load_topics
from offsets_audit.audit import audit_events
from offsets_audit.config import load_config
from offsets_audit.replay import replay_records
from replay_support import HISTORIES, load_expected

#: warning/error rules each golden history really contains (see the module docstring)
REAL = {
    "history-consumer-group": set(),
    "history-simple-and-txn-commits": set(),
    "history-streams-group": set(),
    "history-assignment-batching": {"offset_committed_backwards"},
    "history-many-groups": set(),
}
INFO = {"history-assignment-batching": {("assignment_interval_overridden", "batch-override-0")}}


def _parts(name: str) -> list[tuple]:
    """(records file, state file) of a history (``history-many-groups`` has one per partition)."""
    if name == "history-many-groups":
        folder = HISTORIES / name
        return [(p, folder / (p.name.split("-00000000000000000000")[0] + ".state.json"))
                for p in sorted(folder.glob("*.expected.jsonl.xz"))]
    return [(HISTORIES / f"{name}-00000000000000000000.expected.jsonl", HISTORIES / f"{name}.state.json")]


@pytest.fixture(scope="module", params=sorted(REAL))
def history(request):
    name = request.param
    records, topics = [], []
    for records_path, state_path in _parts(name):
        records.extend(load_expected(records_path))
        topics.extend(load_topics(state_path))
    return name, replay_records(records), TopicMetadata(topics)


@pytest.mark.parametrize("kafka_version", ["4.3", None])
def test_kafka_history_has_no_warning_or_error_but_what_it_really_contains(history, kafka_version):
    name, result, _ = history
    config = load_config()
    config["broker"]["kafka_version"] = kafka_version
    findings, _ = audit_events(result.events, config)
    serious = {f.rule for f in findings if f.severity in ("warning", "error")}
    assert serious == REAL[name], [(f.rule, f.group_id, f.message) for f in findings if f.rule not in REAL[name]]
    info = {(f.rule, f.group_id) for f in findings if f.severity == "info"}
    assert info == INFO.get(name, set())
    assert all("None" not in f.message for f in findings)


def test_every_trusted_rerun_of_a_kafka_history_matches(history):
    name, result, snapshot = history
    rows = [row for fold in result.groups.values() if fold.target_assignment_rows()
            for row in rerun_group(fold.target_assignment_rows(), snapshot)]
    trusted = [r for r in rows if r["kind"] == "rerun" and r["confidence"] in ("metadata_provided", "metadata_verified")]
    # classic and simple groups have nothing to re-run; streams re-runs are "inferred" (task offsets are not logged)
    if name not in ("history-simple-and-txn-commits", "history-streams-group"):
        assert trusted, name
    assert [(r["group_id"], r["assignment_epoch"], r["current_order"]) for r in trusted if not r["match"]] == []
    orders = collections.Counter(r["current_order"] for r in trusted)
    assert set(orders) <= {"chained", "record_order", "not_order_sensitive"}
