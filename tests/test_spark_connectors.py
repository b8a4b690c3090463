"""Spark's own ``kafka`` source and Delta's Spark writer, with their jars resolved by Maven as a user's ``--packages``
would (``tests/kafka/spark.pom.xml``, handed to the session as ``spark.jars``), against a real broker.

Real clients (classic and KIP-848 consumer groups, a transactional producer with an aborted transaction) write
``__consumer_offsets`` on the session's broker; every read is pinned to the same ending offsets. The same reads and
the same job run twice: on a classic session with the jars, in a process of its own (``tests/cli_session.py``;
the tests' own session has no jars), where Spark's ``kafka`` source reads the topic and Delta's Spark writer writes
the tables; and on the tests' session, where the ``kafka-python`` source and the ``deltalake`` package do. Both
take the same options: ``startingOffsets``/``endingOffsets``, a ``kafka.*`` security option,
``maxRecordsPerPartition`` (a partition split into several reads) and ``isolation.level``.

* the dumps (``offsets-audit dump``) of both readers are equal row for row, read_committed and read_uncommitted,
  and equal the records of the broker's own segments below the ending offsets: without the aborted transaction's
  records read_committed, with them read_uncommitted, never a transaction marker;
* ``offsets-audit run --input-format kafka --output-format delta`` writes equal tables through both, each writer's
  commits in the Delta log, and each side reads the other's Delta tables (Spark's reader the ``deltalake``
  package's, the ``deltalake`` package Spark's) with the same fingerprints.

A second JVM with the jars and three runs of each command: ``make test-full`` runs it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kafka_broker import OFFSETS_TOPIC
from real_kafka import aborted_offsets, records_below, run_to_the_end, segment_records
from table_fingerprints import different, fingerprints

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow, pytest.mark.full]

REPO = Path(__file__).resolve().parents[1]
SCENARIOS = ("classic_eager", "consumer_uniform", "transactions")
#: Records per read of a partition: the partitions hold a few hundred, so each is read in several pieces.
MAX_RECORDS_PER_PARTITION = 40


@pytest.fixture(scope="module")
def offsets_log(kafka_broker, tmp_path_factory) -> dict:
    """The scenarios run to their end on the session's broker; the ending offsets and a copy of the log."""
    folder = tmp_path_factory.mktemp("spark-connectors")
    report = run_to_the_end(kafka_broker, folder / "scenarios", "sc", SCENARIOS)
    assert {name: s["status"] for name, s in report.items()} == {name: "ok" for name in SCENARIOS}
    end = kafka_broker.end_offsets()
    log = kafka_broker.copy_offsets_log(folder / "log")
    return {"folder": folder, "bootstrap": kafka_broker.bootstrap, "end": end, "log": log,
            "ending": json.dumps({OFFSETS_TOPIC: {str(p): o for p, o in end.items()}})}


def _config(path: Path, offsets_log: dict, spark_conf: dict | None = None) -> Path:
    config = {"source": {"kind": "kafka", "options": {
        "kafka.bootstrap.servers": offsets_log["bootstrap"], "startingOffsets": "earliest",
        "endingOffsets": offsets_log["ending"], "maxRecordsPerPartition": MAX_RECORDS_PER_PARTITION,
        "kafka.security.protocol": "PLAINTEXT"}},
        "output": {"html_report": False}}
    if spark_conf:
        config["spark"] = {"conf": spark_conf}
    path.write_text(yaml.safe_dump(config))
    return path


def _commands(root: Path, config: Path, offsets_log: dict) -> list[list[str]]:
    dump = ["dump", "--bootstrap-server", offsets_log["bootstrap"], "--starting-offsets", "earliest",
            "--ending-offsets", offsets_log["ending"], "--kafka-option",
            f"maxRecordsPerPartition={MAX_RECORDS_PER_PARTITION}", "--kafka-option", "kafka.security.protocol=PLAINTEXT",
            "--progress-interval", "600"]
    return [["run", "--config", str(config), "--output", str(root / "tables"), "--output-format", "delta",
             "--run-id", "k1"],
            [*dump, "--output", str(root / "dump")],
            [*dump, "--isolation-level", "read_uncommitted", "--output", str(root / "dump-uncommitted")]]


@pytest.fixture(scope="module")
def python_side(spark, offsets_log) -> dict:
    """The tests' session, without the jars: the kafka-python source and the deltalake writer."""
    import contextlib
    import io

    from offsets_audit.cli import main

    root = offsets_log["folder"] / "python"
    root.mkdir()
    commands = []
    for argv in _commands(root, _config(root.with_suffix(".yaml"), offsets_log), offsets_log):
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            code = main(argv)
        commands.append({"argv": argv, "exit": code, "stderr": stderr.getvalue()})
    return {"root": root, "commands": commands}


@pytest.fixture(scope="module")
def spark_side(offsets_log, connector_jars, python_side) -> dict:
    """A classic session with the jars in a process of its own: Spark's kafka source and Delta's Spark writer; then
    its Delta reader over both sides' tables."""
    root = offsets_log["folder"] / "spark"
    root.mkdir()
    config = _config(root.with_suffix(".yaml"), offsets_log,
                     {"spark.jars": ",".join(str(jar) for jar in connector_jars)})
    plan = {"remote": None, "commands": [
        *_commands(root, config, offsets_log),
        ["!fingerprint", "spark", str(root / "tables"), "k1", "delta"],
        ["!fingerprint", "deltalake", str(python_side["root"] / "tables"), "k1", "delta"]]}
    (root / "plan.json").write_text(json.dumps(plan))
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED")}
    env.update(PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    done = subprocess.run([sys.executable, str(REPO / "tests" / "cli_session.py"), str(root / "plan.json"),
                           str(root / "result.json")], env=env, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-4000:]
    return {"root": root, **json.loads((root / "result.json").read_text())}


def test_each_side_reads_with_its_reader_and_writes_with_its_writer(python_side, spark_side):
    for command in spark_side["commands"]:
        assert command["exit"] == 0, command["stderr"]
        assert "read with Spark's kafka source" in command["stderr"]
    for command in python_side["commands"]:
        assert command["exit"] == 0, command["stderr"]
        assert "read with the kafka-python source" in command["stderr"]
    assert _engines(spark_side["root"] / "tables" / "offsets") == {"Apache-Spark"}
    assert _engines(python_side["root"] / "tables" / "offsets") == {"delta-rs"}


def _engines(table: Path) -> set[str]:
    """Who wrote each commit of a Delta table (``commitInfo.engineInfo``, up to its version number)."""
    found = set()
    for entry in sorted((table / "_delta_log").glob("*.json")):
        for line in entry.read_text().splitlines():
            info = json.loads(line).get("commitInfo")
            if info is not None:
                found.add(str(info.get("engineInfo", "?")).split("/")[0].split(":")[0].split(" ")[0])
    return found


def _dump_rows(spark, folder: Path) -> list[tuple]:
    from offsets_audit.sources import read

    df = read(spark, {"kind": "parquet", "path": str(folder)})
    return sorted(tuple(row) for row in df.select("partition", "offset", "key", "value", "timestamp",
                                                  "timestampType", "topic").collect())


@pytest.mark.parametrize("dump", ["dump", "dump-uncommitted"])
def test_spark_kafka_source_reads_what_kafka_python_reads(spark, python_side, spark_side, dump):
    ours = _dump_rows(spark, spark_side["root"] / dump)
    assert ours and ours == _dump_rows(spark, python_side["root"] / dump)


@pytest.mark.parametrize("dump", ["dump", "dump-uncommitted"])
def test_both_readers_read_the_broker_segments_records(spark, offsets_log, python_side, spark_side, dump):
    """The records below the ending offsets, as the broker's own segments hold them: no transaction marker, and the
    aborted transaction's records only read_uncommitted."""
    records = records_below(segment_records(offsets_log["log"]), offsets_log["end"])
    aborted = aborted_offsets(records)
    assert aborted, "the transactions scenario aborts one transaction"
    expected = sorted((r["partition"], r["offset"], r["key"], r["value"]) for r in records
                      if not r["is_control"] and (dump == "dump-uncommitted" or (r["partition"], r["offset"]) not in aborted))
    for side in (spark_side, python_side):
        assert [row[:4] for row in _dump_rows(spark, side["root"] / dump)] == expected


def test_spark_source_and_delta_writer_give_the_tables_of_kafka_python_and_deltalake(spark, python_side,
                                                                                    spark_side):
    """Tables equal; the deltalake package reads Spark's Delta tables and Spark reads the deltalake package's, each
    with the other's fingerprints."""
    written_by_spark = fingerprints(spark, spark_side["root"] / "tables", "k1", "delta")  # read with deltalake
    written_by_deltalake = fingerprints(spark, python_side["root"] / "tables", "k1", "delta")
    assert written_by_spark and sum(n for n, _ in written_by_spark.values()) > 0
    assert different(written_by_spark, written_by_deltalake) == {}
    assert different(spark_side["fingerprints"]["spark"], written_by_spark) == {}
    assert different(spark_side["fingerprints"]["deltalake"], written_by_deltalake) == {}
