"""What an incremental checkpoint belongs to, and the pieces its published runs leave: another input, the same input
by another path, a runs.json gone or cut, a snapshot file deleted or altered, a committed micro-batch without its
outputs. Each is either the same input (read as such) or one line naming the damage and how to rebuild."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from offsets_audit import checkpoint
from offsets_audit.errors import UserError


def _segments(root: Path) -> dict:
    (root / "log" / "__consumer_offsets-0").mkdir(parents=True, exist_ok=True)
    return {"kind": "segments", "path": str(root / "log")}


def test_a_checkpoint_belongs_to_the_input_of_its_first_run_and_refuses_another(tmp_path):
    ck = str(tmp_path / "ck")
    source = _segments(tmp_path)
    identity = checkpoint.claim(ck, source, [])
    assert identity == {"kind": "segments", "path": os.path.realpath(tmp_path / "log")}
    assert json.loads((tmp_path / "ck" / checkpoint.CHECKPOINT_FILE).read_text())["source"] == identity
    (tmp_path / "other" / "__consumer_offsets-0").mkdir(parents=True)
    with pytest.raises(UserError) as refused:
        checkpoint.claim(ck, {"kind": "segments", "path": str(tmp_path / "other")}, [])
    message = str(refused.value)
    assert f"checkpoint {ck} belongs to input segments {os.path.realpath(tmp_path / 'log')}, not to segments " \
           f"{os.path.realpath(tmp_path / 'other')}" in message
    assert "pass the checkpoint of this input, or a new --checkpoint" in message
    with pytest.raises(UserError, match="belongs to input segments"):
        checkpoint.claim(ck, {"kind": "parquet", "path": str(tmp_path / "log")}, [])


def test_the_same_input_by_a_relative_path_or_a_link_is_the_same_input(tmp_path, monkeypatch):
    ck = str(tmp_path / "ck")
    checkpoint.claim(ck, _segments(tmp_path), [])
    monkeypatch.chdir(tmp_path)
    assert checkpoint.claim(ck, {"kind": "segments", "path": "log"}, [])["path"] == os.path.realpath(tmp_path / "log")
    os.symlink(tmp_path / "log", tmp_path / "current")
    checkpoint.claim(ck, {"kind": "segments", "path": "current/"}, [])
    assert checkpoint.resolved_source({"kind": "segments", "path": "current"})["path"] == \
        os.path.realpath(tmp_path / "log")


def test_a_live_cluster_is_known_by_its_brokers_and_topics(tmp_path):
    ck = str(tmp_path / "ck")
    a = {"kind": "kafka", "kafka.bootstrap.servers": "b1:9092,b2:9092"}
    checkpoint.claim(ck, a, [])
    checkpoint.claim(ck, {"kind": "kafka", "kafka.bootstrap.servers": "b2:9092,b3:9092"}, [])  # one broker shared
    with pytest.raises(UserError, match=r"belongs to input kafka b1:9092,b2:9092 \(__consumer_offsets\), not to "
                                        r"kafka c1:9092"):
        checkpoint.claim(ck, {"kind": "kafka", "kafka.bootstrap.servers": "c1:9092"}, [])
    with pytest.raises(UserError, match="belongs to input kafka"):
        checkpoint.claim(ck, {**a, "assign": '{"__consumer_offsets": [0]}'}, [])


def test_streaming_state_without_a_record_of_its_input_is_damage(tmp_path):
    (tmp_path / "ck" / "fold" / "commits").mkdir(parents=True)
    with pytest.raises(UserError) as refused:
        checkpoint.claim(str(tmp_path / "ck"), _segments(tmp_path), [])
    assert "is damaged: it holds streaming state (fold/)" in str(refused.value)
    assert "move" in str(refused.value) and "batch run" in str(refused.value)


def test_runs_json_missing_cut_or_older_than_published_is_damage(tmp_path):
    ck = str(tmp_path / "ck")
    checkpoint.claim(ck, _segments(tmp_path), [])
    assert checkpoint.read_runs(ck) == []
    runs = [{"run_id": "night-1", "fold": [0, 0], "records": [0, 0]}]
    (tmp_path / "ck" / checkpoint.RUNS_FILE).write_text(json.dumps(runs))
    checkpoint.published(ck, 1)
    assert checkpoint.read_runs(ck) == runs
    (tmp_path / "ck" / checkpoint.RUNS_FILE).write_text(json.dumps(runs)[:20])
    with pytest.raises(UserError, match="runs.json is not valid JSON"):
        checkpoint.read_runs(ck)
    (tmp_path / "ck" / checkpoint.RUNS_FILE).write_text("[]")
    with pytest.raises(UserError, match="lists 0 run"):
        checkpoint.read_runs(ck)
    (tmp_path / "ck" / checkpoint.RUNS_FILE).unlink()
    with pytest.raises(UserError, match="runs.json is missing but checkpoint.json says 1 run"):
        checkpoint.read_runs(ck)
    (tmp_path / "ck" / checkpoint.CHECKPOINT_FILE).write_text("{")
    with pytest.raises(UserError, match="checkpoint.json is not valid JSON"):
        checkpoint.read_runs(ck)


def _published_run(root: Path, run_id: str, fold: list, records: list, chain: list) -> dict:
    for run in chain:
        (root / "compact" / f"run={run}" / "rows" / "kind=state").mkdir(parents=True, exist_ok=True)
        (root / "compact" / f"run={run}" / "rows" / "kind=state" / "part-0.parquet").write_bytes(b"state " + run.encode())
    (root / "rebalances" / f"run={run_id}").mkdir(parents=True)
    (root / "rebalances" / f"run={run_id}" / "part-0.parquet").write_bytes(b"rebalances")
    for batch in range(fold[0], fold[1] + 1):
        (root / "fold_rows" / f"batch={batch}").mkdir(parents=True)
        (root / "fold_rows" / f"batch={batch}" / "part-0.parquet").write_bytes(b"rows %d" % batch)
        (root / "fold_rows" / f"batch={batch}" / "_SUCCESS").write_bytes(b"")
    for batch in range(records[0], records[1] + 1):
        (root / "counts").mkdir(exist_ok=True)
        (root / "counts" / f"batch={batch}.json").write_text("{}")
    entry = {"run_id": run_id, "fold": fold, "records": records, "chain": chain}
    entry["pieces"] = checkpoint.pieces(str(root), entry)
    return entry


def test_a_piece_deleted_cut_or_altered_since_its_run_was_published_is_refused_by_name(tmp_path):
    root = tmp_path / "ck"
    runs = checkpoint.published_entry([], _published_run(root, "night-1", [0, 1], [0, 1], ["night-1"]))
    runs = checkpoint.published_entry(runs, _published_run(root, "night-2", [2, 2], [2, 2], ["night-1", "night-2"]))
    assert set(runs[-1]["pieces"]["state"]) == {"compact/run=night-1/rows/kind=state/part-0.parquet",
                                                "compact/run=night-2/rows/kind=state/part-0.parquet",
                                                "rebalances/run=night-2/part-0.parquet"}
    assert set(runs[-1]["pieces"]["batches"]) == {"fold_rows/batch=2/part-0.parquet", "fold_rows/batch=2/_SUCCESS",
                                                  "counts/batch=2.json"}
    checkpoint.verify(str(root), runs, rerun=False)
    checkpoint.verify(str(root), runs, rerun=True)

    state = root / "compact" / "run=night-2" / "rows" / "kind=state" / "part-0.parquet"
    state.write_bytes(b"state night-3")  # same size, other bytes
    with pytest.raises(UserError, match=r"compact/run=night-2/rows/kind=state/part-0.parquet was altered"):
        checkpoint.verify(str(root), runs, rerun=False)
    checkpoint.verify(str(root), runs, rerun=True)  # a rerun of night-2 resumes from night-1's state
    state.write_bytes(b"st")
    with pytest.raises(UserError, match="has 2 bytes, 13 when its run was published"):
        checkpoint.verify(str(root), runs, rerun=False)
    state.unlink()
    with pytest.raises(UserError, match="part-0.parquet is missing; rebuild it: move"):
        checkpoint.verify(str(root), runs, rerun=False)

    state.write_bytes(b"state night-2")
    checkpoint.verify(str(root), runs, rerun=False)
    (root / "counts" / "batch=2.json").unlink()  # a rerun of night-2 reads its micro-batches again
    with pytest.raises(UserError, match="counts/batch=2.json is missing"):
        checkpoint.verify(str(root), runs, rerun=True)
    (root / "rebalances" / "run=night-1" / "part-0.parquet").unlink()  # an older run's stored rebalances
    with pytest.raises(UserError, match="rebalances/run=night-1/part-0.parquet is missing"):
        checkpoint.verify(str(root), runs, rerun=False)


def test_a_committed_micro_batch_without_its_outputs_is_refused(tmp_path):
    root = tmp_path / "ck"
    (root / "fold" / "commits").mkdir(parents=True)
    for batch in (0, 1, 2):
        (root / "fold" / "commits" / str(batch)).write_text("v1")
    checkpoint.check_batches(str(root), 1, 0, [1, 2], [])
    with pytest.raises(UserError, match=r"micro-batch 2 of the fold query is committed but its outputs "
                                        r"\(fold_rows/batch=2\) are missing"):
        checkpoint.check_batches(str(root), 1, 0, [1], [])


def test_spark_failures_on_the_streaming_state_become_one_line(tmp_path):
    ck = str(tmp_path / "ck")
    exc = RuntimeError(f"java.io.IOException: Incomplete log file in the offset commit log: {ck}/fold/commits/3\n"
                       "\tat org.apache.spark...")
    refusal = checkpoint.damaged_checkpoint(ck, exc)
    assert str(refusal).startswith(f"checkpoint {ck} is damaged: Spark could not resume its streaming state "
                                   "(fold/commits/3); rebuild it")
    assert checkpoint.damaged_checkpoint(ck, RuntimeError("Python worker exited unexpectedly")) is None


# -- through the command line: one line, exit 2, nothing read -------------------------------------------------------

def _cli(*args: str) -> list[str]:
    return ["run", "--incremental", *args]


def test_the_command_line_refuses_another_input_and_a_lost_runs_json_in_one_line(tmp_path, capsys, monkeypatch):
    from offsets_audit.cli import main

    a, b = _segments(tmp_path / "a"), _segments(tmp_path / "b")
    ck = tmp_path / "ck"
    checkpoint.claim(str(ck), a, [])
    code = main(_cli("--checkpoint", str(ck), "--input", b["path"], "--output", str(tmp_path / "out")))
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "belongs to input segments" in err, err

    # the same input by a relative path is the same input: the run goes past the check (and stops on what follows)
    (ck / checkpoint.RUNS_FILE).write_text(json.dumps([{"run_id": "night-1", "fold": [0, 0], "records": [0, 0]}]))
    checkpoint.published(str(ck), 1)
    (ck / checkpoint.RUNS_FILE).unlink()
    monkeypatch.chdir(tmp_path / "a")
    code = main(_cli("--checkpoint", str(ck), "--input", "log", "--output", str(tmp_path / "out")))
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert "is damaged: runs.json is missing but checkpoint.json says 1 run(s) were published" in err, err
