"""Helpers for the replay tests: golden history loading and Kafka-describe style views of our state."""
from __future__ import annotations

import base64
import json
import lzma
from pathlib import Path
from types import SimpleNamespace

GOLDEN = Path("/work/shared/golden")
HISTORIES = GOLDEN / "histories"


def load_expected(path: Path) -> list[dict]:
    """Records of a golden ``*.expected.jsonl`` (or ``.xz``) with key/value decoded to bytes."""
    opener = lzma.open if path.suffix == ".xz" else open
    records = []
    with opener(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            row["key"] = None if row.get("key_b64") is None else base64.b64decode(row["key_b64"])
            row["value"] = None if row.get("value_b64") is None else base64.b64decode(row["value_b64"])
            records.append(row)
    return records


def codec_available() -> bool:
    try:
        from offsets_audit.codec import decode_record  # noqa: F401
    except ImportError:
        return False
    return True


def dump_decode(record: dict):
    """Decoded record built from kafka-dump-log's JSON (only while the codec is missing)."""
    dump_key = json.loads(record["dump_key"])
    payload = record["dump_payload"]
    value = None
    if payload is not None and payload != "<DELETE>":
        value = json.loads(payload)["data"]
        for m in value.get("members") or () if isinstance(value, dict) else ():
            for field in ("subscription", "assignment"):
                if isinstance(m.get(field), dict):
                    m[field + "_decoded"] = m[field]
                    m[field] = None
    return SimpleNamespace(record_type=int(dump_key["type"]), key=dump_key["data"], value=value)


def with_decoded(records: list[dict]) -> list[dict]:
    """Attach a ``decoded`` entry when the codec has not landed yet; otherwise leave the bytes to the codec."""
    if codec_available():
        return records
    out = []
    for r in records:
        if not r.get("is_control") and r.get("dump_key"):
            r = dict(r, decoded=dump_decode(r))
        out.append(r)
    return out


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
        mv = {"member_id": m["member_id"], "member_epoch": m["member_epoch"], "state": m["state"]}
        if g.group_type == "streams":
            mv["process_id"] = m.get("process_id")
        else:
            mv["instance_id"] = m.get("instance_id")
            mv["classic_protocol"] = m.get("classic_member_metadata") is not None
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
