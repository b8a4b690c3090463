"""The run lease: a second writer of an output folder or checkpoint stops with one line naming the holder (run id,
host, pid, since when); a lease left by a process that died is taken over and named; a process may take its own
lease again."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from offsets_audit import lease
from offsets_audit.errors import UserError

REPO = Path(__file__).resolve().parents[1]


def _holder(folder: Path, run_id: str) -> subprocess.Popen:
    """Another process holding ``folder``'s lease until its stdin closes; returns once it holds it."""
    code = textwrap.dedent(f"""
        import sys
        from offsets_audit import lease
        lease.acquire({str(folder)!r}, {run_id!r})
        print("held", flush=True)
        sys.stdin.read()
    """)
    env = dict(os.environ, PYTHONPATH=str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    process = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               text=True, env=env)
    assert process.stdout.readline().strip() == "held"
    return process


def test_a_second_writer_is_refused_with_the_holders_run_id_host_pid_and_start(tmp_path):
    other = _holder(tmp_path / "out", "night-1")
    try:
        with pytest.raises(UserError) as refused:
            lease.acquire(str(tmp_path / "out"), "night-2")
        message = str(refused.value)
        assert "\n" not in message
        assert f"output {tmp_path / 'out'} is in use by run night-1 (pid {other.pid} on host " \
               f"{socket.gethostname()}, since 20" in message
        assert "wait for that run to end" in message
        assert lease.holder(str(tmp_path / "out"))["run_id"] == "night-1"
    finally:
        other.stdin.close()
        other.wait()
    # released on exit: now it is free, and free again after this process's turn
    assert lease.holder(str(tmp_path / "out")) is None
    taken = lease.acquire(str(tmp_path / "out"), "night-2")
    lease.release(taken)
    assert not (tmp_path / "out" / lease.LEASE_FILE).exists()


def test_a_lease_of_a_killed_process_is_stale_and_taken_over_by_name(tmp_path, capsys):
    other = _holder(tmp_path / "checkpoint", "night-1")
    other.send_signal(signal.SIGKILL)
    other.wait()
    assert (tmp_path / "checkpoint" / lease.LEASE_FILE).exists()  # left behind, as by a lost node
    assert lease.holder(str(tmp_path / "checkpoint")) is None
    taken = lease.acquire(str(tmp_path / "checkpoint"), "night-2", what="checkpoint")
    try:
        assert taken.took_over["run_id"] == "night-1"
        err = capsys.readouterr().err
        assert f"taking over the lease of run night-1 (pid {other.pid}" in err and "ended without releasing" in err
    finally:
        lease.release(taken)


def test_the_same_process_may_take_its_lease_again(tmp_path):
    first = lease.acquire(str(tmp_path), "r")
    second = lease.acquire(str(tmp_path), "r")
    assert first is second
    lease.release(second)
    assert lease.holder(str(tmp_path))["run_id"] == "r"
    lease.release(first)
    assert lease.holder(str(tmp_path)) is None


def test_without_flock_a_dead_holders_lease_file_is_stale_and_a_live_ones_refused(tmp_path):
    path = str(tmp_path / lease.LEASE_FILE)
    dead = {"run_id": "old", "host": socket.gethostname(), "pid": 2 ** 22 + 7, "since": "2020-01-01T00:00:00+00:00"}
    Path(path).write_text(__import__("json").dumps(dead))
    taken = lease._acquire_exclusive(str(tmp_path), path, "new", "output")
    assert taken.took_over["run_id"] == "old"
    live = {"run_id": "live", "host": socket.gethostname(), "pid": os.getppid(), "since": "2020-01-01T00:00:00+00:00"}
    Path(path).write_text(__import__("json").dumps(live))
    with pytest.raises(UserError, match="in use by run live"):
        lease._acquire_exclusive(str(tmp_path), path, "new", "output")


def test_a_folder_that_cannot_be_created_is_one_line(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(UserError, match="cannot be created"):
        lease.acquire(str(tmp_path / "file" / "out"), "r")
    assert lease.acquire("s3://bucket/out", "r") is None
