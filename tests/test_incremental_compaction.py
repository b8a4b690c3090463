"""Compaction: after a run is published, later runs read its compact snapshot (each group's newest state, members
and audit state, every rebalance, the provisional tail, where quarantined rows lie) plus their own micro-batches,
and the micro-batch folders no later run reads are gone. A rerun of the last run id (from the snapshot of the run
before it) and a run with nothing new give the same tables as before."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from growing_log import batch_cuts, grow as grow_log
from test_incremental_parity import _config, _rows

TABLES = ("findings", "provisional_findings", "rebalances", "provisional_rebalances", "group_state", "members",
          "offsets", "latency_daily", "assignor_audit", "provisional_assignor_audit", "quarantine")


def _batch_ids(folder: Path) -> list[int]:
    return sorted(int(p.name.split("=")[1].split(".")[0]) for p in folder.iterdir() if p.name.startswith("batch="))


def _tables(spark, output: Path, run_id: str) -> dict:
    from offsets_audit import sinks

    return {name: _rows(sinks.read_table(spark, str(output), name, run_id, "parquet")) for name in TABLES}


def _stored_rebalances(spark, checkpoint: Path) -> list[str]:
    return sorted(r["payload"] for r in spark.read.parquet(str(checkpoint / "rebalances")).collect())


@pytest.fixture(scope="module")
def sliced(tmp_path_factory):
    from offsets_audit.simulate import FAULT_KINDS, simulate

    root = tmp_path_factory.mktemp("incremental-compaction")
    info = simulate(root / "sim", groups=5, hours=0.1, seed=3, partitions=2, faults=list(FAULT_KINDS),
                    segment_bytes=64 * 1024, formats=("segments",))
    return root, root / "sim" / "segments", {"broker": {"group_overrides": info["group_overrides"]}}


@pytest.mark.spark
@pytest.mark.full  # several incremental runs in a row; the snapshot chain is in the default suite by test_incremental_parity
def test_old_micro_batches_are_compacted_away_and_a_rerun_of_the_last_run_gives_the_same_tables(spark, sliced):
    from offsets_audit.incremental import run_incremental

    root, segments, overrides = sliced
    cuts = batch_cuts(segments)
    live, output, checkpoint = root / "live", root / "out", root / "checkpoint"
    summaries = []
    for i in (1, 2):
        grow_log(cuts, live, i, 2)
        summaries.append(run_incremental(spark, _config(live, output, f"night-{i}", overrides), str(checkpoint),
                                         progress=False))
    assert summaries[0].stages["history"].endswith("(no compact snapshot yet)")
    assert summaries[1].stages["history"].startswith("compact snapshot of run night-1")
    runs = json.loads((checkpoint / "runs.json").read_text())
    assert [r["compact"] for r in runs] == [True, True]
    assert [r["chain"] for r in runs] == [["night-1"], ["night-1", "night-2"]]  # night-2's snapshot is a delta
    assert summaries[1].stages["snapshot"].startswith("delta on run night-1")
    # only the last run's micro-batches are left (a rerun of it reads them again), and the last two snapshots
    assert _batch_ids(checkpoint / "fold_rows") and min(_batch_ids(checkpoint / "fold_rows")) >= runs[-1]["fold"][0]
    assert min(_batch_ids(checkpoint / "counts")) >= runs[-1]["records"][0]
    if (checkpoint / "quarantine").is_dir():
        assert all(b >= runs[-1]["records"][0] for b in _batch_ids(checkpoint / "quarantine"))
    assert sorted(p.name for p in (checkpoint / "compact").iterdir()) == ["run=night-1", "run=night-2"]
    first = _tables(spark, output, "night-2")

    rerun = run_incremental(spark, _config(live, output, "night-2", overrides), str(checkpoint), progress=False)
    assert rerun.stages["history"].startswith("compact snapshot of run night-1")
    assert _tables(spark, output, "night-2") == first

    # A snapshot written before the rebalance store and the chains held every completed rebalance as
    # rows/kind=rebalance: make night-2's so (a full snapshot of every group, its store folder moved into it, its
    # runs.json entry as older code wrote it); the next run writes a full snapshot and moves the rebalances into
    # the store, none lost.
    stored = _stored_rebalances(spark, checkpoint)
    assert stored
    legacy = checkpoint / "compact" / "run=night-2-full"
    from offsets_audit.replay import streaming

    chain = streaming.history_rows(spark, str(checkpoint), ["night-1", "night-2"], [], [])
    full = streaming.compact_rows(chain, streaming.latest_tails(chain).select(
        streaming.renamed_kinds({v: k for k, v in streaming.TAIL_KINDS.items()}).alias("kind"),
        "group_id", "payload"), False, -1)
    full.unionByName(spark.read.parquet(str(checkpoint / "rebalances" / "run=night-2")).select(
        "group_id", "payload", "batch", F.lit("rebalance").alias("kind"))).write.partitionBy("kind").parquet(
        str(legacy / "rows"))
    spark.read.parquet(str(checkpoint / "compact" / "run=night-2" / "gaps")).write.parquet(str(legacy / "gaps"))
    shutil.rmtree(checkpoint / "compact" / "run=night-2")
    legacy.rename(checkpoint / "compact" / "run=night-2")
    shutil.rmtree(checkpoint / "rebalances" / "run=night-2")
    runs = json.loads((checkpoint / "runs.json").read_text())
    del runs[-1]["chain"], runs[-1]["tail_settings"], runs[-1]["pieces"]
    (checkpoint / "runs.json").write_text(json.dumps(runs))
    idle = run_incremental(spark, _config(live, output, "night-3", overrides), str(checkpoint), progress=False)
    assert _stored_rebalances(spark, checkpoint) == stored
    assert idle.stages["snapshot"].startswith("full")
    assert not (checkpoint / "compact" / "run=night-3" / "rows" / "kind=rebalance").exists()
    assert idle.stages["replay"].startswith("skipped")
    assert idle.stages["provisional"] == "recomputed for every group"  # the legacy entry has no settings key
    again = _tables(spark, output, "night-3")
    for name in ("provisional_findings", "provisional_rebalances", "group_state", "members", "offsets",
                 "provisional_assignor_audit"):
        assert again[name] == first[name], name
    for name in ("findings", "rebalances", "assignor_audit", "quarantine"):
        assert again[name] == [], name
    assert sorted(p.name for p in (checkpoint / "compact").iterdir()) == ["run=night-2", "run=night-3"]

    # Nothing new again: every group's tail is carried (the clock did not move), the snapshot is a delta.
    idle = run_incremental(spark, _config(live, output, "night-4", overrides), str(checkpoint), progress=False)
    assert idle.stages["provisional"].startswith("carried")
    assert idle.stages["snapshot"].startswith("delta on run night-3")
    assert _tables(spark, output, "night-4") == again
    assert sorted(p.name for p in (checkpoint / "compact").iterdir()) == ["run=night-3", "run=night-4"]
