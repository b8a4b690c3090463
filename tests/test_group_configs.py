"""Group configs as an input: the snapshot, the interval a group is judged against, the capture.

The capture runs end to end against the tests' real Kafka broker, with a group config set by Kafka's own
``kafka-configs``; the DescribeConfigs request and response are also checked byte for byte against the layout of
Kafka's message definitions (``DescribeConfigsRequest.json`` / ``DescribeConfigsResponse.json``, version 4,
flexible). The same broker, with an ACL denying DESCRIBE_CONFIGS on a few groups of the test's own, shows what a
cluster that refuses some groups' configs gives: those groups are unknown, never on the defaults, and a run says
so in one line.
"""
from __future__ import annotations

import json
import struct
import subprocess
import sys

import pytest

from offsets_audit.config import load_settings
from offsets_audit.errors import UserError
from offsets_audit.group_configs import (
    UNKNOWN_ASSIGNOR,
    assignment_interval,
    assignor_choice,
    capture_group_configs,
    configs_from_response,
    describe_configs_request,
    load_group_configs,
    parse_group_configs,
    refused_groups,
    with_group_configs,
    write_group_configs,
)

SNAPSHOT = {"captured_at_ms": 1, "bootstrap_server": "kafka:9092", "complete": True,
            "broker": {"group.consumer.assignment.interval.ms": {"value": "2000", "source": "STATIC_BROKER_CONFIG"},
                       "group.consumer.session.timeout.ms": {"value": "45000", "source": "DEFAULT_CONFIG"}},
            "groups": {"fast": {"consumer.assignment.interval.ms": {"value": "0", "source": "DYNAMIC_GROUP_CONFIG"}},
                       "plain": {"consumer.assignment.interval.ms": {"value": "2000", "source": "DEFAULT_CONFIG"}}}}


def cfg(**broker):
    return load_settings().replace(broker=broker)


@pytest.mark.parametrize("suffix", [".json", ".parquet"])
def test_snapshot_round_trips_through_json_and_parquet(tmp_path, suffix):
    path = write_group_configs(parse_group_configs(SNAPSHOT), tmp_path / f"gc{suffix}")
    back = load_group_configs(path)
    for key in ("broker", "groups", "complete", "captured_at_ms"):
        assert back[key] == parse_group_configs(SNAPSHOT)[key]


def test_interval_read_from_a_captured_snapshot(tmp_path):
    path = write_group_configs(parse_group_configs(SNAPSHOT), tmp_path / "gc.json")
    config = cfg(group_configs=str(path))
    fast = assignment_interval(config.broker, "fast", "consumer")
    assert (fast.interval_ms, fast.known) == (0, True) and "group config" in fast.source and str(path) in fast.source
    other = assignment_interval(config.broker, "absent", "consumer")   # complete snapshot: the broker default
    assert (other.interval_ms, other.known) == (2000, True)
    assert "group.consumer.assignment.interval.ms=2000" in other.source
    partial = cfg(group_configs=dict(SNAPSHOT, complete=False))
    assert assignment_interval(partial.broker, "absent", "consumer").known is False


def test_interval_without_snapshot_is_the_broker_default_and_not_known():
    basis = assignment_interval(cfg().broker, "g", "consumer")
    assert (basis.interval_ms, basis.known) == (1000, False)
    assert "no group configs snapshot" in basis.source
    override = assignment_interval(cfg(group_overrides={"g": {"assignment_interval_ms": 0}}).broker, "g", "consumer")
    assert (override.interval_ms, override.known) == (0, True)


def test_audit_with_snapshot_override_raises_nothing_and_without_snapshot_one_info(tmp_path):
    from audit_events import History, stable_group
    from offsets_audit.audit import audit_events

    h = stable_group(History(group_id="fast"))
    for epoch in (3, 4, 5, 6):
        h.after(5).bump(epoch - 1, epoch)
        h.after(20).target(epoch)
    path = write_group_configs(parse_group_configs(SNAPSHOT), tmp_path / "gc.parquet")
    findings, _ = audit_events(h.events, with_group_configs(cfg(group_configs=str(path))))
    assert [f.rule for f in findings] == []
    findings, _ = audit_events(h.events, cfg())
    assert [(f.rule, f.severity) for f in findings] == [("assignment_interval_overridden", "info")]
    assert "smallest gap 25 ms" in findings[0].message


def test_a_wrong_snapshot_path_is_a_one_line_user_error(tmp_path):
    with pytest.raises(UserError) as err:
        with_group_configs(cfg(group_configs=str(tmp_path / "missing.json")))
    assert "capture-group-configs" in str(err.value.fix if hasattr(err.value, "fix") else err.value)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(UserError):
        load_group_configs(bad)


def test_config_accepts_broker_group_configs():
    assert load_settings(overrides={"broker": {"group_configs": "gc.json"}}).broker.group_configs == "gc.json"
    assert load_settings().broker.group_configs is None


# -- the wire format, against Kafka's message definitions -------------------------------------------------------

def _uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _compact_string(s: str | None) -> bytes:
    if s is None:
        return b"\x00"
    data = s.encode("utf-8")
    return _uvarint(len(data) + 1) + data


def test_describe_configs_request_v4_bytes_follow_kafkas_message_definition():
    """Resources: compact array of {ResourceType int8, ResourceName compact string, ConfigurationKeys compact
    nullable array, tags}; IncludeSynonyms bool; IncludeDocumentation bool; tags. GROUP is resource type 32."""
    body = describe_configs_request([(32, "orders")]).encode()
    expected = (_uvarint(2) + struct.pack(">b", 32) + _compact_string("orders") + b"\x00" + b"\x00"
                + b"\x00" + b"\x00" + b"\x00")
    assert body == expected


def test_describe_configs_response_v4_bytes_decode_to_group_configs():
    """ThrottleTimeMs int32; Results: compact array of {ErrorCode int16, ErrorMessage, ResourceType int8,
    ResourceName, Configs: compact array of {Name, Value, ReadOnly, ConfigSource int8 (8 = GROUP_CONFIG),
    IsSensitive, Synonyms, ConfigType int8, Documentation, tags}, tags}; tags."""
    from kafka.protocol.admin import DescribeConfigsResponse

    config = (_compact_string("consumer.assignment.interval.ms") + _compact_string("0") + b"\x00"
              + struct.pack(">b", 8) + b"\x00" + _uvarint(1) + struct.pack(">b", 3) + b"\x00" + b"\x00")
    default = (_compact_string("consumer.session.timeout.ms") + _compact_string("45000") + b"\x00"
               + struct.pack(">b", 5) + b"\x00" + _uvarint(1) + struct.pack(">b", 3) + b"\x00" + b"\x00")
    result = (struct.pack(">h", 0) + b"\x00" + struct.pack(">b", 32) + _compact_string("orders")
              + _uvarint(3) + config + default + b"\x00")
    failed = (struct.pack(">h", 69) + _compact_string("group not found") + struct.pack(">b", 32)
              + _compact_string("gone") + _uvarint(1) + b"\x00")
    wire = struct.pack(">i", 0) + _uvarint(3) + result + failed + b"\x00"
    response = DescribeConfigsResponse[4].decode(wire)
    assert configs_from_response(response) == {(32, "orders"): {
        "consumer.assignment.interval.ms": {"value": "0", "source": "DYNAMIC_GROUP_CONFIG"},
        "consumer.session.timeout.ms": {"value": "45000", "source": "DEFAULT_CONFIG"}}}


# -- against the real broker of the tests ----------------------------------------------------------------------

@pytest.mark.broker
def test_capture_group_configs_from_a_real_broker(tmp_path, kafka_broker):
    """ListGroups, ListConfigResources, DescribeCluster and DescribeConfigs (GROUP and BROKER) against a real
    broker: a group interval set with kafka-configs is captured, and the job then knows that group's interval."""
    import uuid

    if not kafka_broker.supports.assignment_interval:
        pytest.skip(f"Kafka {kafka_broker.version} has no consumer.assignment.interval.ms group config")
    group = f"audited-{uuid.uuid4().hex[:8]}"
    kafka_broker.run_tools([kafka_broker.configs_invocation(
        "--alter", "--entity-type", "groups", "--entity-name", group,
        "--add-config", "consumer.assignment.interval.ms=0")])[0].check()
    snapshot = capture_group_configs(kafka_broker.bootstrap, timeout_ms=15000)
    out = tmp_path / "gc.json"
    done = subprocess.run([sys.executable, "-m", "offsets_audit.cli", "capture-group-configs",
                           "--bootstrap-server", kafka_broker.bootstrap, "--output", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert snapshot["complete"] is True                  # ListConfigResources named the group
    assert group in snapshot["groups"] and group in json.loads(out.read_text())["groups"]
    basis = assignment_interval(cfg(group_configs=str(out)).broker, group, "consumer")
    assert (basis.interval_ms, basis.known) == (0, True)
    other = assignment_interval(cfg(group_configs=str(out)).broker, "never-configured", "consumer")
    assert other.interval_ms == 1000


def test_refused_groups_round_trip_and_are_judged_as_not_known(tmp_path, capsys):
    """A snapshot's refused groups survive JSON and Parquet; their interval is the default but not known (a group
    config may override it), a streams group's assignor is unknown, and loading it prints one warning per run."""
    snapshot = parse_group_configs({**SNAPSHOT, "refused": {"hidden": "GROUP_AUTHORIZATION_FAILED"}})
    for suffix in (".json", ".parquet"):
        loaded = load_group_configs(write_group_configs(snapshot, tmp_path / f"gc{suffix}"))
        assert refused_groups(loaded) == {"hidden": "GROUP_AUTHORIZATION_FAILED"}, suffix
        assert loaded["groups"] == snapshot["groups"], suffix
    basis = assignment_interval(cfg(group_configs=snapshot).broker, "hidden", "consumer")
    assert (basis.interval_ms, basis.known) == (2000, False) and "refused" in basis.source
    assert assignment_interval(cfg(group_configs=snapshot).broker, "absent", "consumer").known   # complete snapshot
    assert assignor_choice(cfg(group_configs=snapshot).broker)["streams"]["hidden"] == UNKNOWN_ASSIGNOR
    settings = with_group_configs(cfg(group_configs=str(tmp_path / "gc.json")))
    with_group_configs(with_group_configs(settings))
    lines = [line for line in capsys.readouterr().err.splitlines() if line]
    assert len(lines) == 1 and "refused the configs of 1 group(s) (GROUP_AUTHORIZATION_FAILED)" in lines[0]
    assert "DESCRIBE_CONFIGS" in lines[0] and "broker.group_configs" in lines[0]


def test_a_group_whose_configs_the_cluster_refuses_is_unknown_never_the_default(kafka_broker, tmp_path, capsys):
    """DescribeConfigs of two groups of the test's own answered with GROUP_AUTHORIZATION_FAILED (an ACL denying
    DESCRIBE_CONFIGS on their prefix): the capture names them as refused instead of taking them for groups without
    configs, their interval (set to 0 by kafka-configs) is not judged against the broker default, and
    ``capture-group-configs`` and a run's loading of the configs print the warning once. Other groups' configs are
    read as before."""
    import uuid

    from kafka_broker import describe_configs_refused
    from offsets_audit.cli import main

    if not kafka_broker.supports.assignment_interval:
        pytest.skip(f"Kafka {kafka_broker.version} has no consumer.assignment.interval.ms group config")
    prefix = f"refused-{uuid.uuid4().hex[:8]}-"
    hidden, seen = [f"{prefix}a", f"{prefix}b"], f"seen-{uuid.uuid4().hex[:8]}"
    kafka_broker.run_tools([kafka_broker.configs_invocation(
        "--alter", "--entity-type", "groups", "--entity-name", group,
        "--add-config", "consumer.assignment.interval.ms=0") for group in (*hidden, seen)])
    out = tmp_path / "gc.json"
    capsys.readouterr()
    with describe_configs_refused(kafka_broker, prefix):
        snapshot = capture_group_configs(kafka_broker.bootstrap, groups=hidden, timeout_ms=15000)
        assert main(["capture-group-configs", "--bootstrap-server", kafka_broker.bootstrap, "--output", str(out),
                     "--group", hidden[0], "--group", hidden[1], "--timeout-ms", "15000"]) == 0
        live = load_settings().replace(source={"kind": "kafka", "options": {
            "kafka.bootstrap.servers": kafka_broker.bootstrap}})
        with_group_configs(with_group_configs(live))
    assert {g: e for g, e in refused_groups(snapshot).items() if g in hidden} == \
        {g: "GROUP_AUTHORIZATION_FAILED" for g in hidden}
    assert not set(hidden) & set(snapshot["groups"]) and seen in snapshot["groups"]
    basis = assignment_interval(cfg(group_configs=str(out)).broker, hidden[0], "consumer")
    assert basis.known is False and "GROUP_AUTHORIZATION_FAILED" in basis.source
    other = assignment_interval(cfg(group_configs=str(out)).broker, seen, "consumer")
    assert (other.interval_ms, other.known) == (0, True)
    err = [line for line in capsys.readouterr().err.splitlines() if "refused the configs" in line]
    # one by capture-group-configs, one by the run's (two) loads, which name no group: ListConfigResources and
    # ListGroups list the refused groups too
    assert len(err) == 2, err
    assert all("2 group(s) (GROUP_AUTHORIZATION_FAILED)" in line for line in err)
    after = capture_group_configs(kafka_broker.bootstrap, groups=hidden, timeout_ms=15000)
    assert not set(hidden) & set(refused_groups(after)) and set(hidden) <= set(after["groups"])


def test_capture_of_an_unreachable_cluster_is_a_user_error():
    from broker import free_port

    with pytest.raises(UserError):
        capture_group_configs(f"127.0.0.1:{free_port()}", timeout_ms=1000)


@pytest.mark.spark
def test_spark_audit_reads_the_snapshot_on_the_executors(spark, tmp_path):
    """The job's path: segments -> codec -> replay -> audit on Spark, with the snapshot loaded on the driver."""
    import shutil

    from offsets_audit.audit import spark as audit_spark
    from offsets_audit.codec import spark as codec_spark
    from offsets_audit.replay import spark as replay_spark
    from offsets_audit.sources import read
    from replay_support import HISTORIES, load_expected, planned_as_a_small_log

    name = "history-assignment-batching"
    root = tmp_path / "logs" / "__consumer_offsets-0"
    root.mkdir(parents=True)
    shutil.copy(HISTORIES / f"{name}-00000000000000000000.log", root / "00000000000000000000.log")
    snapshot = write_group_configs(parse_group_configs(
        {"complete": True, "broker": {}, "groups": {"batch-override-0": {"consumer.assignment.interval.ms": "0"},
                                                     "batch-override-3000": {"consumer.assignment.interval.ms": "3000"}}}),
        tmp_path / "gc.parquet")
    rules = lambda out: sorted({(r.rule, r.severity, r.group_id) for r in out["findings"].collect()  # noqa: E731
                                if r.rule != "offset_committed_backwards"})
    # planned and run as the job plans a log this small
    with planned_as_a_small_log(spark, len(load_expected(HISTORIES / f"{name}-00000000000000000000.expected.jsonl"))):
        decoded, _ = codec_spark.split(codec_spark.decode(read(spark, {"kind": "segments", "path": str(root.parent)})))
        tables = replay_spark.replay(decoded)
        with_snapshot = audit_spark.audit(tables, None, with_group_configs(cfg(group_configs=str(snapshot))),
                                          decoded=decoded)
        without = audit_spark.audit(tables, None, with_group_configs(cfg()), decoded=decoded)
        assert rules(with_snapshot) == []
        assert rules(without) == [("assignment_interval_overridden", "info", "batch-override-0")]


def test_run_with_a_missing_snapshot_exits_2_before_spark(tmp_path):
    done = subprocess.run([sys.executable, "-m", "offsets_audit.cli", "run", "--input", str(tmp_path),
                           "--group-configs", str(tmp_path / "missing.json")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "capture-group-configs" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.full
@pytest.mark.kafka
@pytest.mark.spark
def test_a_run_on_a_cluster_that_refuses_some_group_configs_warns_once_and_judges_them_not(kafka_broker, spark,
                                                                                           tmp_path, capsys):
    """``offsets-audit run`` with the live topic as its source, on the session broker, while it refuses the configs
    of a real KIP-848 group (its clients: the scenario driver's; its interval set to 0 by kafka-configs, below the
    broker's default): the run prints the refusal once, and nothing it finds about that group at warning or above
    rests on the defaults it could not check (``assignment_interval_violated`` would)."""
    import uuid

    import pyarrow.parquet as pq
    import yaml

    from kafka_broker import OFFSETS_TOPIC, describe_configs_refused
    from offsets_audit.cli import main
    from real_kafka import run_to_the_end

    if not kafka_broker.supports.assignment_interval:
        pytest.skip(f"Kafka {kafka_broker.version} has no consumer.assignment.interval.ms group config")
    prefix = f"gcr{uuid.uuid4().hex[:6]}"
    group = f"{prefix}-consumer_uniform-group"
    kafka_broker.run_tools([kafka_broker.configs_invocation(
        "--alter", "--entity-type", "groups", "--entity-name", group,
        "--add-config", "consumer.assignment.interval.ms=0")])[0].check()
    report = run_to_the_end(kafka_broker, tmp_path / "scenarios", prefix, ["consumer_uniform"])
    assert report["consumer_uniform"]["status"] == "ok"
    ending = json.dumps({OFFSETS_TOPIC: {str(p): o for p, o in kafka_broker.end_offsets().items()}})
    config = tmp_path / "audit.yaml"
    config.write_text(yaml.safe_dump({
        "source": {"kind": "kafka", "options": {"kafka.bootstrap.servers": kafka_broker.bootstrap,
                                                "startingOffsets": "earliest", "endingOffsets": ending}},
        "broker": {"kafka_version": ".".join(kafka_broker.version.split(".")[:2])},
        "output": {"html_report": False}}))
    capsys.readouterr()
    with describe_configs_refused(kafka_broker, f"{prefix}-"):
        assert main(["run", "--config", str(config), "--output", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    assert err.count("refused the configs of") == 1, err
    assert "(GROUP_AUTHORIZATION_FAILED)" in err
    findings = [r for r in pq.read_table(tmp_path / "out" / "findings").to_pylist() if r["group_id"] == group]
    assert [(f["rule"], f["message"]) for f in findings if f["severity"] in ("warning", "error")] == []
    reruns = [r for r in pq.read_table(tmp_path / "out" / "assignor_audit").to_pylist() if r["group_id"] == group]
    assert reruns and all(r["match"] is not False for r in reruns)
