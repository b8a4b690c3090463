"""The differential checks of a Kafka-made history against the project (pure core; the Spark side is in the tests).

For one history written by the oracle (``oracle.write_histories``) and loaded back by Kafka's own loader
(``oracle.replay_folder(..., epochs=True)``), ``differences`` lists everything the project gets wrong, as lines a
person can read (empty = none):

* ``replay``: our replay of the segment against Kafka's state after loading it: every group's describe
  (consumer, share, streams, classic), the committed offsets (OffsetFetch), ListGroups, and the loaded
  coordinator's view of every group after every batch (epochs, states, members);
* ``finding``: any finding the audit reports (Kafka breaks none of its own rules; the audit is given the broker's
  and the groups' real configs and the Kafka version), except a ``rebalance_storm`` whose bumps are mostly
  ``assignor_changed``: members preferring different server assignors in equal numbers make Kafka bump the epoch on
  their heartbeats, and Kafka's own rebalance metric counts every one, so that storm is real (``storm_is_kafkas``);
* ``rerun``: a re-run of a recorded target assignment at medium confidence or above that differs from the record;
* ``cause``: a group-epoch bump whose cause is ``unknown``.
"""
from __future__ import annotations

import json
from typing import Any, Iterable

from offsets_audit.assignors.rerun import audit_group as rerun_group
from offsets_audit.assignors.topic_metadata import TopicMetadata, parse_topics
from offsets_audit.audit import audit_events
from offsets_audit.audit.rules.assignor import CONFIDENCE_RANK
from offsets_audit.config import load_settings
from offsets_audit.group_configs import assignor_choice
from offsets_audit.replay import Replayer
from replay_support import (
    batches,
    committed_view,
    describe_classic,
    describe_consumer,
    describe_share,
    describe_streams,
    epochs_view,
    golden_classic,
    golden_committed,
    golden_consumer,
    golden_share,
    golden_streams,
    list_groups_view,
    normalise_epochs,
)


def diff(ours: Any, kafka: Any, path: str = "") -> list[str]:
    """Where two JSON-like values differ: ``path: ours X, Kafka's Y`` lines (at most a few)."""
    if isinstance(ours, dict) and isinstance(kafka, dict):
        out: list[str] = []
        for key in sorted(set(ours) | set(kafka), key=str):
            if key not in ours:
                out.append(f"{path}/{key}: missing in ours, Kafka's {kafka[key]!r}")
            elif key not in kafka:
                out.append(f"{path}/{key}: ours {ours[key]!r}, missing in Kafka's")
            else:
                out += diff(ours[key], kafka[key], f"{path}/{key}")
        return out[:6]
    if isinstance(ours, list) and isinstance(kafka, list) and len(ours) == len(kafka) and ours != kafka:
        out = []
        for i, (a, b) in enumerate(zip(ours, kafka)):
            out += diff(a, b, f"{path}[{i}]")
        return out[:6]
    if ours != kafka:
        return [f"{path}: ours {ours!r}, Kafka's {kafka!r}"]
    return []


def kafka_line(version: str) -> str:
    """``4.4.0`` → ``4.4``: the release line the audit's version-dependent rules take."""
    return ".".join(version.split(".")[:2])


def audit_config(scenario: dict[str, Any], kafka_version: str):
    """The audit's settings for a history: its Kafka version and the real broker and group configs it ran with."""
    return load_settings().replace(broker={
        "kafka_version": kafka_line(kafka_version),
        "group_configs": {"complete": True, "broker": dict(scenario.get("broker") or {}),
                          "groups": {g: dict(c) for g, c in (scenario.get("group_configs") or {}).items()}}})


def topic_snapshot(state: dict[str, Any]) -> TopicMetadata:
    return TopicMetadata(parse_topics({"topics": state["topics"]}))


def _plain(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def _epochs(view: dict) -> dict:
    view = normalise_epochs({k: v for k, v in view.items() if k not in ("member_table_order", "member_table_capacity")})
    if view.get("assignment_timestamp", 0) is None:
        view = {k: v for k, v in view.items() if k != "assignment_timestamp"}
    return json.loads(json.dumps(view, default=str))


def replay_differences(records: list[dict], loaded: dict[str, Any]) -> list[str]:
    """Our replay against the state of a coordinator that loaded the same log (and its view after every batch)."""
    out: list[str] = []
    replayer = Replayer()
    timeline = iter(loaded.get("epochs") or [])
    for batch in batches(records):
        for record in batch:
            replayer.apply(record)
        if batch[0]["is_control"] or not loaded.get("epochs"):
            continue
        line = next(timeline, None)
        if line is None or line["batch_base_offset"] != batch[0]["batch_base_offset"]:
            out.append(f"replay: batch at offset {batch[0]['batch_base_offset']} has no line in Kafka's timeline")
            break
        for expected in line["groups"]:
            fold = replayer.result.groups.get(expected["group_id"])
            got = epochs_view(fold) if fold is not None else {"group_id": expected["group_id"], "exists": False}
            if expected.get("assignment_timestamp", 0) is None:
                got.pop("assignment_timestamp", None)
            if _epochs(got) != _epochs(expected):
                out.append(f"replay: after batch {line['batch_base_offset']} group {expected['group_id']}: "
                           + "; ".join(diff(_epochs(got), _epochs(expected))))
    result = replayer.result
    anomalies = [e for e in result.events if e["event"] == "replay_anomaly"]
    for e in anomalies[:5]:
        out.append(f"replay: anomaly at {e.get('partition')}:{e.get('offset')}: {e['details']}")
    checks = (("consumer_group_describe", describe_consumer, golden_consumer),
              ("share_group_describe", describe_share, golden_share),
              ("streams_group_describe", describe_streams, golden_streams))
    for key, ours, theirs in checks:
        for described in loaded.get(key, []):
            fold = result.groups.get(described["groupId"])
            if fold is None or fold.group is None:
                out.append(f"replay: {key} {described['groupId']} missing from our replay")
                continue
            a, b = ours(fold), theirs(described)
            if a != b:
                out.append(f"replay: {key} {described['groupId']}: " + "; ".join(diff(_plain(a), _plain(b))))
    for described in loaded.get("classic_group_describe", []):
        fold = result.groups.get(described["groupId"])
        if fold is None or fold.group is None:
            out.append(f"replay: classic group {described['groupId']} missing from our replay")
            continue
        a, b = describe_classic(fold, True), golden_classic(described, True)
        if a != b:
            out.append(f"replay: classic_group_describe {described['groupId']}: " + "; ".join(diff(_plain(a), _plain(b))))
    expected = golden_committed(loaded["committed_offsets"])
    got = committed_view(result.offsets, expected)
    if got != expected:
        out.append("replay: committed offsets: " + "; ".join(diff({g: {str(k): v for k, v in o.items()} for g, o in got.items()},
                                                                   {g: {str(k): v for k, v in o.items()} for g, o in expected.items()})))
    expected_groups = sorted(loaded["list_groups"], key=lambda r: r["groupId"])
    got_groups = json.loads(json.dumps(list_groups_view(result), default=str))
    if got_groups != expected_groups:
        out.append(f"replay: ListGroups: ours {got_groups} Kafka's {expected_groups}")
    return out


def audit_rows(result, scenario: dict[str, Any], state: dict[str, Any], kafka_version: str):
    """The pure audit of a replayed history: ``(findings, rebalances, assignor re-run rows)``, the audit given the
    history's Kafka version, broker and group configs and its topic snapshot."""
    config = audit_config(scenario, kafka_version)
    findings, rebalances = audit_events(result.events, config)
    choice = assignor_choice(config.broker)
    snapshot = topic_snapshot(state)
    reruns = []
    for fold in result.groups.values():
        rows = fold.target_assignment_rows()
        if rows:
            reruns += rerun_group(rows, snapshot, default_consumer_assignor=choice["consumer"] or "uniform",
                                  streams_assignors=choice["streams"])
    return findings, rebalances, reruns


def storm_is_kafkas(rule: str, details: Any) -> bool:
    """A ``rebalance_storm`` that Kafka itself makes: its bumps mostly ``assignor_changed`` and blamed on members
    (``details``: the finding's details, a dict or the findings table's JSON)."""
    details = (json.loads(details) if isinstance(details, str) else details) or {}
    causes = details.get("dominant_causes") or [{}]
    return (rule == "rebalance_storm" and causes[0].get("cause") == "assignor_changed"
            and bool(details.get("top_culprits")))


def audit_differences(result, scenario: dict[str, Any], state: dict[str, Any], kafka_version: str,
                      min_confidence: str = "medium") -> list[str]:
    """Findings, mismatching trusted re-runs and ``unknown`` causes on a Kafka-made history (all should be none)."""
    out: list[str] = []
    findings, rebalances, reruns = audit_rows(result, scenario, state, kafka_version)
    for f in findings:
        if storm_is_kafkas(f.rule, f.details):
            continue
        out.append(f"finding: {f.rule} ({f.severity}) group {f.group_id}: {f.message}")
    for r in rebalances:
        if "unknown" in (r.get("causes") or ["unknown"]):
            out.append(f"cause: group {r['group_id']} epoch {r.get('group_epoch')} has cause unknown "
                       f"(causes {r.get('causes')})")
    floor = CONFIDENCE_RANK[min_confidence]
    for row in reruns:
        if row["kind"] != "rerun" or row.get("error") or row.get("match") in (True, None):
            continue
        if CONFIDENCE_RANK.get(str(row.get("confidence")), 0) >= floor:
            out.append(f"rerun: {row['group_id']} epoch {row['assignment_epoch']} {row['assignor']} "
                       f"({row['confidence']}, order {row.get('current_order')}) differs from the record")
    return out


def summarize(differences: Iterable[str]) -> dict[str, int]:
    """Differences counted by kind (the word before the first colon)."""
    counts: dict[str, int] = {}
    for line in differences:
        kind = line.split(":", 1)[0]
        counts[kind] = counts.get(kind, 0) + 1
    return counts
