"""Incremental runs: replay and audit only what is new since the last run, state kept in a checkpoint.

``offsets-audit run --incremental --checkpoint PATH`` (``run_incremental``) is the nightly form of ``job.run_job``:
the replay's Structured Streaming queries (``replay.streaming``) read what arrived since the last run, and the
same ``transformWithStateInPandas`` processor that folds a group's records feeds the events it emits to the
group's resumable audit (``audit.engine.GroupAudit``), whose whole state sits in the same state store and is
committed with the same micro-batch. A rebalance that starts in one run and converges in the next is timed once,
and a finding is reported once, by the run whose records complete it.

What only the end of the log produces (``GroupAudit.finish``: a state still stuck, a rebalance still open,
the interval summary of ``assignment_interval_overridden``) is *provisional*: each run reports it in
``provisional_findings`` / ``provisional_rebalances`` for its own "now", from every group's stored audit state,
and the next run replaces it. So the findings (rebalances) of every run plus the last run's provisional ones
are, row for row and id for id, those of one batch run over the whole log.

Every run writes its tables through ``sinks.Output.write_run`` (under a path or by name) under its ``run_id`` (run manifest, every table even
when empty, a rerun of the run id replaces all it wrote), its HTML report and ``latency_daily``: the latency
summary of every day this run's rebalances touch, over all rebalances of those days so far. Which micro-batches
a run covers is kept in ``PATH/runs.json``: a run covers every batch since the last *published* run, so a run
killed before publishing is covered again by its rerun (with any run id); rerunning the last published run id
covers its batches again and replaces its tables.
"""
from __future__ import annotations

import base64
import hashlib
import json
import sys
import time
from dataclasses import dataclass
from typing import Any

import pandas as pd

from offsets_audit.audit.engine import GroupAudit
from offsets_audit.audit.latency import REBALANCE_COLUMNS
from offsets_audit.audit.model import FINDING_ROW_DDL
from offsets_audit.audit.offsets_spark import OFFSET_RULES
from offsets_audit.audit.spark import EVENT_RANK, REBALANCES_DDL, latency_summary, rebalance_causes
from offsets_audit import checkpoint as checkpoint_guard
from offsets_audit.errors import UserError
from offsets_audit.plans import materialize, plain_execution_for_a_small_log, side_by_side
from offsets_audit.replay import streaming
from offsets_audit.settings import Settings
from offsets_audit.sinks.summary import (
    IncrementalFacts,
    MicroBatches,
    RecordCounts,
    RunSummary,
    run_figures,
    write_summary,
)
from offsets_audit.spark_session import frees_its_plans
from offsets_audit.stages import RunStages

_ROWS_DDL = "kind string, group_id string, payload string"
#: Rule families the incremental audit does not evaluate (none: the offset rules run incrementally too,
#: ``audit.offsets_resumed``). A run on a checkpoint whose earlier runs kept no offset-rule state reports
#: the offset rules skipped in its summary (``skipped_rules``), never as zero findings.
SKIPPED_RULES: tuple[str, ...] = ()
RUNS_FILE = "runs.json"
#: The most members a group's timeline context rows list (``GroupTimeline.member_limit``). Beyond it an
#: incremental run's ``offset_commit_by_non_owner`` findings of the group name no members (a batch run, which can
#: walk the group again, names them) and the run says so once; the rows stay O(rebalances) instead of
#: O(member events x members).
TIMELINE_MEMBER_LIMIT = 100
#: The fold row kind that says a group's timeline stopped listing its members (payload: its member count then).
NOTE_KIND = "members_left_out"
#: ``PATH/offset_rules/run=<run_id>/<name>``: the offset rules' state a run leaves for the next.
OFFSET_STATE_FOLDER = "offset_rules"


class GroupAuditStep:
    """The fold processor's extension (``replay.streaming.fold_processor_class``): feeds the events the fold
    just emitted for a group to the group's ``GroupAudit`` and returns what the audit produced, as rows of kind
    ``finding``, ``rebalance``, ``context``, ``ownership`` (the offset rules' timeline), ``audit_state`` (the
    state as base64, for the provisional tail of the run) and, once per group, ``NOTE_KIND`` when its timeline
    stops listing its members (``TIMELINE_MEMBER_LIMIT``)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def __call__(self, group_id: str, rows: list[tuple], stored: bytes | None) -> tuple[list[tuple], bytes]:
        events = [json.loads(payload) for kind, _, payload in rows if kind == "event"]
        events.sort(key=lambda e: (e["partition"], e["offset"], EVENT_RANK.get(e["event"], 2)))
        audit = (GroupAudit.from_bytes(stored, self.settings) if stored is not None
                 else GroupAudit(group_id, self.settings, timeline=True, timeline_member_limit=TIMELINE_MEMBER_LIMIT,
                             what_if=True))
        timeline = audit.timeline
        if timeline is not None and timeline.member_limit is None:
            timeline.member_limit = TIMELINE_MEMBER_LIMIT  # a state stored before the limit: bounded from now on
        left_out_before = None if timeline is None else timeline.left_out_at
        audit.feed(events)
        findings, rebalances, context, ownership = audit.take()
        state = audit.to_bytes()
        out = [("finding", group_id, json.dumps(f.to_dict())) for f in findings]
        out += [("rebalance", group_id, json.dumps(r)) for r in rebalances]
        out += [("context", group_id, json.dumps(r)) for r in context]
        out += [("ownership", group_id, json.dumps(r)) for r in ownership]
        out.append(("audit_state", group_id, base64.b64encode(state).decode("ascii")))
        if timeline is not None and left_out_before is None and timeline.left_out_at is not None:
            out.append((NOTE_KIND, group_id, str(timeline.left_out_at)))
        return out, state


def warn_members_left_out(spark, checkpoint: str, fold_range: list[int], file=None) -> list[str]:
    """One warning line per group whose timeline stopped listing its members in ``fold_range`` (the fold wrote
    ``NOTE_KIND`` rows for it); returns the lines. The fold writes a kind's rows under their own folder, so a run
    without such a group looks at folders only and starts no Spark job."""
    from pyspark.sql import functions as F

    root = streaming.local_folder(checkpoint) / "fold_rows"
    if not any((root / f"batch={b}" / f"kind={NOTE_KIND}").is_dir() for b in fold_range):
        return []
    notes = (streaming.fold_rows(spark, checkpoint, fold_range).filter(F.col("kind") == NOTE_KIND)
             .select("group_id", "payload").collect())
    lines = [f"offsets-audit: warning: group {row['group_id']} reached {row['payload']} members, more than the "
             f"{TIMELINE_MEMBER_LIMIT} an incremental run's offset timeline lists: its offset_commit_by_non_owner "
             f"findings name no members (a batch run over the same log names them)" for row in notes]
    for line in lines:
        print(line, file=file or sys.stderr)
    return lines


def provisional_rows(rows, settings: Settings, end_time_ms: int | None, costs=None):
    """``finding`` / ``rebalance`` rows that the end of the log at ``end_time_ms`` would add, per group, from
    each group's newest stored audit state in ``rows`` (one row per group: O(groups), never O(records)), the
    group's ``whatif`` rows (``assignment_interval_whatif``, from the what-if history its state keeps, with its
    mean estimated time per assignor run from ``costs``, ``COST_DDL``), and a ``horizon`` row (payload: the clock
    in ms) for each group whose rows a later clock could change (``GroupAudit.provisional_until``; the what-if's
    rows while a bump is unanswered)."""
    from pyspark.sql import functions as F

    from offsets_audit.audit.coordinator_spark import coordinator_options
    from offsets_audit.audit.interval_whatif import depends_on_the_clock, what_if_rows_of_history

    latest = streaming.latest_per_group(rows, "audit_state").select("group_id", "payload")
    if costs is not None:
        latest = latest.join(costs.select("group_id", (F.col("estimated_ms") / F.col("timed_runs")).alias("run_ms")),
                             "group_id", "left")
    else:
        latest = latest.withColumn("run_ms", F.lit(None).cast("double"))
    options = coordinator_options(settings)

    def run(batches):
        for pdf in batches:
            out = []
            for group_id, payload, run_ms in zip(pdf["group_id"], pdf["payload"], pdf["run_ms"]):
                audit = GroupAudit.from_bytes(base64.b64decode(payload), settings)
                findings, rebalances, horizon = audit.provisional_until(end_time_ms)
                out += [("finding", group_id, json.dumps(f.to_dict())) for f in findings]
                out += [("rebalance", group_id, json.dumps(r)) for r in rebalances]
                if options.what_if and audit.what_if is not None:
                    whatif = what_if_rows_of_history(
                        audit.what_if.history(end_time_ms), settings.broker,
                        run_ms=None if pd.isna(run_ms) else float(run_ms), candidates=options.candidates_ms,
                        budget=options.budget)
                    out += [("whatif", group_id, json.dumps(r)) for r in whatif]
                    if end_time_ms is not None and depends_on_the_clock(whatif):
                        horizon = end_time_ms if horizon is None else min(horizon, end_time_ms)
                if horizon is not None:
                    out.append(("horizon", group_id, str(horizon)))
            yield pd.DataFrame(out, columns=["kind", "group_id", "payload"])

    return latest.mapInPandas(run, _ROWS_DDL)


def _tail_settings(settings: Settings) -> str:
    """What a group's provisional results depend on besides its audit state and the clock: the audit's
    settings. A run can carry the last run's tail of a group only when these are the same."""
    audited = {k: v for k, v in settings.as_dict().items() if k not in ("run_id", "output", "source", "spark")}
    if settings.topic_ids:
        audited["_topic_ids"] = dict(settings.topic_ids)
    return hashlib.sha256(json.dumps(audited, sort_keys=True, default=str).encode()).hexdigest()


def provisional_tail(history, new_rows, settings: Settings, clock: int | None, carry: bool, costs=None):
    """``(tail, how, due)``: the provisional ``finding`` / ``rebalance`` / ``horizon`` rows for ``clock``, what
    was done, and the groups recomputed (``group_id``; None when every group was).

    With ``carry`` (the last run's snapshot holds its tail, with horizons, for the same settings), only the
    groups whose tail can differ are recomputed: those with new audit state (``new_rows``; None when nothing is
    new) and those whose horizon the clock reached (a stuck-state or pending-transaction timer ran out, or one
    already out is measured to the new clock). Every other group's rows are carried from the snapshot: O(touched
    groups). Otherwise every group's newest audit state is deserialised and finished on a copy (O(groups))."""
    from pyspark.sql import functions as F

    if not carry or clock is None:
        return provisional_rows(history, settings, clock, costs), "recomputed for every group", None
    back = {new: old for old, new in streaming.TAIL_KINDS.items()}
    carried = streaming.latest_tails(history).select(
        streaming.renamed_kinds(back).alias("kind"), "group_id", "payload")
    due = carried.filter((F.col("kind") == "horizon") & (F.col("payload").cast("long") <= F.lit(clock))).select(
        "group_id")
    if new_rows is not None:
        due = due.unionByName(new_rows.filter(F.col("kind") == "audit_state").select("group_id"))
    due = due.distinct()
    recomputed = provisional_rows(history.join(due, "group_id", "left_semi"), settings, clock, costs)
    how = ("carried from the last run (nothing new), recomputed for any group whose timers the clock reached"
           if new_rows is None else
           "recomputed for the touched groups and those whose timers the clock reached, carried for the others")
    return carried.join(due, "group_id", "left_anti").unionByName(recomputed), how, due


def _findings(rows):
    from pyspark.sql import functions as F

    return (rows.filter(F.col("kind") == "finding").select(F.from_json("payload", FINDING_ROW_DDL).alias("f"))
            .select("f.*").withColumn("time", F.timestamp_millis(F.col("time"))))


def _rebalances(rows):
    from pyspark.sql import functions as F

    return (rows.filter(F.col("kind") == "rebalance").select(F.from_json("payload", REBALANCES_DDL).alias("r"))
            .select("r.*").select(*REBALANCE_COLUMNS))


# -- the assignor re-runs ----------------------------------------------------------------------------------

#: ``PATH/assignor_state/run=<run_id>/``: each group's resumable re-run state a run leaves for the next.
ASSIGNOR_STATE_FOLDER = "assignor_state"


def assignor_audit(spark, settings: Settings, checkpoint: str, runs: list[dict], fold_range: list[int],
                   history, offsets):
    """``(assignor_audit, provisional_assignor_audit, next_state, resumed)`` of the target assignments written in
    ``fold_range`` (``resumed``: the persisted re-run rows the others read); None when the assignor audit is off.

    Each group with new targets resumes its re-run state (``assignors.rerun.GroupRerun``: topic names learned so
    far, member order, previous target, the chain) from the last published run and re-runs only the new targets,
    plus any still waiting for a topic name (pending: provisional rows until a later target names it). Untouched
    groups' state is carried over as it is. A checkpoint whose last run kept no re-run state is resumed once
    from its recorded targets (``history``: ``replay.streaming.history_rows``, whose snapshot keeps the
    targets when its run kept no re-run state), keeping only the new targets' rows."""
    from pyspark.sql import functions as F

    from offsets_audit.assignors import spark as assignor_spark
    from offsets_audit.assignors.rerun import ASSIGNOR_AUDIT_COLUMNS, ASSIGNOR_AUDIT_DDL
    from offsets_audit.group_configs import assignor_choice
    if not settings.assignors.audit:
        return None
    topics = assignor_spark.topic_metadata(spark, settings)
    what_if = assignor_spark.what_if_assignors(settings)
    state = None
    resumed_from_targets = False
    if runs and runs[-1].get("assignor_state"):
        state = (spark.read.schema(assignor_spark.RERUN_STATE_DDL)
                 .parquet(f"{checkpoint}/{ASSIGNOR_STATE_FOLDER}/run={runs[-1]['run_id']}"))
    elif runs:
        resumed_from_targets = True
    targets = (history if resumed_from_targets else streaming.fold_rows(spark, checkpoint, fold_range)) \
        .filter(F.col("kind") == "target")
    choice = assignor_choice(settings.broker)
    resumed = assignor_spark.audit_resumed(targets, state, topics, what_if=what_if, offsets=offsets,
                                           default_consumer_assignor=choice["consumer"] or "uniform",
                                           streams_assignors=choice["streams"],
                                           kafka_version=settings.broker.kafka_version).persist()

    def rows(kind):
        found = (resumed.filter(F.col("kind") == kind).select(F.from_json("payload", ASSIGNOR_AUDIT_DDL).alias("r"))
                 .select(*[F.col(f"r.{c}") for c in ASSIGNOR_AUDIT_COLUMNS]))
        if resumed_from_targets:  # resumed from the recorded targets: keep only the new targets' rows
            new = streaming.parsed(streaming.fold_rows(spark, checkpoint, fold_range), "target",
                                            "group_id string, partition int, offset long")
            found = found.join(new.select("group_id", "partition", "offset"), ["group_id", "partition", "offset"],
                               "left_semi").select(*ASSIGNOR_AUDIT_COLUMNS)
        return found

    touched = resumed.filter(F.col("kind") == "state").select("group_id", "pending", "state")
    next_state = touched if state is None else state.join(touched.select("group_id"), "group_id",
                                                          "left_anti").unionByName(touched)
    return rows("rerun"), rows("provisional"), next_state, resumed


#: ``PATH/coordinator_costs/run=<run_id>/``: each group's assignor runs timed so far and their estimated coordinator
#: time, which the what-if divides into its mean time per run (``audit.coordinator_load.group_run_ms``).
COST_FOLDER = "coordinator_costs"
COST_DDL = "group_id string, timed_runs long, estimated_ms double"


def run_costs(spark, settings: Settings, checkpoint: str, runs: list[dict], resumed):
    """``COST_DDL`` rows over every run so far: the last published run's plus this run's timed re-runs (``resumed``),
    each estimated as the batch audit estimates it (``coordinator_load.runs_of``: an emptied group's assignment is
    not a run; a streams refinement that repeats its timestamp is counted here, where the batch leaves it out, so a
    streams group's mean can differ a little: a measured figure either way). None when the assignor audit is off
    (nothing is timed)."""
    from pyspark.sql import functions as F

    from offsets_audit.assignors.rerun import ASSIGNOR_AUDIT_TIMED_DDL
    from offsets_audit.audit.coordinator_spark import coordinator_options

    if resumed is None:
        return None
    factors = coordinator_options(settings).factors
    timed = (resumed.filter(F.col("kind") == "rerun").select(F.from_json("payload", ASSIGNOR_AUDIT_TIMED_DDL)
                                                             .alias("r"))
             .select("r.group_id", "r.assignor", "r.num_members", "r.rerun_cpu_ms")
             .filter(F.col("rerun_cpu_ms").isNotNull() & (F.coalesce(F.col("num_members"), F.lit(1)) != 0)))

    def estimate(batches):
        for pdf in batches:
            yield pd.DataFrame({"group_id": pdf["group_id"], "estimated_ms": [
                factors.of(a).estimate(float(ms)) for a, ms in zip(pdf["assignor"], pdf["rerun_cpu_ms"])]})

    new = (timed.mapInPandas(estimate, "group_id string, estimated_ms double").groupBy("group_id")
           .agg(F.count(F.lit(1)).alias("timed_runs"), F.sum("estimated_ms").alias("estimated_ms")))
    if runs and runs[-1].get("coordinator_costs"):
        earlier = spark.read.schema(COST_DDL).parquet(f"{checkpoint}/{COST_FOLDER}/run={runs[-1]['run_id']}")
        new = (earlier.unionByName(new).groupBy("group_id")
               .agg(F.sum("timed_runs").alias("timed_runs"), F.sum("estimated_ms").alias("estimated_ms")))
    return new.select(F.col("group_id"), F.col("timed_runs").cast("long"), F.col("estimated_ms").cast("double"))


#: ``PATH/coordinator_runs/run=<run_id>/``: every recorded target assignment so far as a coordinator run row
#: (``coordinator_load.RUN_DDL``: the target with its re-run's assignor, member count and time), from which each run
#: computes the whole log's ``coordinator_load``.
COORDINATOR_RUNS_FOLDER = "coordinator_runs"


def coordinator_runs(spark, checkpoint: str, runs: list[dict], target_assignments, resumed):
    """``RUN_DDL`` rows of every recorded target assignment so far, each with its re-run's assignor, member count
    and time: the last published run's stored rows plus this slice's targets, with this run's re-run rows
    (``resumed``, those still waiting for a topic's name included: a stored row whose target is re-run now takes
    its values). None when the last published run kept no run rows (its checkpoint's earlier runs predate them:
    the load of the minutes they covered is not known)."""
    from pyspark.sql import functions as F

    from offsets_audit.assignors.rerun import ASSIGNOR_AUDIT_TIMED_DDL
    from offsets_audit.audit.coordinator_load import RUN_DDL
    from offsets_audit.audit.coordinator_spark import run_rows

    stored = None
    if runs:
        if not runs[-1].get(COORDINATOR_RUNS_FOLDER):
            return None
        stored = spark.read.schema(RUN_DDL).parquet(
            f"{checkpoint}/{COORDINATOR_RUNS_FOLDER}/run={runs[-1]['run_id']}")
    reruns = None
    if resumed is not None:
        reruns = (resumed.filter(F.col("kind").isin("rerun", "provisional"))
                  .select(F.from_json("payload", ASSIGNOR_AUDIT_TIMED_DDL).alias("r")).select("r.*"))
    return run_rows(target_assignments, reruns, stored)


def coordinator_load(run_rows, group_state, settings: Settings, stages: RunStages):
    """``(load, hogged)``: the whole log's ``coordinator_load`` rows and ``coordinator_partition_hogged`` finding
    rows (``FINDING_ROW_DDL``, ``time`` in ms) up to this run, from every run row so far (``coordinator_runs``).

    A minute's load changes when a later slice of the log adds a run to it (a run's minute is its
    ``AssignmentTimestamp``, which need not be its record's), and the groups on a partition change with every
    group that joins it, so every run recomputes the whole table with the batch run's per-partition pass
    (``coordinator_spark.partition_pass``) and the current ``group_state``. A streams refinement that repeats its
    group's timestamp across a cut is left out by the pass itself, which sees the group's rows in log order. The
    findings cite minutes anywhere in the log, so they are provisional: the next run replaces them."""
    from pyspark.sql import functions as F

    from offsets_audit.audit.coordinator_load import LOAD_DDL
    from offsets_audit.audit.coordinator_spark import coordinator_options, partition_pass

    per_partition = stages.kept(partition_pass(run_rows, group_state, coordinator_options(settings)))
    load = (per_partition.filter(F.col("kind") == "load").select(F.from_json("payload", LOAD_DDL).alias("r"))
            .select("r.*"))
    hogged = (per_partition.filter(F.col("kind") == "finding")
              .select(F.from_json("payload", FINDING_ROW_DDL).alias("f")).select("f.*"))
    return load, hogged


def _whatif(tail):
    """``assignment_interval_whatif`` of the run: every group's rows at the run's clock (recomputed for the groups
    the run touched, carried for the others, as the provisional tail is) and the cluster's rows over them."""
    from pyspark.sql import functions as F

    from offsets_audit.audit.interval_whatif import WHATIF_DDL
    from offsets_audit.audit.spark import whatif_cluster

    rows = tail.filter(F.col("kind") == "whatif").select(F.from_json("payload", WHATIF_DDL).alias("r")).select("r.*")
    return rows.unionByName(whatif_cluster(rows))


def assignor_mismatches(audited, settings: Settings):
    """``assignor_mismatch`` finding rows (``FINDING_ROW_DDL``) of ``assignor_audit`` rows that did not match."""
    from pyspark.sql import functions as F

    from offsets_audit.audit.rules.assignor import assignor_findings

    rules = settings.rules
    if audited is None or not rules["assignor_mismatch"].enabled:
        return None

    def plain(value):
        if isinstance(value, (list, dict, str)) or value is None:
            return value
        if pd.isna(value):
            return None
        return value.item() if hasattr(value, "item") else value

    def run(batches):
        for pdf in batches:
            rows = [{k: plain(v) for k, v in r.items()} for r in pdf.to_dict("records")]
            yield pd.DataFrame([f.to_dict() for f in assignor_findings(rows, rules)],
                               columns=[c.split()[0] for c in FINDING_ROW_DDL.split(", ")])

    return audited.filter(F.col("match") == F.lit(False)).mapInPandas(run, FINDING_ROW_DDL)


# -- the offset rules -------------------------------------------------------------------------------------------

def _offset_state(spark, checkpoint: str, runs: list[dict]):
    """The offset rules' state the last published run left (``empty_state`` before the first run), or None when
    that run kept none (its checkpoint predates incremental offset rules: they cannot be resumed)."""
    from offsets_audit.audit.offsets_resumed import OFFSET_STATE_DDLS, empty_state

    if not runs:
        return empty_state(spark)
    if not runs[-1].get("offset_rules"):
        return None
    folder = f"{checkpoint}/{OFFSET_STATE_FOLDER}/run={runs[-1]['run_id']}"
    return {name: spark.read.schema(ddl).parquet(f"{folder}/{name}") for name, ddl in OFFSET_STATE_DDLS.items()}


def offset_rule_findings(spark, settings: Settings, checkpoint: str, runs: list[dict], record_range: list[int],
                         new_rows, group_events, end_time_ms: int | None, cached: list | None = None):
    """``(findings, provisional, next_state)`` of the offset rules over this run's commits and timeline rows,
    resumed from the last published run's state (``audit.offsets_resumed``); ``None`` when the checkpoint's
    earlier runs kept no offset-rule state."""
    from pyspark.sql import functions as F

    from offsets_audit.audit.offsets_resumed import resumed_offset_findings
    from offsets_audit.audit.offsets_spark import TIMELINE_DDL

    state = _offset_state(spark, checkpoint, runs)
    if state is None:
        return None
    timeline = new_rows.filter(F.col("kind").isin("context", "ownership")).select(
        "group_id", "kind", F.from_json("payload", TIMELINE_DDL).alias("t")).select("group_id", "kind", "t.*")
    group_times = group_events.filter(F.col("group_id").isNotNull()).select("group_id", "partition", "offset",
                                                                             "timestamp")
    run_log = streaming.commit_log_rows(spark, checkpoint, record_range)
    return resumed_offset_findings(run_log, group_times, timeline, state, settings.rules, settings.topic_ids,
                                       end_time_ms, cached=cached)


def _write_offset_state(checkpoint: str, run_id: str, state: dict) -> None:
    for name, df in state.items():
        df.write.mode("overwrite").parquet(f"{checkpoint}/{OFFSET_STATE_FOLDER}/run={run_id}/{name}")


# -- which micro-batches a run covers ------------------------------------------------------------------------

def _published(checkpoint: str, run_id: str) -> tuple[list[dict], dict]:
    """The published runs before this one, and where this run starts (first fold / records batch, clock).

    What this run reads of them is checked first (``checkpoint.verify``): a piece missing or altered since its run
    was published stops the run with one line."""
    runs = checkpoint_guard.read_runs(checkpoint)
    rerun = bool(runs) and runs[-1]["run_id"] == run_id
    checkpoint_guard.verify(checkpoint, runs, rerun)
    if rerun:
        runs = runs[:-1]  # a rerun of the last run: it covers that run's batches again and replaces its tables
    elif any(r["run_id"] == run_id for r in runs):
        raise UserError(f"run id {run_id} was published before run {runs[-1]['run_id']} of checkpoint {checkpoint}",
                        fix="pass a new --run-id (only the last incremental run can be rerun)")
    last = runs[-1] if runs else None
    start = {"fold": last["fold"][1] + 1 if last else 0, "records": last["records"][1] + 1 if last else 0,
             "clock": last.get("clock") if last else None}
    return runs, start


def _check_last_run_complete(spark, checkpoint: str, runs: list[dict]) -> None:
    """A new run covers only what is new since the last published run, so that run's tables must be complete: a
    run stopped after publishing its checkpoint but before its run manifest is rerun first (its own batches
    again, its tables replaced), never skipped and never doubled by the next run."""
    from offsets_audit.sinks import Output

    last = runs[-1] if runs else None
    if not last or not last.get("output"):
        return
    output = Output.of(last["output"])
    if output.by_name and spark is None:
        return  # a catalog is asked through Spark: checked again once the session is up
    if output.run_manifest(spark, last["run_id"]) is None:
        raise UserError(f"run {last['run_id']} of checkpoint {checkpoint} was stopped before its tables in "
                        f"{output} were marked complete",
                        fix=f"run it again first: --run-id {last['run_id']} (it replaces its tables)")


def check_checkpoint(settings: Settings, checkpoint: str, spark=None) -> tuple[Settings, list[dict], dict, dict]:
    """Before any Spark work: the checkpoint can serve this run (local folders; ``runs.json`` readable and its
    pieces as published; it belongs to this input; the last published run complete). Returns the settings with
    the input's resolved location (the segments stream keys what it read by file path, so the same folder given
    relatively or through a link is read as the same input), the published runs before this one, where this run
    starts, and the input's identity."""
    from offsets_audit.sources.options import source_config

    streaming.check_locations(settings.output.path, checkpoint)
    runs, start = _published(checkpoint, settings.run_id)
    source = checkpoint_guard.resolved_source(source_config(settings))
    if source.get("path") and source.get("path") != settings.source.path:
        settings = settings.replace(source={"path": source["path"]})
    identity = checkpoint_guard.claim(checkpoint, source, runs)
    _check_last_run_complete(spark, checkpoint, runs)
    return settings, runs, start, identity


# -- the run ---------------------------------------------------------------------------------------------------

@frees_its_plans
def run_incremental(spark, settings: Settings, checkpoint: str, *, progress: bool = True) -> RunSummary:
    """Replay and audit what is new since the last run; write this run's tables; return its summary.

    The stages in order, timed by the run's one ``RunStages``; then the run is published (``runs.json``), its
    manifest written last, and what no later run reads is removed. The run holds the leases of its checkpoint and
    its output folder throughout (``offsets_audit.lease``): a second run of either stops with one line naming this
    one. A failure Spark reports on a damaged streaming checkpoint becomes one line too
    (``checkpoint.damaged_checkpoint``)."""
    from offsets_audit.lease import leased
    from offsets_audit.sinks import Output, check_run_id, discard_staged

    check_run_id(settings.run_id)
    output = Output.of(settings.output)
    output.check()
    streaming.check_locations(settings.output.path, checkpoint)
    with leased((checkpoint, "checkpoint"), (output.path, "output"), run_id=settings.run_id), \
            output.leased(spark, settings.run_id):
        try:
            return _run_incremental(spark, settings, checkpoint, progress=progress)
        except BaseException as exc:
            discard_staged(spark, output.path, settings.run_id, output.format)
            refusal = None if isinstance(exc, UserError) or not isinstance(exc, Exception) else \
                checkpoint_guard.damaged_checkpoint(checkpoint, exc)
            if refusal is None:
                raise
            raise refusal from None


def _run_incremental(spark, settings: Settings, checkpoint: str, *, progress: bool) -> RunSummary:
    from offsets_audit.sources.options import source_config

    settings, runs, start, identity = _prepare(spark, settings, checkpoint)
    run_id = settings.run_id
    stages = RunStages(progress=progress)
    try:
        ran_fold: list[int] = []
        ran_records: list[int] = []
        # Two streaming queries that would find nothing cost their start and no more: they are not started.
        if not streaming.nothing_past_committed(source_config(settings), checkpoint):
            with stages.stage("fold+audit"):
                ran_fold = fold_new_records(spark, settings, checkpoint)
            with stages.stage("offsets"):
                ran_records = commit_new_records(spark, settings, checkpoint)
        covered = coverage(spark, settings, checkpoint, runs, start)
        warn_members_left_out(spark, checkpoint, covered.fold_range)
        # the stages below plan over this run's new records (``plans.plain_execution_for_a_small_log``)
        restore = plain_execution_for_a_small_log(spark, covered.counts["decoded"], settings.spark.conf)
        if restore is not None:
            stages.on_release(restore)
        with stages.stage("audit"):
            audited = carried_audit(spark, settings, checkpoint, covered) if idle_run_carries(settings, covered) \
                else None
            carried = audited is not None
            if audited is None:
                audited = audit_run(spark, settings, checkpoint, covered, stages)
        snapshot = next_snapshot(run_id, covered, audited)
        with stages.stage("write"):
            paths, figures = _write_run(spark, settings, audited, stages,
                                        covered.runs[-1]["run_id"] if carried else None)
        summary = _summary(settings, checkpoint, covered, audited, snapshot, ran_fold, ran_records, paths, stages,
                           figures)
        write_summary(spark, settings, summary)
        if carried:
            with stages.stage("carried state"):
                carry_state(checkpoint, run_id, covered)
            publish_run(spark, settings, checkpoint, covered, audited, snapshot, identity, paths)
            return summary
        if audited.offset_state is not None:
            with stages.stage("offset state"):
                _write_offset_state(checkpoint, run_id, audited.offset_state)
        if audited.rerun_state is not None or audited.costs is not None or audited.coordinator_runs is not None:
            with stages.stage("assignor state"):  # one stage: a second block of the name would replace its time
                if audited.rerun_state is not None:
                    audited.rerun_state.write.mode("overwrite").parquet(
                        f"{checkpoint}/{ASSIGNOR_STATE_FOLDER}/run={run_id}")
                if audited.costs is not None:
                    audited.costs.write.mode("overwrite").parquet(f"{checkpoint}/{COST_FOLDER}/run={run_id}")
                if audited.coordinator_runs is not None:
                    audited.coordinator_runs.write.mode("overwrite").parquet(
                        f"{checkpoint}/{COORDINATOR_RUNS_FOLDER}/run={run_id}")
        with stages.stage("compact"):
            compact(spark, checkpoint, run_id, covered, audited, snapshot)
        # Published, then marked complete: a run stopped in between is refused as the next run's base until it is
        # run again (``_check_last_run_complete``), so a night is never skipped and never reported twice.
        publish_run(spark, settings, checkpoint, covered, audited, snapshot, identity, paths)
        return summary
    finally:
        stages.release()


@dataclass(frozen=True)
class Coverage:
    """What a run covers and reads of the past: the published runs before it and where it starts
    (``_published``), every fold / records micro-batch so far and those since the last published run, their
    record counts and the clock (the newest record time so far), and the history later runs read of the past:
    the last published run's chain of compact snapshots plus this run's micro-batches (a checkpoint whose last
    run wrote none: every micro-batch so far)."""

    runs: list[dict]
    start: dict
    all_fold: list[int]
    all_records: list[int]
    fold_range: list[int]
    record_range: list[int]
    counts: dict
    clock: int | None
    chain: list[str]
    history: Any
    #: ``_tail_settings`` of this run, and whether the last run's provisional tail holds for them
    tail_settings: str
    carry_tail: bool

    @property
    def nothing_new(self) -> bool:
        return not self.fold_range and not self.record_range


@dataclass(frozen=True)
class AuditedRun:
    """What the audit stage hands on: this run's tables by name (persisted), the provisional tail, the data gaps
    so far, the offset rules' and assignor re-runs' state for the next run (None: not kept), the groups whose tail
    was recomputed (``provisional_tail``'s ``due``) and how the tail was made."""

    frames: dict
    tail: Any
    gaps: Any
    offset_state: dict | None
    rerun_state: Any
    due: Any
    provisional_how: str
    #: each group's assignor runs timed so far and their estimated time (``COST_DDL``; None: not kept)
    costs: Any = None
    #: every recorded target assignment so far as a coordinator run row (``coordinator_runs``; None: not kept)
    coordinator_runs: Any = None


@dataclass(frozen=True)
class Snapshot:
    """The compact snapshot this run writes: a delta on the last run's chain, or a full one (``next_chain``)."""

    delta: bool
    next_chain: list[str]


def _prepare(spark, settings: Settings, checkpoint: str) -> tuple[Settings, list[dict], dict, dict]:
    """Checks before any Spark work (``check_checkpoint``), the group configs loaded, the published runs before
    this one, where it starts, and the input's identity."""
    from offsets_audit.group_configs import with_group_configs

    streaming.local_folder(checkpoint).mkdir(parents=True, exist_ok=True)
    settings, runs, start, identity = check_checkpoint(settings, checkpoint, spark)
    settings = with_group_configs(settings)
    spark.streams  # noqa: B018 - creates the state store coordinator transformWithStateInPandas needs
    return settings, runs, start, identity


def _new_records(spark, settings: Settings, *, announce: bool = False):
    """What arrived since the last run, decoded. Neither query writes decoded rows (the fold reads the bytes, the
    records query the typed commit values and the quarantine rows, which never have JSON texts): the codec builds
    none (``json_text=False``). ``announce``: say which stream reads a kafka source (once a run: both queries
    read the same way)."""
    from offsets_audit.codec import spark as codec_spark
    from offsets_audit.sources.options import source_config

    return codec_spark.decode(streaming.read_stream(spark, source_config(settings), announce=announce),
                              json_text=False)


def fold_new_records(spark, settings: Settings, checkpoint: str):
    """The fold query: each group's new records folded, and the events it emits fed to its audit
    (``GroupAuditStep``)."""
    return streaming.run_fold_query(spark, _new_records(spark, settings, announce=True), checkpoint,
                                             GroupAuditStep(settings))


def commit_new_records(spark, settings: Settings, checkpoint: str):
    """The records query: the new records' commit log, quarantine rows and counts."""
    return streaming.run_records_query(spark, _new_records(spark, settings), checkpoint)


def coverage(spark, settings: Settings, checkpoint: str, runs: list[dict], start: dict) -> Coverage:
    """Which micro-batches the run covers: every one since the last published run."""
    all_fold = streaming.fold_batches(checkpoint)
    all_records = streaming.counted_batches(checkpoint)
    # a batch Spark committed without its outputs is damage, never a batch with nothing in it
    checkpoint_guard.check_batches(checkpoint, start["fold"], start["records"], all_fold, all_records)
    fold_range = [b for b in all_fold if b >= start["fold"]]
    record_range = [b for b in all_records if b >= start["records"]]
    counts = streaming.record_counts(checkpoint, record_range)
    clock = counts.pop("clock")
    if start["clock"] is not None:
        clock = start["clock"] if clock is None else max(clock, start["clock"])
    chain = streaming.snapshot_chain(runs)
    tail_settings = _tail_settings(settings)
    return Coverage(runs=runs, start=start, all_fold=all_fold, all_records=all_records, fold_range=fold_range,
                    record_range=record_range, counts=counts, clock=clock, chain=chain,
                    history=streaming.history_rows(spark, checkpoint, chain, fold_range, all_fold),
                    tail_settings=tail_settings,
                    carry_tail=bool(chain) and runs[-1].get("tail_settings") == tail_settings)


def audit_run(spark, settings: Settings, checkpoint: str, covered: Coverage, stages: RunStages) -> AuditedRun:
    """The audit stage: this run's tables planned (``audit:plan``, with the provisional pass timed on its own)
    and materialised in one Spark action (``audit:tables``), and the state the next run resumes from."""
    planning = time.perf_counter()
    replayed, quarantine = streaming.replay_tables(spark, checkpoint, covered.fold_range, covered.history,
                                                            covered.record_range)
    frames = {**replayed.as_dict(outputs_only=True), "quarantine": quarantine}
    new_rows = streaming.fold_rows(spark, checkpoint, covered.fold_range)
    reruns = assignor_audit(spark, settings, checkpoint, covered.runs, covered.fold_range, covered.history,
                            frames["offsets"])
    audited, provisional_audited, rerun_state, resumed = reruns if reruns is not None else (None,) * 4
    if resumed is not None:
        stages.on_release(resumed.unpersist)
    costs = run_costs(spark, settings, checkpoint, covered.runs, resumed)
    if costs is not None:
        costs = stages.kept(costs)
    coordinator_rows = coordinator_runs(spark, checkpoint, covered.runs, replayed.target_assignments, resumed)
    load = hogged = None
    if coordinator_rows is not None:
        coordinator_rows = stages.kept(coordinator_rows)
        load, hogged = coordinator_load(coordinator_rows, replayed.group_state, settings, stages)
    tail, how, due = provisional_tail(covered.history, new_rows if covered.fold_range else None, settings,
                                      covered.clock, covered.carry_tail, costs)
    tail = stages.kept(tail)
    with stages.part("audit:provisional_pass"):
        tail.count()  # the provisional pass (Python per recomputed group)
    gaps = stages.kept(streaming.gaps_so_far(spark, checkpoint, covered.chain, covered.record_range,
                                                      covered.all_records))
    cached: list = []  # what the offset rules persist
    stages.on_release(lambda: _unpersist(cached))
    offset_rules = offset_rule_findings(spark, settings, checkpoint, covered.runs, covered.record_range, new_rows,
                                        frames["group_events"], covered.clock, cached)
    findings, provisional = _findings_of_run(settings, new_rows, tail, offset_rules, audited, provisional_audited,
                                             gaps, hogged)
    rebalances = _rebalances_of_run(spark, checkpoint, covered, new_rows, tail)
    frames.update(assignment_interval_whatif=_whatif(tail), coordinator_load=load)
    frames.update(findings=findings, rebalances=rebalances["rebalances"], provisional_findings=provisional,
                  provisional_rebalances=rebalances["provisional_rebalances"],
                  latency_summary=rebalances["latency_summary"], rebalance_causes=rebalances["rebalance_causes"],
                  latency_daily=rebalances["latency_daily"], assignor_audit=audited,
                  provisional_assignor_audit=provisional_audited)
    frames = {name: (None if df is None else stages.kept(df)) for name, df in frames.items()}
    # Building the plans (and the few small jobs that read the checkpoint's state while doing so).
    stages.record("audit:plan", time.perf_counter() - planning - stages.timings["audit:provisional_pass"])
    # A stage boundary: every table and the re-runs' next state computed in one Spark action (``plans.materialize``).
    if rerun_state is not None:
        rerun_state = stages.kept(rerun_state)
    with stages.part("audit:tables"):
        materialize([*frames.values(), rerun_state, coordinator_rows])
    if rerun_state is not None:
        assert resumed is not None  # the re-runs' state is read from their rows
        resumed.unpersist()
    return AuditedRun(frames=frames, tail=tail, gaps=gaps, offset_state=None if offset_rules is None else offset_rules[2],
                      rerun_state=rerun_state, due=due, provisional_how=how, costs=costs,
                      coordinator_runs=coordinator_rows)


# -- a run with nothing new -------------------------------------------------------------------------------------

def bytes_to_read(settings: Settings, checkpoint: str, input_bytes: int | None) -> int | None:
    """What a run on ``checkpoint`` will read of an input of ``input_bytes`` (``sources.preflight``): nothing when
    neither streaming query has anything past its commits (``streaming.nothing_past_committed``), else at most the
    whole input. A local session is sized by it (``spark_session.get_spark``)."""
    from offsets_audit.sources.options import source_config

    return 0 if streaming.nothing_past_committed(source_config(settings), checkpoint) else input_bytes


def idle_run_carries(settings: Settings, covered: Coverage) -> bool:
    """Whether this run, which read no new record, can take its tables and the state it leaves from the last
    published run instead of auditing again (``carried_audit``, ``carry_state``).

    With no new record the clock stands where the last run left it, every group's audit, offset-rule and re-run
    state is the one that run stored, and its provisional tail was finished at that same clock with the same
    settings (``Coverage.carry_tail``): recomputing a group whose timer the clock reached gives the rows the last
    run carried or recomputed for it. So the run's tables are the last run's whole-log tables, the provisional ones
    included, and empty tables of what this run's records complete. That holds when the last run kept every piece
    an idle run would resume (offset-rule state, the re-runs' state and costs as the assignor audit asks, the
    coordinator's run rows), its tables sit where this run writes, and this run's snapshot would be a delta on its
    chain (``next_snapshot``); otherwise the run audits as any other."""
    from offsets_audit.sinks import Output

    runs = covered.runs
    if not covered.nothing_new or not runs or not covered.carry_tail:
        return False
    last = runs[-1]
    audit = bool(settings.assignors.audit)
    return (covered.clock == last.get("clock") and bool(last.get("compact")) and "chain" in last
            and 0 < len(covered.chain) <= streaming.DELTAS_BEFORE_FULL
            and bool(last.get("offset_rules")) and bool(last.get(COORDINATOR_RUNS_FOLDER))
            and bool(last.get("assignor_state")) == audit and bool(last.get("coordinator_costs")) == audit
            and bool(last.get("output")) and Output.of(last["output"]) == Output.of(settings.output))


#: Tables an idle run takes whole from the last published run (``carried_audit``): what the end of the log and the
#: whole log so far give, which no new record changed.
CARRIED_TABLES = ("group_state", "members", "offsets", "provisional_findings", "provisional_assignor_audit",
                  "coordinator_load", "assignment_interval_whatif")
#: Tables whose rows an idle run writes as the last run wrote them: ``CARRIED_TABLES`` and the rebalances left open,
#: which are the idle run's open rebalances too (``_days_left_open``).
COPIED_TABLES = (*CARRIED_TABLES, "provisional_rebalances")
#: Tables of what a run's own records complete, which an idle run has none of (``carried_audit`` plans them empty).
EMPTY_WHEN_CARRIED = ("findings", "rebalances", "assignor_audit", "group_events", "target_assignments", "quarantine")


def carried_audit(spark, settings: Settings, checkpoint: str, covered: Coverage) -> AuditedRun | None:
    """The audit stage of a run with nothing new (``idle_run_carries``): ``CARRIED_TABLES`` read from the last run's
    tables; the provisional rebalances (the last run's, read from its files when they hold the rebalances' columns,
    else from the snapshot's tails as any run plans them) and the latency tables of them; the tables of this run's
    records empty. No replay, Python pass, re-run or offset-rule plan runs. The state
    it hands on is the last run's (``carry_state`` copies it). None when a table of the last run is not there to
    read (the run then audits as any other)."""
    from offsets_audit.assignors import spark as assignor_spark
    from offsets_audit import tables
    from offsets_audit.audit.coordinator_load import RUN_DDL
    from offsets_audit.sinks import Output

    last = covered.runs[-1]
    replayed, _ = streaming.replay_tables(spark, checkpoint, [], covered.history, [])
    output = Output.of(last["output"])
    earlier = {name: _read_carried(spark, output, name, last["run_id"]) for name in CARRIED_TABLES}
    if any(df is None for df in earlier.values()):
        return None
    frames: dict = {**replayed.as_dict(outputs_only=True), "quarantine": None}
    frames.update({name: earlier[name] for name in ("group_state", "members", "offsets")})
    back = {new: old for old, new in streaming.TAIL_KINDS.items()}
    tail = streaming.latest_tails(covered.history).select(streaming.renamed_kinds(back).alias("kind"), "group_id",
                                                          "payload")
    rebalances = _rebalances_of_run(spark, checkpoint, covered, streaming.fold_rows(spark, checkpoint, []), tail,
                                    days=_days_left_open(output, last["run_id"]),
                                    still_open=_read_as_like(spark, output, "provisional_rebalances", last["run_id"]))
    frames.update(findings=tables.empty(spark, "findings"), rebalances=rebalances["rebalances"],
                  provisional_findings=earlier["provisional_findings"],
                  provisional_rebalances=rebalances["provisional_rebalances"],
                  latency_summary=rebalances["latency_summary"], rebalance_causes=rebalances["rebalance_causes"],
                  latency_daily=rebalances["latency_daily"],
                  assignment_interval_whatif=earlier["assignment_interval_whatif"],
                  coordinator_load=earlier["coordinator_load"])
    if settings.assignors.audit:
        frames.update(assignor_audit=tables.empty(spark, "assignor_audit"),
                      provisional_assignor_audit=earlier["provisional_assignor_audit"])
    else:
        frames.update(assignor_audit=None, provisional_assignor_audit=None)
    folder = f"{checkpoint}/{{}}/run={last['run_id']}"
    rerun_state = costs = None
    if settings.assignors.audit:
        rerun_state = spark.read.schema(assignor_spark.RERUN_STATE_DDL).parquet(folder.format(ASSIGNOR_STATE_FOLDER))
        costs = spark.read.schema(COST_DDL).parquet(folder.format(COST_FOLDER))
    return AuditedRun(
        frames=frames, tail=tail, gaps=None, offset_state=_offset_state(spark, checkpoint, covered.runs),
        rerun_state=rerun_state, due=spark.createDataFrame([], "group_id string"),
        provisional_how="carried from the last run (nothing new, the clock did not move): every group's rows",
        costs=costs,
        coordinator_runs=spark.read.schema(RUN_DDL).parquet(folder.format(COORDINATOR_RUNS_FOLDER)))


def _read_carried(spark, output, table: str, run_id: str):
    """Run ``run_id``'s rows of ``table`` (``Output.read_table``). A table an incremental run adds, which has no
    schema of its own, is read with the columns of the table it is like when its files hold exactly those
    (``_read_as_like``): Spark would otherwise infer them from the files, a job per table."""
    df = _read_as_like(spark, output, table, run_id)
    return output.read_table(spark, table, run_id) if df is None else df


def _read_as_like(spark, output, table: str, run_id: str):
    """Run ``run_id``'s rows of ``table``, a table an incremental run adds, read with the columns of the table it is
    like (``tables.like``) when its files hold exactly those (Parquet under a local path); None otherwise."""
    from offsets_audit import tables
    from offsets_audit.sinks.parquet import read_parquet_run_as

    like = tables.like(table)
    if like is None or output.by_name or output.format != "parquet":
        return None
    return read_parquet_run_as(spark, output.path, table, run_id, tables.schema(like))


def _days_left_open(output, run_id: str) -> list[str] | None:
    """The days the rebalances run ``run_id`` left open touch, from its ``provisional_rebalances`` files (Parquet
    under a local path, read on the driver); None when they cannot be read that way. A run with nothing new
    (``carried_audit``) has those very rebalances open: its tail is the newest the snapshot chain holds of every
    group, which is the last run's tail."""
    from offsets_audit.sinks.parquet import parquet_run_values

    if output.by_name or output.format != "parquet":
        return None
    values = parquet_run_values(output.path, "provisional_rebalances", run_id, "day")
    return None if values is None else sorted({day for day in values if day is not None})


def carry_state(checkpoint: str, run_id: str, covered: Coverage) -> None:
    """What a run with nothing new leaves for the next (``idle_run_carries``): the last run's offset-rule state,
    re-run state, costs and coordinator run rows under this run's id (copied: no new record changed them), an empty
    delta snapshot on the last run's chain (every group's newest rows and tail are already in it) and an empty
    store of completed rebalances."""
    import shutil

    root = streaming.local_folder(checkpoint)
    last = covered.runs[-1]
    for folder, kept in ((OFFSET_STATE_FOLDER, last.get("offset_rules")),
                         (ASSIGNOR_STATE_FOLDER, last.get("assignor_state")),
                         (COST_FOLDER, last.get("coordinator_costs")),
                         (COORDINATOR_RUNS_FOLDER, last.get(COORDINATOR_RUNS_FOLDER))):
        target = root / folder / f"run={run_id}"
        shutil.rmtree(target, ignore_errors=True)
        if kept:
            shutil.copytree(root / folder / f"run={last['run_id']}", target)
    streaming.write_empty_delta(checkpoint, run_id)


def _unpersist(dfs: list) -> None:
    for df in dfs:
        df.unpersist()


def _findings_of_run(settings: Settings, new_rows, tail, offset_rules, audited, provisional_audited, gaps,
                     hogged=None):
    """``(findings, provisional)``: the finding rows this run's records complete and those open at the end of
    the log, of the group rules, the offset rules and the assignor re-runs, with the data-gap columns; ``hogged``
    (``coordinator_load``'s findings over the whole log so far) are provisional."""
    from pyspark.sql import functions as F

    from offsets_audit.audit.gaps import mark_data_gaps

    def timed(df):
        return df.withColumn("time", F.timestamp_millis(F.col("time")))

    findings, provisional = _findings(new_rows), _findings(tail)
    if offset_rules is not None:
        completed, still_open, _ = offset_rules
        if completed is not None:
            findings = findings.unionByName(timed(completed))
        if still_open is not None:
            provisional = provisional.unionByName(timed(still_open))
    mismatches = assignor_mismatches(audited, settings)
    if mismatches is not None:
        findings = findings.unionByName(timed(mismatches))
    mismatches = assignor_mismatches(provisional_audited, settings)
    if mismatches is not None:
        provisional = provisional.unionByName(timed(mismatches))
    if hogged is not None:
        provisional = provisional.unionByName(timed(hogged))
    trust = settings.check.trust_after_gap
    return (mark_data_gaps(findings, gaps, trust_after_gap=trust),
            mark_data_gaps(provisional, gaps, trust_after_gap=trust))


def _rebalances_of_run(spark, checkpoint: str, covered: Coverage, new_rows, tail,
                       days: list[str] | None = None, still_open=None) -> dict:
    """The rebalances this run completes and those still open (``tail``'s, or ``still_open`` when the caller has
    them as rows), their latency summary and causes, and ``latency_daily``: the latency summary of every day this
    run's rebalances touch (``days`` when the caller knows them), over all rebalances of those days so far."""
    from pyspark.sql import functions as F

    rebalances = _rebalances(new_rows)
    open_rebalances = _rebalances(tail) if still_open is None else still_open.select(*REBALANCE_COLUMNS)
    of_run = rebalances.unionByName(open_rebalances)
    # A few days: the store is read by day folder, so a run reads the rebalances of its own days only.
    if days is None:
        days = sorted(r["day"] for r in of_run.select("day").distinct().collect() if r["day"] is not None)
    earlier = streaming.stored_rebalances(spark, checkpoint, [r["run_id"] for r in covered.runs], days)
    cumulative = (_rebalances(earlier.unionByName(covered.history)).unionByName(open_rebalances)
                  .filter(F.col("day").isin(*days)))
    return {"rebalances": rebalances, "provisional_rebalances": open_rebalances,
            "latency_summary": latency_summary(of_run), "rebalance_causes": rebalance_causes(of_run),
            "latency_daily": latency_summary(cumulative)}


def next_snapshot(run_id: str, covered: Coverage, audited: AuditedRun) -> Snapshot:
    """A delta snapshot when the tails of untouched groups were carried and the chain is short, else a full one;
    always a full one after a snapshot written before chains (it may hold completed rebalances, which this run
    stores and the next must not read again)."""
    chain = covered.chain
    delta = (audited.due is not None and 0 < len(chain) <= streaming.DELTAS_BEFORE_FULL
             and "chain" in covered.runs[-1])
    return Snapshot(delta=delta, next_chain=chain + [run_id] if delta else [run_id])


def _write_run(spark, settings: Settings, audited: AuditedRun, stages: RunStages,
               carried_from: str | None) -> tuple[dict, dict]:
    """``(paths, figures)``: the run's tables written (``write_tables``) and the summary's figures. A run that carried
    ``carried_from``'s tables to a Parquet output under a path takes its figures from the files, after the write
    (``sinks.summary.carried_run_figures``: no Spark job); any other computes them (a small job over the tables)
    beside the write, which mostly waits on files. Their time: ``write:summary_figures``."""
    import time

    from offsets_audit.sinks import Output

    output = Output.of(settings.output)
    if carried_from is not None and not output.by_name and output.format == "parquet":
        from offsets_audit.sinks.summary import carried_run_figures

        paths = write_tables(spark, settings, audited.frames, stages, carried_from)
        began = time.perf_counter()
        figures = carried_run_figures(output.path, carried_from, settings.run_id)
        if figures is None:
            figures = run_figures(audited.frames)
        stages.record("write:summary_figures", time.perf_counter() - began)
        return paths, figures
    done = side_by_side({
        "tables": lambda: write_tables(spark, settings, audited.frames, stages, carried_from),
        "summary_figures": lambda: run_figures(audited.frames)}, workers=2)
    (paths, _), (figures, figures_s) = done["tables"], done["summary_figures"]
    stages.record("write:summary_figures", figures_s)
    return paths, figures


def write_tables(spark, settings: Settings, frames: dict, stages: RunStages,
                 carried_from: str | None = None) -> dict:
    """Every table of the run under its run id, under a path or by name (``sinks.Output.write_run``); the run
    manifest is written last, by ``publish_run``. ``carried_from``: the run whose ``COPIED_TABLES`` this run wrote
    as they were (``carried_audit``), whose files a Parquet output copies rather than writing their rows again."""
    from offsets_audit.sinks import Output

    output = Output.of(settings.output)
    carried = None
    if carried_from is not None:
        carried = {name: carried_from for name in COPIED_TABLES}
        if not output.by_name and output.format == "parquet":
            # the tables of this run's records, which has none: written as empty without planning their frames
            frames = {**frames, **{name: None for name in EMPTY_WHEN_CARRIED if name in frames}}
    return output.write_run(spark, settings.run_id, frames, timings=stages.timings, manifest=False,
                            carried=carried)


def _summary(settings: Settings, checkpoint: str, covered: Coverage, audited: AuditedRun, snapshot: Snapshot,
             ran_fold, ran_records, paths: dict, stages: RunStages, figures: dict) -> RunSummary:
    """The run's summary (``figures``: ``run_figures`` of its tables); a stage that did not run says "skipped" and
    why."""
    chain, offset_state = covered.chain, audited.offset_state
    stages_ran = {
        "replay": "ran" if not covered.nothing_new else "skipped: nothing new since the last run",
        "audit": "ran (group rules, rebalances)",
        "offset_rules": "ran" if offset_state is not None else
        ("skipped: this checkpoint's earlier runs kept no offset-rule state (start a new checkpoint to "
         "audit offsets incrementally): " + ", ".join(OFFSET_RULES)),
        "assignor_audit": "ran" if settings.assignors.audit else "skipped: assignors.audit is off",
        "coordinator_load": "ran (the whole log so far)" if audited.coordinator_runs is not None else
        ("skipped: this checkpoint's earlier runs kept no coordinator run rows (start a new checkpoint to have "
         "coordinator_load and coordinator_partition_hogged incrementally)"),
        "provisional": audited.provisional_how,
        "history": (f"compact snapshot of run {chain[-1]}"
                    + (f" (delta {len(chain) - 1} on the full snapshot of run {chain[0]})" if len(chain) > 1 else "")
                    + f" + {len(covered.fold_range)} new fold micro-batch(es)" if chain else
                    f"{len(covered.all_fold)} fold micro-batch(es) (no compact snapshot yet)"),
        "snapshot": (f"delta on run {chain[-1]}: the touched groups and the tails recomputed"
                     if snapshot.delta else "full: every group"),
    }
    facts = IncrementalFacts(
        checkpoint=checkpoint, clock=covered.clock, stages=stages_ran,
        batches=MicroBatches(fold=ran_fold, records=ran_records, covered_fold=covered.fold_range,
                             covered_records=covered.record_range),
        skipped_rules=() if offset_state is not None else tuple(OFFSET_RULES))
    return RunSummary(run_id=settings.run_id, records=RecordCounts.of(covered.counts), timings_s=stages.timings,
                      tables=paths, incremental=facts).with_figures(figures)


def compact(spark, checkpoint: str, run_id: str, covered: Coverage, audited: AuditedRun, snapshot: Snapshot) -> None:
    """The compact snapshot the next run reads instead of this run's and earlier micro-batches, and the
    rebalances this run completed (written before publishing: a run killed before that leaves folders the next
    published run removes)."""
    keep_targets = audited.rerun_state is None
    if snapshot.delta:
        rows = streaming.compact_rows(streaming.fold_rows(spark, checkpoint, covered.fold_range),
                                               audited.tail.join(audited.due, "group_id", "left_semi"), keep_targets,
                                               len(covered.runs), audited.due)
        new_gaps = streaming.new_gaps(spark, checkpoint, covered.record_range)
    else:
        rows = streaming.compact_rows(covered.history, audited.tail, keep_targets, len(covered.runs))
        new_gaps = audited.gaps
    streaming.write_compact(spark, checkpoint, run_id, rows, new_gaps)
    streaming.write_rebalances(checkpoint, run_id, covered.history)


def publish_run(spark, settings: Settings, checkpoint: str, covered: Coverage, audited: AuditedRun,
                snapshot: Snapshot, identity: dict, paths: dict) -> None:
    """Publish the run in ``runs.json`` (the next run starts after the batches it covered; its entry lists the
    pieces a later run reads, with their checksums, and the input), mark its tables complete (the run manifest,
    the last thing a run writes), then remove what no later run reads."""
    from offsets_audit.sinks import Output

    start, run_id = covered.start, settings.run_id
    output = Output.of(settings.output)
    entry = {
        "run_id": run_id, "fold": [start["fold"], max(covered.all_fold, default=start["fold"] - 1)],
        "records": [start["records"], max(covered.all_records, default=start["records"] - 1)], "clock": covered.clock,
        "offset_rules": audited.offset_state is not None, "assignor_state": audited.rerun_state is not None,
        "coordinator_costs": audited.costs is not None, COORDINATOR_RUNS_FOLDER: audited.coordinator_runs is not None,
        "compact": True, "chain": snapshot.next_chain, "tail_settings": covered.tail_settings, "source": identity,
        "output": {"path": output.path, "format": output.format, "catalog": output.catalog}}
    entry["pieces"] = checkpoint_guard.pieces(checkpoint, entry)
    runs = checkpoint_guard.published_entry(covered.runs, entry)
    streaming.write_json(streaming.local_folder(checkpoint) / RUNS_FILE, runs)
    checkpoint_guard.published(checkpoint, len(runs))
    output.complete_run(spark, run_id, paths)
    _drop_unneeded(checkpoint, runs, start["records"], start["fold"])


def _drop_unneeded(checkpoint: str, runs: list[dict], first_records_batch: int,
                   first_fold_batch: int | None = None) -> None:
    """After publishing: remove what no later run reads. A rerun of the run just published covers its batches
    again from the state of the run before it; a new run covers newer batches from this run's state. So the
    commit log's micro-batches before this run's first, the offset-rule / assignor states of runs before the
    previous one, and the compact snapshots in neither chain of the last two runs, go; once the run has a
    compact snapshot, so do the fold rows, quarantine rows and counts of the micro-batches before its first; and
    the stored rebalances of runs never published (a crash half-way leaves folders the next run removes)."""
    import re
    import shutil

    streaming.drop_commit_log_before(checkpoint, first_records_batch)
    if first_fold_batch is not None and runs and runs[-1].get("compact"):
        streaming.drop_batches_before(checkpoint, first_fold_batch, first_records_batch)
    last_two = {f"run={r['run_id']}" for r in runs[-2:]}
    published = {f"run={r['run_id']}" for r in runs}
    chains = {f"run={r}" for n in (len(runs), len(runs) - 1) for r in streaming.snapshot_chain(runs[:n])}
    for folder, keep in ((OFFSET_STATE_FOLDER, last_two), (ASSIGNOR_STATE_FOLDER, last_two), (COST_FOLDER, last_two),
                         (COORDINATOR_RUNS_FOLDER, last_two),
                         (streaming.COMPACT_FOLDER, chains), (streaming.REBALANCE_STORE, published)):
        root = streaming.local_folder(checkpoint) / folder
        if root.is_dir():
            for child in root.iterdir():
                if re.fullmatch(r"run=.+", child.name) and child.name not in keep:
                    shutil.rmtree(child, ignore_errors=True)


def read_runs(spark, output, fmt: str = "parquet") -> dict:
    """Every published run's tables as one DataFrame per table (``run_id`` column kept), for readers that want the
    history: the union of ``findings`` over runs plus the last run's ``provisional_findings`` is what one batch run
    over the whole log reports. ``output`` is a ``sinks.Output`` (tables by name or under a path) or a path."""
    from offsets_audit import sinks

    where = output if isinstance(output, sinks.Output) else sinks.Output(path=output, format=fmt)
    out: dict = {}
    for manifest in where.complete_runs(spark):
        for table in manifest.get("tables") or {}:
            df = where.read_table(spark, table, manifest["run_id"])
            if df is None:
                continue
            from pyspark.sql import functions as F

            df = df.withColumn("run_id", F.lit(manifest["run_id"]))
            out[table] = df if table not in out else out[table].unionByName(df, allowMissingColumns=True)
    return out


def print_summary(summary: RunSummary, file=None) -> None:
    """The run's summary lines; a stage that did not run says "skipped", never a count."""
    from offsets_audit.sinks.summary import (
        latency_quartet,
        print_groups_and_quarantine,
        print_records,
        print_rule_counts,
        print_timings,
    )

    file = file or sys.stdout
    covered = summary.incremental.batches.covered_records if summary.incremental is not None else []
    print_records(summary, file, f" (incremental, {len(covered)} new micro-batch(es))")
    print_groups_and_quarantine(summary, file)
    print_rule_counts("findings (completed by this run's records)", summary.findings, file)
    print_rule_counts("provisional findings (open at the end of the log; the next run replaces them)",
                      summary.provisional_findings, file)
    for stage, state in summary.stages.items():
        if state.startswith("skipped"):
            print(f"{stage}: {state}", file=file)
    for row in summary.latency or []:
        print(f"  latency {row.get('group_type') or '?':<10} rebalances {row.get('rebalances', 0)}: to-assignment "
              f"{latency_quartet(row, 'time_to_assignment_ms')}, convergence {latency_quartet(row, 'convergence_ms')} ms", file=file)
    print_timings(summary, file)
