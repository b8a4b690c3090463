"""Spark Connect, as Databricks serverless compute and shared clusters give it: every command writes the tables a
classic session writes.

One small simulated history (with faults) goes through the same commands twice: on a local Spark Connect server
(``--remote local[2]``: a Connect server on its own port, the client with no SparkContext and no JVM) in a process
of its own (``tests/cli_session.py``; a Connect client cannot share the tests' process with their classic
session), and in this process on the tests' classic session. One Connect server serves the whole module.

The default suite runs ``check`` (the batch job and the gate): every table equal, row count and content (an
order-independent hash of every column of every row), and the gate's verdict and summary the same. The full run
(``make test-full``) adds ``run --incremental`` over the first half of the log then ``check --incremental`` over
all of it (the log grows between them, as a broker's does), ``decode`` and ``dump``, and the explore notebook
reading the Connect run's tables on Connect: its plain script on the same session, its Jupyter form in a kernel of
its own through the server's ``sc://`` address, as a Databricks client connects.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from table_fingerprints import different, fingerprints

pytestmark = [pytest.mark.spark, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[1]
#: ``make test-full``: every command, and the notebook, on Connect (the default suite runs the batch ``check``).
FULL = os.environ.get("OFFSETS_AUDIT_FULL") == "1"


def _commands(root: Path, history: Path) -> list[list[str]]:
    """The commands of one side, writing under ``root`` (the same for the Connect and the classic side)."""
    live, checkpoint, inc = root / "live", root / "checkpoint", root / "incremental"
    batch = [["check", "--input", str(history / "full"), "--input-format", "segments", "--output", str(root / "batch"),
              "--run-id", "b1", "--fail-on", "error", "--junit-xml", str(root / "batch.xml"),
              "--json-summary", str(root / "batch.json")]]
    if not FULL:
        return batch
    return [
        *batch,
        ["!copy", str(history / "half"), str(live)],
        ["run", "--incremental", "--checkpoint", str(checkpoint), "--input", str(live), "--input-format", "segments",
         "--output", str(inc), "--run-id", "i1"],
        ["!copy", str(history / "full"), str(live)],
        ["check", "--incremental", "--checkpoint", str(checkpoint), "--input", str(live), "--input-format",
         "segments", "--output", str(inc), "--run-id", "i2", "--fail-on", "error",
         "--json-summary", str(root / "incremental.json")],
        ["decode", "--input", str(history / "full"), "--input-format", "segments", "--output", str(root / "decode")],
        ["dump", "--segments", str(history / "full"), "--output", str(root / "dump")],
    ]


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> Path:
    """A small history with faults, whole (``full``) and cut at half its batches per partition (``half``)."""
    from offsets_audit.simulate import simulate
    from offsets_audit.sources.segments_stream import batch_ends

    root = tmp_path_factory.mktemp("connect-history")
    simulate(str(root / "sim"), groups=4, hours=0.3, partitions=3, seed=23, formats=("segments",),
             faults=("wrong_assignment", "epoch_regression"))
    full = root / "sim" / "segments"
    (root / "full").symlink_to(full)
    for folder in sorted(p for p in full.iterdir() if p.is_dir()):
        ends = [(f, end) for f in sorted(folder.glob("*.log")) for end in batch_ends(str(f), 0, f.stat().st_size)]
        if not ends:
            continue
        last_file, last_end = ends[max(len(ends) // 2 - 1, 0)]
        target = root / "half" / folder.name
        target.mkdir(parents=True)
        for f in sorted(folder.glob("*.log")):
            if f.name > last_file.name:
                break
            (target / f.name).write_bytes(f.read_bytes() if f != last_file else f.read_bytes()[:last_end])
    return root


@pytest.fixture(scope="module")
def connect_process(history, tmp_path_factory):
    """The commands, the plain script and the notebook on a local Spark Connect server, in a process of their own
    that runs beside the classic side's commands (Spark's jobs leave the cores idle between stages)."""
    root = tmp_path_factory.mktemp("connect-side")
    plan = {"remote": "local[2]", "commands": _commands(root, history), "script": None, "notebook": None}
    if FULL:
        tables = {"OFFSETS_AUDIT_TABLES": str(root / "batch"), "OFFSETS_AUDIT_RUN_ID": "b1", "OFFSETS_AUDIT_GROUP_ID": ""}
        plan.update(script={**tables, "MPLBACKEND": "Agg", "OFFSETS_AUDIT_PLOTS": str(root / "plots")},
                    notebook={**tables, "KERNEL_PREFIX": str(root / "kernel")})
    (root / "plan.json").write_text(json.dumps(plan))
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED")}
    env.update(PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable, MPLBACKEND="Agg")
    process = subprocess.Popen([sys.executable, str(REPO / "tests" / "cli_session.py"), str(root / "plan.json"),
                                str(root / "result.json")], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    yield root, process
    if process.poll() is None:
        process.kill()
        process.communicate()


@pytest.fixture(scope="module")
def connect_side(connect_process, classic_side) -> dict:
    root, process = connect_process
    _, stderr = process.communicate(timeout=1800)
    assert process.returncode == 0, stderr[-4000:]
    return {"root": root, **json.loads((root / "result.json").read_text())}


@pytest.fixture(scope="module")
def classic_side(spark, history, connect_process, tmp_path_factory) -> dict:
    """The same commands through the CLI's ``main`` on the tests' classic session, while the Connect side runs."""
    import contextlib
    import io
    import shutil

    from offsets_audit.cli import main

    root = tmp_path_factory.mktemp("classic-side")
    commands = []
    for argv in _commands(root, history):
        if argv[0] == "!copy":
            shutil.copytree(argv[1], argv[2], dirs_exist_ok=True)
            continue
        stdout = io.StringIO()
        with contextlib.redirect_stdout(stdout):
            code = main(argv)
        commands.append({"argv": argv, "exit": code, "stdout": stdout.getvalue()})
    return {"root": root, "commands": commands}


def _exits(side: dict) -> list:
    return [(c["argv"][0], c["exit"]) for c in side["commands"]]


def test_every_command_runs_on_spark_connect_with_the_classic_exit_codes(connect_side, classic_side):
    assert connect_side["session"] == "pyspark.sql.connect.session.SparkSession"
    assert connect_side["remote"].startswith("sc://localhost:"), "the local server's address, for later sessions"
    failed = [c for c in connect_side["commands"] if c["exit"] not in (0, 1)]
    assert not failed, failed[0]["stderr"]
    assert _exits(connect_side) == _exits(classic_side)
    verdict = [c["stdout"].strip().splitlines()[-1] for c in connect_side["commands"] if c["argv"][0] == "check"]
    assert verdict == [c["stdout"].strip().splitlines()[-1] for c in classic_side["commands"]
                       if c["argv"][0] == "check"]


@pytest.mark.parametrize("output, run_id", [
    ("batch", "b1"), *[pytest.param(output, run_id, marks=pytest.mark.full) for output, run_id in
                       (("incremental", "i1"), ("incremental", "i2"), ("decode", None), ("dump", None))]])
def test_spark_connect_writes_the_tables_a_classic_session_writes(spark, connect_side, classic_side, output, run_id):
    connect = fingerprints(spark, connect_side["root"] / output, run_id)
    classic = fingerprints(spark, classic_side["root"] / output, run_id)
    assert connect and different(connect, classic) == {}
    assert sum(n for n, _ in connect.values()) > 0


def test_the_gate_summaries_on_spark_connect_equal_the_classic_ones(connect_side, classic_side):
    for name in ("batch.json", "incremental.json") if FULL else ("batch.json",):
        connect = json.loads((connect_side["root"] / name).read_text())
        classic = json.loads((classic_side["root"] / name).read_text())
        for key in ("verdict", "findings", "failing", "records"):
            if key in classic:
                assert connect.get(key) == classic[key], (name, key)


@pytest.mark.full
def test_the_explore_notebook_reads_a_connect_run_on_spark_connect(connect_side):
    script = connect_side["script"]
    assert script["exit"] in (None, 0), script["stderr"]
    assert "exploring group " in script["stdout"]
    plots = sorted(p.name for p in (connect_side["root"] / "plots").glob("*.png"))
    assert {"epoch_timeline.png", "rebalance_latency.png"} <= set(plots), plots
    notebook = connect_side["notebook"]
    assert notebook["errors"] == [], notebook["errors"]
    assert notebook["images"] >= 3
    assert "exploring group " in notebook["stdout"]
