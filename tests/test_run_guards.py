"""Mistakes and situations an operator meets before any Spark work, each one line and exit 2: a run id that would
write outside the output or hide its manifest, a second run of an output another run holds, an input with no
records given to the gate; and a log dir whose partition folders are symbolic links is read whole."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from offsets_audit.cli import main
from offsets_audit.errors import UserError
from offsets_audit.sinks import check_run_id

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("run_id", ["../../../esc", "a/b", ".hidden", "-x", "a..b", "nightly 1", "x" * 129, "",
                                    "2026-11-22T03:00"])
def test_a_run_id_that_cannot_name_files_is_refused(run_id):
    with pytest.raises(UserError, match="cannot name the run's files; use letters, digits"):
        check_run_id(run_id)


@pytest.mark.parametrize("run_id", ["2026-11-22", "night_1", "a.b-c", "20261122", 20261122])
def test_safe_run_ids_pass(run_id):
    assert check_run_id(run_id) == str(run_id)


def test_run_with_an_escaping_run_id_writes_nothing_and_says_one_line(tmp_path, capsys):
    (tmp_path / "log").mkdir()
    code = main(["run", "--input", str(tmp_path / "log"), "--output", str(tmp_path / "out" / "tables"),
                 "--run-id", "../../../esc"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "run id '../../../esc' cannot name the run's files" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log"]


def _segments(tmp_path: Path) -> Path:
    from offsets_audit.simulate import simulate

    simulate(tmp_path / "sim", groups=2, hours=0.02, partitions=3, seed=5, formats=("segments",))
    return tmp_path / "sim" / "segments"


def test_a_log_dir_of_symlinked_partition_folders_is_read_whole(tmp_path):
    from offsets_audit.sources.segments import scan_segments

    real = _segments(tmp_path)
    expected = sorted((Path(f.path).parent.name, Path(f.path).name, f.partition) for f in scan_segments(real).files)
    assert len({p for p, _, _ in expected}) >= 2
    linked = tmp_path / "linked"
    linked.mkdir()
    for folder in sorted(real.iterdir()):
        os.symlink(folder, linked / folder.name)
    listed = sorted((Path(f.path).parent.name, Path(f.path).name, f.partition) for f in scan_segments(linked).files)
    assert listed == expected
    # one linked among real ones, and a link back to the log dir itself (a cycle): each file once
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    folders = sorted(real.iterdir())
    os.symlink(folders[0], mixed / folders[0].name)
    for folder in folders[1:]:
        shutil.copytree(folder, mixed / folder.name)
    os.symlink(mixed, mixed / "loop")
    listed = sorted((Path(f.path).parent.name, Path(f.path).name, f.partition) for f in scan_segments(mixed).files)
    assert listed == expected


def test_the_gate_refuses_an_input_with_no_records_before_spark(tmp_path, capsys):
    from offsets_audit.commands.check import refuse_empty_input

    (tmp_path / "empty").mkdir()
    code = main(["check", "--input", str(tmp_path / "empty"), "--output", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert f"the input {tmp_path / 'empty'} holds no segment file: there is nothing to audit" in err
    assert "check.fail_on_empty: false" in err
    (tmp_path / "empty" / "__consumer_offsets-0").mkdir()
    (tmp_path / "empty" / "__consumer_offsets-0" / "00000000000000000000.log").write_bytes(b"")
    with pytest.raises(UserError, match="holds 1 empty segment file"):
        refuse_empty_input({"kind": "segments", "path": str(tmp_path / "empty")})
    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp_path / "dump").mkdir()
    pq.write_table(pa.table({"key": pa.array([], pa.binary())}), tmp_path / "dump" / "part-0.parquet")
    with pytest.raises(UserError, match="holds no rows"):
        refuse_empty_input({"kind": "parquet", "path": str(tmp_path / "dump")})
    refuse_empty_input({"kind": "segments", "path": str(_segments(tmp_path))})


def test_a_second_run_of_an_output_another_run_holds_stops_before_spark(tmp_path, capsys):
    output = tmp_path / "out"
    code = textwrap.dedent(f"""
        import sys
        from offsets_audit import lease
        lease.acquire({str(output)!r}, "night-1")
        print("held", flush=True)
        sys.stdin.read()
    """)
    env = dict(os.environ, PYTHONPATH=str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    holder = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                              env=env)
    try:
        assert holder.stdout.readline().strip() == "held"
        (tmp_path / "log").mkdir()
        exit_code = main(["run", "--input", str(tmp_path / "log"), "--output", str(output), "--run-id", "night-2"])
        err = capsys.readouterr().err
        assert exit_code == 2 and err.count("\n") == 1, err
        assert f"output {output} is in use by run night-1 (pid {holder.pid} on host" in err
        for checkpointed in (["--incremental", "--checkpoint", str(output)],):
            exit_code = main(["run", "--input", str(tmp_path / "log"), "--output", str(tmp_path / "other"),
                              "--run-id", "night-2", *checkpointed])
            err = capsys.readouterr().err
            assert exit_code == 2 and f"checkpoint {output} is in use by run night-1" in err, err
    finally:
        holder.stdin.close()
        holder.wait()


def test_a_live_read_that_can_read_nothing_is_refused_before_spark(tmp_path, capsys):
    config = tmp_path / "live.yaml"
    config.write_text("source:\n  kind: kafka\n  options:\n    startingOffsets: latest\n")
    code = main(["run", "--config", str(config), "--bootstrap-server", "127.0.0.1:9", "--output", str(tmp_path / "o"),
                 "--incremental", "--checkpoint", str(tmp_path / "ck")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "startingOffsets=latest reads nothing" in err, err
