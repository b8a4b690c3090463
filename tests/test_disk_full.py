"""A run whose disk is full or read-only ends in one line naming it and the fix, exit 2, nothing half-written: a
read-only output, table folder or checkpoint is seen before any work; a disk that fills during the write stage
stops the run, which removes what it staged and never looks complete.

The disks are small tmpfs mounts (root only: skipped elsewhere)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from offsets_audit.cli import main


def _mount(target: Path, *options: str) -> None:
    done = subprocess.run(["mount", *options, str(target)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount here ({done.stderr.strip()[:80]}): needs root")


@pytest.fixture
def disk(tmp_path):
    """``make(size)``: a tmpfs of ``size`` at a new folder, unmounted at the end."""
    mounted: list[Path] = []

    def make(size: str, name: str = "disk") -> Path:
        target = tmp_path / name
        target.mkdir()
        _mount(target, "-t", "tmpfs", "-o", f"size={size}", "tmpfs")
        mounted.append(target)
        return target

    yield make
    for target in reversed(mounted):
        subprocess.run(["umount", "-l", str(target)], capture_output=True)


def _read_only(path: Path) -> None:
    _mount(path, "-o", "remount,ro")


def _log(tmp_path: Path) -> Path:
    from replay_support import HISTORIES

    logs = tmp_path / "logs" / "__consumer_offsets-0"
    logs.mkdir(parents=True)
    shutil.copy(HISTORIES / "history-assignment-batching-00000000000000000000.log", logs / "00000000000000000000.log")
    return logs.parent


def test_a_read_only_output_or_checkpoint_is_one_line_before_any_work(tmp_path, disk, capsys):
    log = _log(tmp_path)
    ro = disk("1m")
    (ro / "out" / "findings").mkdir(parents=True)
    _read_only(ro)
    for extra, what in (([], f"output {ro / 'out'}"),
                        (["--incremental", "--checkpoint", str(ro / "ck")], f"checkpoint {ro / 'ck'}")):
        output = ro / "out" if not extra else tmp_path / "out"
        code = main(["run", "--input", str(log), "--output", str(output), "--run-id", "r", *extra])
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1, err
        assert what in err and ("read-only file system" in err or "cannot be created" in err), err


def test_one_read_only_table_folder_is_seen_before_any_work(tmp_path, capsys):
    log = _log(tmp_path)
    table = tmp_path / "out" / "findings"
    table.mkdir(parents=True)
    _mount(table, "--bind", str(table))
    try:
        _read_only_bind = subprocess.run(["mount", "-o", "remount,bind,ro", str(table)], capture_output=True)
        if _read_only_bind.returncode != 0:
            pytest.skip("cannot remount a bind mount read-only here")
        code = main(["run", "--input", str(log), "--output", str(tmp_path / "out"), "--run-id", "r"])
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1, err
        assert f"output {tmp_path / 'out'}: {table} is on a read-only file system" in err, err
    finally:
        subprocess.run(["umount", "-l", str(table)], capture_output=True)


@pytest.mark.spark
@pytest.mark.slow
def test_a_disk_that_fills_in_the_write_stage_stops_the_run_in_one_line_and_frees_what_it_staged(
        spark, tmp_path, disk, capsys):
    from offsets_audit import sinks

    log = _log(tmp_path)
    small = disk("48k")
    output = small / "out"
    code = main(["run", "--input", str(log), "--output", str(output), "--run-id", "full"])
    err = [line for line in capsys.readouterr().err.splitlines() if not line.startswith("[offsets-audit] ")]
    assert code == 2, err
    assert len(err) == 1 and "the disk is full" in err[0] and "No space left on device" in err[0], err
    assert sinks.run_manifest(spark, str(output), "full") is None
    leftovers = [p for p in output.rglob("*") if p.name.startswith(("_staging-", ".summary", ".full"))]
    assert leftovers == []
    assert not (output / "_lease.json").exists()
