"""A run with nothing new takes its tables and the state it leaves from the last published run instead of auditing
again (``incremental.idle_run_carries``): its tables, the state it leaves and the next run's tables are those of a
run that audits again."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from growing_log import batch_cuts, grow as grow_log
from test_incremental_parity import _config, _rows, faulted  # noqa: F401 - the module's history fixture

#: The checkpoint's per-run state folders an idle run leaves for the next.
STATE_FOLDERS = ("offset_rules", "assignor_state", "coordinator_costs", "coordinator_runs")


def _tables(spark, output: Path, run_id: str, names=None) -> dict:
    from offsets_audit import sinks
    from offsets_audit.tables import without_measured

    manifest = sinks.run_manifest(spark, str(output), run_id)
    assert manifest is not None
    return {name: _rows(without_measured(sinks.read_table(spark, str(output), name, run_id, "parquet"), name))
            for name in names or manifest["tables"]}


def _state(spark, checkpoint: Path, run_id: str) -> dict:
    """The rows of the state folders the run left, its compact snapshot's tails as a later run reads them, and its
    runs.json entry but for the checksums of the files it lists."""
    from offsets_audit.replay import streaming

    out: dict = {}
    for folder in STATE_FOLDERS:
        root = checkpoint / folder / f"run={run_id}"
        parts = [root] if list(root.glob("*.parquet")) else sorted(p for p in root.iterdir() if p.is_dir())
        for part in parts:
            df = spark.read.parquet(str(part))
            out[f"{folder}/{part.name}"] = _rows(df, drop=[c for c in df.columns if c == "rerun_cpu_ms"])
    runs = json.loads((checkpoint / "runs.json").read_text())
    chain = streaming.snapshot_chain(runs)
    tails = streaming.latest_tails(streaming.history_rows(spark, str(checkpoint), chain, [], []))
    out["tails"] = _rows(tails, drop=["batch"])  # a recomputed tail carries its run's sequence
    out["entry"] = {k: v for k, v in runs[-1].items() if k != "pieces"}
    return out


def _query_checkpoints(checkpoint: Path) -> dict:
    """Every file of the streaming queries' own checkpoints (offsets, commits, state store), by path."""
    from offsets_audit.replay import streaming

    return {str(p.relative_to(checkpoint)): p.read_bytes() for query in streaming.QUERIES
            for p in sorted((checkpoint / query).rglob("*")) if p.is_file()}


def _data_files(partition: Path) -> list[bytes]:
    """The contents of a table partition's Parquet files."""
    return sorted(p.read_bytes() for p in partition.glob("*.parquet"))


def _summary(summary) -> dict:
    """A run's summary but for its timings and how its provisional rows were made."""
    out = summary.as_dict()
    out.pop("timings_s")
    out["stages"].pop("provisional")
    return out


def _saved(root: Path, name: str) -> Path:
    saved = root / name
    shutil.rmtree(saved, ignore_errors=True)
    for part in ("checkpoint", "out"):
        shutil.copytree(root / part, saved / part)
    return saved


def _restore(root: Path, saved: Path) -> None:
    for part in ("checkpoint", "out"):
        shutil.rmtree(root / part)
        shutil.copytree(saved / part, root / part)


@pytest.mark.spark
@pytest.mark.full  # five incremental runs; the default suite's nightly gate runs an idle night on the same history
def test_a_run_with_nothing_new_writes_what_auditing_again_writes(spark, faulted, tmp_path, monkeypatch):  # noqa: F811
    from offsets_audit import incremental
    from offsets_audit.incremental import run_incremental
    from offsets_audit.replay import streaming

    _, segments, overrides = faulted
    cuts = batch_cuts(segments)
    live, output, checkpoint = tmp_path / "live", tmp_path / "out", tmp_path / "checkpoint"

    def run(run_id: str):
        return run_incremental(spark, _config(live, output, run_id, overrides), str(checkpoint), progress=False)

    # half of every partition, and all of the one ending in the offset faults (their open transactions)
    grow_log(cuts, live, 1, 2)
    grow_log(cuts, live, 2, 2, only={f for f in cuts if f.name == "__consumer_offsets-3"})
    run("night-1")
    first = _saved(tmp_path, "after-night-1")

    with monkeypatch.context() as patched:
        patched.setattr(incremental, "idle_run_carries", lambda settings, covered: False)
        patched.setattr(streaming, "nothing_past_committed", lambda source, checkpoint: False)
        audited = run("night-2")
    assert audited.stages["provisional"].startswith("carried from the last run (nothing new)")
    assert "fold+audit" in audited.timings_s and "offsets" in audited.timings_s, "the queries ran and found nothing"
    expected_tables, expected_state = _tables(spark, output, "night-2"), _state(spark, checkpoint, "night-2")
    expected_queries = _query_checkpoints(checkpoint)
    audited_again = _saved(tmp_path, "after-audited-night-2")

    _restore(tmp_path, first)
    with monkeypatch.context() as patched:  # its summary's figures come from the files, with no Spark job
        patched.setattr(incremental, "run_figures", lambda frames: pytest.fail("figures computed by Spark"))
        carried = run("night-2")
    assert carried.stages["provisional"].startswith("carried from the last run (nothing new, the clock did not move)")
    assert carried.stages["snapshot"].startswith("delta on run night-1")
    assert "fold+audit" not in carried.timings_s and "offsets" not in carried.timings_s, "no query started"
    assert _query_checkpoints(checkpoint) == expected_queries
    tables = _tables(spark, output, "night-2")
    assert set(tables) == set(expected_tables)
    assert expected_tables["provisional_rebalances"] and expected_tables["coordinator_load"]
    assert expected_tables["provisional_findings"], "the offset faults' open transactions"
    for name in expected_tables:
        assert tables[name] == expected_tables[name], name
    for name in incremental.COPIED_TABLES:  # copied as files from the last run, not written again
        night_1 = _data_files(first / "out" / name / "run_id=night-1")
        assert night_1 and _data_files(output / name / "run_id=night-2") == night_1, name
    # the rebalances it has open are the last run's, whose days its latency_daily covers (read from their files)
    assert tables["provisional_rebalances"] == _tables(spark, output, "night-1", ["provisional_rebalances"])[
        "provisional_rebalances"]
    assert _state(spark, checkpoint, "night-2") == expected_state
    assert _summary(carried) == _summary(audited)

    # the next run, with new records, gives the same tables after either
    grow_log(cuts, live, 2, 2)
    assert "fold+audit" in run("night-3").timings_s, "new records: the queries read them"
    after_carried = _tables(spark, output, "night-3")
    _restore(tmp_path, audited_again)
    run("night-3")
    assert after_carried == _tables(spark, output, "night-3")
    assert after_carried["findings"] or after_carried["rebalances"]
