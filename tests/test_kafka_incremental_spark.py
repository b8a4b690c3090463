"""``run --incremental`` reading the live ``__consumer_offsets`` through Spark's own ``kafka`` stream (its jars
resolved by Maven, ``tests/kafka/spark.pom.xml``) audits what one batch run over the same records audits.

Real clients write the topic on the session's broker in two rounds (classic and KIP-848 groups, then a
transactional producer with an aborted transaction). One incremental run after the first round, another after
the second (its stream resumes from the checkpoint where the first stopped), then a batch run pinned to the
topic's end offsets: the findings, rebalances and assignor re-runs of both incremental runs plus the last one's
provisional ones equal the batch run's, row for row, ids included. The runs go through the CLI on a classic
session with the jars (``tests/cli_session.py``, one process per round: the tests' own session has no jars);
``source.reader: spark`` makes a session without Spark's source fail rather than fall back.

Two JVMs with the jars and three runs: ``make test-full`` runs it.
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
from real_kafka import run_to_the_end

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow, pytest.mark.full]

REPO = Path(__file__).resolve().parents[1]
ROUNDS = (("ia", ("classic_eager", "consumer_uniform")), ("ib", ("transactions",)))
#: The incremental tables that hold what a later run may still change, and the table each belongs to.
PROVISIONAL = {"findings": "provisional_findings", "rebalances": "provisional_rebalances",
               "assignor_audit": "provisional_assignor_audit"}


def _scenarios(broker, folder: Path, prefix: str, names) -> None:
    """The scenarios held to READY, then stopped: their members leave and the topic goes quiet."""
    report = run_to_the_end(broker, folder / f"scenarios-{prefix}", prefix, names)
    assert {name: s["status"] for name, s in report.items()} == {name: "ok" for name in names}


def _config(path: Path, bootstrap: str, jars: list[Path], ending: str | None = None) -> Path:
    options = {"kafka.bootstrap.servers": bootstrap, "startingOffsets": "earliest"}
    if ending is not None:
        options["endingOffsets"] = ending
    path.write_text(yaml.safe_dump({"source": {"kind": "kafka", "reader": "spark", "options": options},
                                    "output": {"html_report": False},
                                    "spark": {"conf": {"spark.jars": ",".join(str(jar) for jar in jars)}}}))
    return path


def _session(root: Path, name: str, commands: list[list[str]]) -> dict:
    """``commands`` through the CLI in one classic session of a process of its own (``tests/cli_session.py``)."""
    plan, result = root / f"{name}.plan.json", root / f"{name}.result.json"
    plan.write_text(json.dumps({"remote": None, "commands": commands}))
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED")}
    env.update(PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    done = subprocess.run([sys.executable, str(REPO / "tests" / "cli_session.py"), str(plan), str(result)],
                          env=env, capture_output=True, text=True, timeout=2400)
    assert done.returncode == 0, done.stderr[-4000:]
    ran = json.loads(result.read_text())
    for command in ran["commands"]:
        assert command["exit"] == 0, (command["argv"], command["stderr"][-4000:])
    return ran


@pytest.fixture(scope="module")
def runs(kafka_broker, connector_jars, tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("kafka-incremental-spark")
    live = _config(root / "live.yaml", kafka_broker.bootstrap, connector_jars)

    def incremental(run_id: str) -> list[str]:
        return ["run", "--incremental", "--checkpoint", str(root / "checkpoint"), "--config", str(live),
                "--output", str(root / "incremental"), "--run-id", run_id]

    (prefix, names), (later_prefix, later_names) = ROUNDS
    _scenarios(kafka_broker, root, prefix, names)
    first_end = kafka_broker.end_offsets()
    first = _session(root, "first", [incremental("i1")])
    _scenarios(kafka_broker, root, later_prefix, later_names)
    end = kafka_broker.end_offsets()
    ending = json.dumps({OFFSETS_TOPIC: {str(p): o for p, o in end.items()}})
    batch = _config(root / "batch.yaml", kafka_broker.bootstrap, connector_jars, ending)
    second = _session(root, "second", [incremental("i2"), ["run", "--config", str(batch), "--output",
                                                             str(root / "batch"), "--run-id", "b1"]])
    # the incremental stream reads up to where the topic is, the batch run up to ``end``: one history only while
    # nothing was appended in between
    assert kafka_broker.end_offsets() == end, "__consumer_offsets grew while the runs read it"
    return {"root": root, "first_end": first_end, "end": end, "commands": [*first["commands"], *second["commands"]]}


def test_the_runs_read_with_sparks_kafka_source(runs):
    assert sum(runs["end"].values()) > sum(runs["first_end"].values()), "the second round appended records"
    incremental_first, incremental_second, batch = runs["commands"]
    # once a run, though both of its queries read the stream
    assert incremental_first["stderr"].count("read with Spark's kafka stream") == 1
    assert incremental_second["stderr"].count("read with Spark's kafka stream") == 1
    assert "read with Spark's kafka source" in batch["stderr"]


def _rows(spark, output: Path, table: str, run_id: str) -> list[str]:
    from offsets_audit import sinks

    df = sinks.read_table(spark, str(output), table, run_id, "parquet")
    assert df is not None, (output, table, run_id)
    return [json.dumps(r.asDict(recursive=True), sort_keys=True, default=str) for r in df.collect()]


@pytest.mark.parametrize("table", sorted(PROVISIONAL))
def test_incremental_runs_over_the_live_topic_equal_one_batch_run(spark, runs, table):
    incremental = runs["root"] / "incremental"
    ours = sorted([*_rows(spark, incremental, table, "i1"), *_rows(spark, incremental, table, "i2"),
                   *_rows(spark, incremental, PROVISIONAL[table], "i2")])
    expected = sorted(_rows(spark, runs["root"] / "batch", table, "b1"))
    if table != "findings":  # the groups rebalanced, and their assignors ran again
        assert expected
    assert ours == expected
