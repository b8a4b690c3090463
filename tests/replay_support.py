"""Helpers for the replay tests: golden history loading and Kafka-describe style views of our state."""
from __future__ import annotations

import base64
import contextlib
import json
from pathlib import Path

from golden_files import GOLDEN, open_golden

HISTORIES = GOLDEN / "histories"


def load_expected(path: Path) -> list[dict]:
    """Records of a golden ``*.expected.jsonl`` (or ``.xz``) with key/value decoded to bytes."""
    records = []
    with open_golden(path) as fh:
        for line in fh:
            row = json.loads(line)
            row["key"] = None if row.get("key_b64") is None else base64.b64decode(row["key_b64"])
            row["value"] = None if row.get("value_b64") is None else base64.b64decode(row["value_b64"])
            records.append(row)
    return records


def source_df(spark, records: list[dict]):
    """``records`` (``load_expected`` / ``read_segment`` dicts) as a DataFrame in Spark's Kafka-source layout, what
    the codec's Spark edge reads."""
    import datetime as dt

    from pyspark.sql.types import (BinaryType, BooleanType, IntegerType, LongType, StringType, StructField,
                                   StructType, TimestampType)

    schema = StructType([
        StructField("key", BinaryType()), StructField("value", BinaryType()), StructField("topic", StringType()),
        StructField("partition", IntegerType()), StructField("offset", LongType()),
        StructField("timestamp", TimestampType()), StructField("producer_id", LongType()),
        StructField("is_control", BooleanType()), StructField("control_type", StringType()),
    ])
    rows = [(r["key"], r["value"], "__consumer_offsets", r["partition"], r["offset"],
             dt.datetime.fromtimestamp(r["timestamp"] / 1000, tz=dt.timezone.utc), r["producer_id"],
             r["is_control"], r["control_type"]) for r in records]
    return spark.createDataFrame(rows, schema)


@contextlib.contextmanager
def planned_as_a_small_log(spark, records: int):
    """What is planned and run inside, planned as the job plans it after reading ``records`` records on a local
    session (``plans.plain_execution_for_a_small_log``); the session's setting given back after."""
    from offsets_audit.plans import plain_execution_for_a_small_log

    restore = plain_execution_for_a_small_log(spark, records, {})
    try:
        yield
    finally:
        if restore is not None:
            restore()


def audited_golden_log(spark, folder: Path, name: str, settings):
    """The audit's tables (``audit.spark.AuditTables``) of the golden history ``name``'s log segment, read from a
    copy under ``folder`` as the job reads a log dir: segments -> codec -> replay -> audit, local Spark."""
    import shutil

    from offsets_audit.audit import spark as audit_spark
    from offsets_audit.codec import spark as codec_spark
    from offsets_audit.replay import spark as replay_spark
    from offsets_audit.sources import read

    root = folder / "__consumer_offsets-0"
    root.mkdir(parents=True)
    shutil.copy(HISTORIES / f"{name}-00000000000000000000.log", root / "00000000000000000000.log")
    decoded, _ = codec_spark.split(codec_spark.decode(read(spark, {"kind": "segments", "path": str(folder)})))
    return audit_spark.audit(replay_spark.replay(decoded), None, settings, decoded=decoded)


def batches(records: list[dict]) -> list[list[dict]]:
    """Records grouped by batch (``batch_base_offset``), in log order."""
    out: list[list[dict]] = []
    for r in records:
        if out and out[-1][0]["batch_base_offset"] == r["batch_base_offset"]:
            out[-1].append(r)
        else:
            out.append([r])
    return out


def epochs_view(fold) -> dict:
    """Our state of one group in the layout of the golden ``*.epochs.jsonl`` lines."""
    g = fold.group
    if g is None:
        return {"group_id": fold.group_id, "exists": False}
    if g.group_type == "classic":
        return {"group_id": fold.group_id, "exists": True, "type": "classic", "state": g.state,
                "generation": g.generation, "protocol": g.protocol, "leader": g.leader,
                "members": [m["member_id"] for m in g.members]}
    view = {"group_id": fold.group_id, "exists": True, "type": g.group_type, "state": g.state,
            "group_epoch": g.group_epoch, "assignment_epoch": g.assignment_epoch,
            "assignment_timestamp": g.assignment_timestamp}
    if g.group_type == "streams":
        view["topology_epoch"] = None if g.topology is None else g.topology.get("epoch")
    members = []
    for m in g.members.values():
        mv = {"member_id": m.member_id, "member_epoch": m.member_epoch, "state": m.state}
        if g.group_type == "streams":
            mv["process_id"] = m.process_id
        else:
            mv["instance_id"] = m.instance_id
            mv["classic_protocol"] = m.uses_classic_protocol
        members.append(mv)
    view["members"] = members
    return view


def normalise_epochs(view: dict) -> dict:
    """Member order is a Java hash-map order in the golden lines; compare members by id."""
    view = dict(view)
    if "members" in view:
        if view["members"] and isinstance(view["members"][0], dict):
            view["members"] = sorted(view["members"], key=lambda m: m["member_id"])
        else:
            view["members"] = sorted(view["members"])
    return view


def _topic_partitions(assignment: dict | None) -> dict:
    return {t: sorted(p) if isinstance(p, list) else sorted(int(x) for x in p) for t, p in (assignment or {}).items()}


def _tasks(tasks: dict | None) -> dict:
    return {s: sorted(int(x) for x in p) for s, p in (tasks or {}).items() if p}


def _union(*assignments: dict) -> dict:
    out: dict = {}
    for a in assignments:
        for t, p in a.items():
            out.setdefault(t, set()).update(int(x) for x in p)
    return {t: sorted(p) for t, p in out.items() if p}


def describe_consumer(fold) -> dict:
    """Our consumer group in the shape of the golden ConsumerGroupDescribe (fields the log determines)."""
    g = fold.group
    members = {}
    for m in g.members.values():
        members[m.member_id] = {
            "instanceId": m.instance_id, "rackId": m.rack_id, "memberEpoch": m.member_epoch,
            "clientId": m.client_id, "clientHost": m.client_host,
            "subscribedTopicNames": sorted(m.subscribed_topic_names),
            "subscribedTopicRegex": m.subscribed_topic_regex,
            # ConsumerGroupDescribe reports assigned partitions plus those pending revocation.
            "assignment": _topic_partitions(_union(m.assigned_partitions, m.partitions_pending_revocation)),
            "targetAssignment": _topic_partitions(g.target_assignment.get(m.member_id)),
            "memberType": 0 if m.uses_classic_protocol else 1,
        }
    return {"groupId": g.group_id, "groupState": g.state, "groupEpoch": g.group_epoch,
            "assignmentEpoch": g.assignment_epoch, "members": members}


def golden_consumer(described: dict) -> dict:
    def tps(a):
        return {tp["topicId"]: sorted(tp["partitions"]) for tp in (a or {}).get("topicPartitions", []) if tp["partitions"]}
    members = {}
    for m in described["members"]:
        members[m["memberId"]] = {
            "instanceId": m["instanceId"], "rackId": m["rackId"], "memberEpoch": m["memberEpoch"],
            "clientId": m["clientId"], "clientHost": m["clientHost"],
            "subscribedTopicNames": sorted(m["subscribedTopicNames"]),
            "subscribedTopicRegex": m["subscribedTopicRegex"],
            "assignment": tps(m["assignment"]), "targetAssignment": tps(m["targetAssignment"]),
            "memberType": m["memberType"],
        }
    return {"groupId": described["groupId"], "groupState": described["groupState"],
            "groupEpoch": described["groupEpoch"], "assignmentEpoch": described["assignmentEpoch"], "members": members}


def describe_share(fold) -> dict:
    g = fold.group
    return {"groupId": g.group_id, "groupState": g.state, "groupEpoch": g.group_epoch,
            "assignmentEpoch": g.assignment_epoch,
            "members": {m.member_id: {
                "rackId": m.rack_id, "memberEpoch": m.member_epoch, "clientId": m.client_id,
                "clientHost": m.client_host, "subscribedTopicNames": sorted(m.subscribed_topic_names),
                "assignment": {t: p for t, p in _topic_partitions(m.assigned_partitions).items() if p}}
                for m in g.members.values()}}


def golden_share(described: dict) -> dict:
    return {"groupId": described["groupId"], "groupState": described["groupState"],
            "groupEpoch": described["groupEpoch"], "assignmentEpoch": described["assignmentEpoch"],
            "members": {m["memberId"]: {
                "rackId": m["rackId"], "memberEpoch": m["memberEpoch"], "clientId": m["clientId"],
                "clientHost": m["clientHost"], "subscribedTopicNames": sorted(m["subscribedTopicNames"]),
                "assignment": {tp["topicId"]: sorted(tp["partitions"])
                               for tp in m["assignment"]["topicPartitions"] if tp["partitions"]}}
                for m in described["members"]}}


def describe_streams(fold) -> dict:
    g = fold.group
    members = {}
    for m in g.members.values():
        target = g.target_assignment.get(m.member_id) or {}
        members[m.member_id] = {
            "memberEpoch": m.member_epoch, "instanceId": m.instance_id, "rackId": m.rack_id,
            "clientId": m.client_id, "clientHost": m.client_host, "topologyEpoch": m.topology_epoch,
            "processId": m.process_id, "userEndpoint": m.user_endpoint,
            "clientTags": dict(sorted(m.client_tags.items())),
            "assignment": {k: _tasks(m.assigned_tasks[k]) for k in ("active", "standby", "warmup")},
            "targetAssignment": {k: _tasks(target.get(k)) for k in ("active", "standby", "warmup")},
        }
    topology = None
    if g.topology is not None:
        topology = {"epoch": g.topology["epoch"], "subtopologies": sorted(
            (s["subtopologyId"], sorted(s.get("sourceTopics") or []), sorted(s.get("repartitionSinkTopics") or []),
             sorted(t["name"] for t in s.get("stateChangelogTopics") or []),
             sorted(t["name"] for t in s.get("repartitionSourceTopics") or []))
            for s in g.topology["subtopologies"])}
    return {"groupId": g.group_id, "groupState": g.state, "groupEpoch": g.group_epoch,
            "assignmentEpoch": g.assignment_epoch, "topology": topology, "members": members}


def golden_streams(described: dict) -> dict:
    def tasks(a):
        return {kind: {t["subtopologyId"]: sorted(t["partitions"]) for t in a[kind + "Tasks"] if t["partitions"]}
                for kind in ("active", "standby", "warmup")}
    topo = described.get("topology")
    topology = None if topo is None else {"epoch": topo["epoch"], "subtopologies": sorted(
        (s["subtopologyId"], sorted(s["sourceTopics"]), sorted(s["repartitionSinkTopics"]),
         sorted(t["name"] for t in s["stateChangelogTopics"]), sorted(t["name"] for t in s["repartitionSourceTopics"]))
        for s in topo["subtopologies"])}
    return {"groupId": described["groupId"], "groupState": described["groupState"],
            "groupEpoch": described["groupEpoch"], "assignmentEpoch": described["assignmentEpoch"],
            "topology": topology,
            "members": {m["memberId"]: {
                "memberEpoch": m["memberEpoch"], "instanceId": m["instanceId"], "rackId": m["rackId"],
                "clientId": m["clientId"], "clientHost": m["clientHost"], "topologyEpoch": m["topologyEpoch"],
                "processId": m["processId"], "userEndpoint": m["userEndpoint"],
                "clientTags": {t["key"]: t["value"] for t in sorted(m["clientTags"], key=lambda t: t["key"])},
                "assignment": tasks(m["assignment"]), "targetAssignment": tasks(m["targetAssignment"])}
                for m in described["members"]}}


def describe_classic(fold, with_bytes: bool) -> dict:
    g = fold.group
    members = []
    for m in g.members:
        row = {"memberId": m["member_id"], "groupInstanceId": m["instance_id"], "clientId": m["client_id"],
               "clientHost": m["client_host"]}
        if with_bytes:
            row["memberMetadata"] = base64.b64encode(m["subscription"] or b"").decode()
            row["memberAssignment"] = base64.b64encode(m["assignment"] or b"").decode()
        members.append(row)
    return {"groupId": g.group_id, "groupState": g.state, "protocolType": g.protocol_type or "",
            "protocolData": g.protocol or "", "members": sorted(members, key=lambda m: m["memberId"])}


def golden_classic(described: dict, with_bytes: bool) -> dict:
    keys = ["memberId", "groupInstanceId", "clientId", "clientHost"]
    if with_bytes:
        keys += ["memberMetadata", "memberAssignment"]
    return {"groupId": described["groupId"], "groupState": described["groupState"],
            "protocolType": described["protocolType"], "protocolData": described["protocolData"],
            "members": sorted(({k: m[k] for k in keys} for m in described["members"]), key=lambda m: m["memberId"])}


def committed_view(offsets, group_ids) -> dict:
    out = {g: {} for g in group_ids}
    for (g, t, p), c in offsets.committed.items():
        if g in out:
            out[g][(t, p)] = (c["committed_offset"], c["committed_leader_epoch"], c["metadata"])
    return out


def golden_committed(committed: list[dict]) -> dict:
    return {g["groupId"]: {(t["name"], p["partitionIndex"]): (p["committedOffset"], p["committedLeaderEpoch"], p["metadata"])
                           for t in g["topics"] for p in t["partitions"]} for g in committed}


PROTOCOL_TYPE = {"consumer": "consumer", "share": "share", "streams": "streams"}


def list_groups_view(result) -> list[dict]:
    rows = []
    for fold in result.groups.values():
        g = fold.group
        if g is None:
            continue
        protocol_type = (g.protocol_type or "") if g.group_type == "classic" else PROTOCOL_TYPE[g.group_type]
        rows.append({"groupId": g.group_id, "protocolType": protocol_type, "groupState": g.state,
                     "groupType": g.group_type})
    return sorted(rows, key=lambda r: r["groupId"])
