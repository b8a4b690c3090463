"""The run lease for tables by name: a run writing ``--output-catalog <catalog>.<schema>`` holds the lease of
the schema's own folder, so a second run writing the same namespace (whatever its run id: two writes into one
table share its committer folders) stops with one line naming the holder, and a dead holder's lease is stale.

On the suite's session and its catalog (``spark_catalog``), in a schema of its own under the test's folder; the
refused run stops before any Spark work, so this costs seconds.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from offsets_audit import lease
from offsets_audit.sinks import Output
from offsets_audit.sinks.catalog import namespace_location
from replay_support import HISTORIES

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[1]


def _holder(folder: str, run_id: str) -> subprocess.Popen:
    """Another process holding ``folder``'s lease until its stdin closes; returns once it holds it."""
    code = textwrap.dedent(f"""
        import sys
        from offsets_audit import lease
        lease.acquire({folder!r}, {run_id!r}, what="output catalog")
        print("held", flush=True)
        sys.stdin.read()
    """)
    env = dict(os.environ, PYTHONPATH=str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    process = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               text=True, env=env)
    assert process.stdout is not None and process.stdout.readline().strip() == "held"
    return process


def test_the_lease_is_on_the_schemas_own_folder(spark, namespace, tmp_path):
    location = namespace_location(spark, namespace)
    assert Path(location.removeprefix("file:")).resolve() == (tmp_path / "warehouse").resolve()
    with Output(catalog=str(namespace)).leased(spark, "r-1") as taken:
        assert taken is not None and lease.holder(location)["run_id"] == "r-1"
    assert lease.holder(location) is None
    assert not (tmp_path / "warehouse" / lease.LEASE_FILE).exists()
    with Output(path=str(tmp_path / "out")).leased(spark, "r-1") as none:
        assert none is None  # a folder output is leased before Spark starts, not here


@pytest.mark.parametrize("incremental", [False, True], ids=["batch", "incremental"])
def test_a_second_run_into_the_namespace_is_one_line_naming_the_holder(spark, namespace, tmp_path, capsys,
                                                                       incremental):
    from offsets_audit.cli import main

    logs = tmp_path / "logs"
    (logs / "__consumer_offsets-0").mkdir(parents=True)
    shutil.copy(HISTORIES / "history-assignment-batching-00000000000000000000.log",
                logs / "__consumer_offsets-0" / "00000000000000000000.log")
    other = _holder(namespace_location(spark, namespace), "night-1")
    try:
        code = main(["run", "--input", str(logs), "--input-format", "segments", "--output", str(tmp_path / "files"),
                     "--output-catalog", str(namespace), "--run-id", "night-2"]
                    + (["--incremental", "--checkpoint", str(tmp_path / "checkpoint")] if incremental else []))
        err = capsys.readouterr().err.strip().splitlines()
    finally:
        assert other.stdin is not None
        other.stdin.close()
        other.wait()
    assert code == 2
    assert len(err) == 1 and "Traceback" not in err[0], err
    assert f"output catalog {namespace} is in use by run night-1 (pid {other.pid} on host " \
           f"{socket.gethostname()}, since 20" in err[0]
    assert "--output-catalog" in err[0]
    assert not list(spark.sql(f"SHOW TABLES IN {namespace.sql}").collect()), "the refused run wrote nothing"


def test_a_killed_holders_lease_of_a_namespace_is_stale(spark, namespace, capsys):
    location = namespace_location(spark, namespace)
    other = _holder(location, "night-1")
    os.kill(other.pid, signal.SIGKILL)
    other.wait()
    with Output(catalog=str(namespace)).leased(spark, "night-2") as taken:
        assert taken is not None and lease.holder(location)["run_id"] == "night-2"
    assert f"output catalog {namespace}: taking over the lease of run night-1" in capsys.readouterr().err
