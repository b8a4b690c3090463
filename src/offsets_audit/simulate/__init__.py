"""Workload simulator: realistic generated ``__consumer_offsets`` histories with known faults.

``simulate(out, groups=20, hours=1.0, seed=7, ...)`` writes under ``out``:

* ``segments/__consumer_offsets-N/<20-digit base offset>.log``: real magic-2 record batches, one per
  coordinator append, groups placed on partitions by Kafka's ``abs(groupId.hashCode()) % partitions``;
* ``parquet/partition=N/part-00000.parquet``: the same records with ``SOURCE_SCHEMA`` columns;
* ``faults.json``: the injected faults (group, kind, partition, offset, details);
* ``model_state.json``: the simulator's own final view per group, to check a replay against;
* ``group_configs.json``: ``{group_id: {"assignment_interval_ms": N}}`` for the groups whose KIP-1263
  assignment interval differs from the broker default (group configs are not records; the audit takes
  this mapping as ``broker.group_overrides``, and the summary returns it as ``group_overrides``);
* ``topics.json``: the cluster's topics (ids, partition counts, streams changelogs), a topic-metadata
  snapshot in the ``capture-topics`` layout for the assignor audit (``topic_metadata.path``).

Same seed and options give identical bytes, whatever the number of worker processes.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from offsets_audit.assignors.topic_metadata import write_topics
from offsets_audit.simulate.scenarios import (
    BROKER_ASSIGNMENT_INTERVAL_MS, FAULT_KINDS, SimConfig, plan_groups, simulate_partition, topic_catalog,
)

__all__ = ["simulate", "FAULT_KINDS", "SimConfig"]


def _run_partition(args) -> dict:
    from offsets_audit.simulate.writer import PartitionWriter, surviving_offsets

    cfg, partition, out, formats, compression, segment_bytes, compact = args
    plans = plan_groups(cfg)
    topics = topic_catalog(cfg)
    keep = None
    if compact:
        keep = surviving_offsets(simulate_partition(cfg, partition, plans, topics, {}))
    states: dict = {}
    writer = PartitionWriter(Path(out), partition, formats, compression, segment_bytes, keep)
    try:
        for append in simulate_partition(cfg, partition, plans, topics, states):
            writer.write(append)
    finally:
        writer.close()
    return {"partition": partition, "records": writer.records, "batches": writer.batches,
            "log_end_offset": writer.next_offset, "faults": writer.faults, "states": states}


def simulate(out, groups: int = 20, hours: float = 1.0, seed: int = 7, partitions: int = 50, faults=(),
             formats=("segments", "parquet"), compression: str = "none", workers: int = 1,
             segment_bytes: int = 64 * 1024 * 1024, compact: bool = False,
             commit_interval_ms: int = 5000, hog_members: int = 0, hog_partitions: int = 600,
             hog_churn_mean_ms: int = 2000, hog_interval_ms: int = 0) -> dict:
    """Generate a history into ``out``; returns a summary (records, batches, partitions, faults, seconds)."""
    started = time.perf_counter()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    cfg = SimConfig(groups=groups, hours=hours, seed=seed, partitions=partitions, faults=tuple(faults),
                    commit_interval_ms=commit_interval_ms, hog_members=hog_members, hog_partitions=hog_partitions,
                    hog_churn_mean_ms=hog_churn_mean_ms, hog_interval_ms=hog_interval_ms)
    plans = plan_groups(cfg)
    used = sorted({p.partition for p in plans})
    jobs = [(cfg, p, str(out), tuple(formats), compression, segment_bytes, compact) for p in used]
    if workers > 1 and len(jobs) > 1:
        import multiprocessing

        with multiprocessing.get_context("fork").Pool(min(workers, len(jobs))) as pool:
            results = pool.map(_run_partition, jobs, chunksize=1)
    else:
        results = [_run_partition(job) for job in jobs]
    fault_list = [f for r in results for f in r["faults"]]
    states = {}
    for r in results:
        states.update(r["states"])
    kinds = {p.group_id: ("consumer" if p.kind == "hog" else p.kind, p.partition) for p in plans}
    for gid, state in states.items():
        state["kind"], state["partition"] = kinds[gid]
    topics = [{"topic_id": t.topic_id, "name": t.name, "partitions": t.partitions}
              for t in topic_catalog(cfg).values()]
    for _, state in sorted(states.items()):
        topics.extend(state.get("changelog_topics") or ())
    overrides = group_overrides(states)
    (out / "faults.json").write_text(json.dumps({"faults": fault_list}, indent=1, sort_keys=True))
    (out / "model_state.json").write_text(json.dumps(
        {"seed": seed, "groups": dict(sorted(states.items())), "topics": topics}, indent=1, sort_keys=True))
    (out / "group_configs.json").write_text(json.dumps(overrides, indent=1, sort_keys=True))
    write_topics(topics, out / "topics.json")
    return {"records": sum(r["records"] for r in results), "batches": sum(r["batches"] for r in results),
            "partitions": len(used), "groups": groups, "faults": len(fault_list),
            "seconds": round(time.perf_counter() - started, 2), "out": str(out),
            "group_overrides": overrides, "topics_path": str(out / "topics.json")}


def group_overrides(states: dict) -> dict:
    """``{group_id: {"assignment_interval_ms": N}}`` for the modern groups whose interval is not the broker's."""
    out = {}
    for group_id, state in sorted(states.items()):
        interval = state.get("assignment_interval_ms")
        if interval is not None and interval != BROKER_ASSIGNMENT_INTERVAL_MS:
            out[group_id] = {"assignment_interval_ms": interval}
    return out
